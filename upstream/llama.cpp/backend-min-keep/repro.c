// Checks min_keep of llama_sampler_init_top_p(p, min_keep) and llama_sampler_init_min_p(p,
// min_keep) (llama.h) when the stage runs in the graph (llama_context_params.samplers): the
// CPU path keeps at least min_keep candidates; the backend_apply of both ignores min_keep.
// After the prompt "Name three rivers.", top_p(0.1) and min_p(0.5) alone keep fewer than 8,
// so top_p(0.1, 8) and min_p(0.5, 8) must each keep at least 8 (kept = finite sampled logit).
// Usage: repro MODEL.gguf. Exit: 0 when both keep >= 8, 1 when not, 2 on a setup error or
// when min_keep 1 already keeps >= 8 (then min_keep 8 could not be seen to act).
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MIN_KEEP 8

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) level; (void) text; (void) user;
}

// candidates the in-graph `stage` keeps after the prompt, or -1 on a setup error
static int kept(struct llama_model * model, llama_token * toks, int n, struct llama_sampler * stage) {
    struct llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, stage);

    struct llama_sampler_seq_config cfg = { .seq_id = 0, .sampler = chain };
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.samplers = &cfg;
    cp.n_samplers = 1;

    int count = -1;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (ctx && llama_decode(ctx, llama_batch_get_one(toks, n)) == 0) {
        // NULL if the stage did not run in the graph
        const float * logits = llama_get_sampled_logits_ith(ctx, -1);
        const uint32_t size = llama_get_sampled_logits_count_ith(ctx, -1);
        if (logits) {
            count = 0;
            for (uint32_t i = 0; i < size; i++) {
                count += isfinite(logits[i]) ? 1 : 0;
            }
        }
    }
    if (ctx) llama_free(ctx);
    llama_sampler_free(chain); // after the context that used it; frees `stage` too
    return count;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        llama_backend_free();
        return 2;
    }
    const char * prompt = "Name three rivers.";
    llama_token toks[64];
    const int n = llama_tokenize(llama_model_get_vocab(model), prompt, (int) strlen(prompt), toks, 64, true, false);

    const int top_p = n > 0 ? kept(model, toks, n, llama_sampler_init_top_p(0.1f, MIN_KEEP)) : -1;
    const int min_p = n > 0 ? kept(model, toks, n, llama_sampler_init_min_p(0.5f, MIN_KEEP)) : -1;
    const int top_p1 = n > 0 ? kept(model, toks, n, llama_sampler_init_top_p(0.1f, 1)) : -1;
    const int min_p1 = n > 0 ? kept(model, toks, n, llama_sampler_init_min_p(0.5f, 1)) : -1;

    printf("expected: in-graph top_p(0.1, %d) keeps >= %d, in-graph min_p(0.5, %d) keeps >= %d\n",
           MIN_KEEP, MIN_KEEP, MIN_KEEP, MIN_KEEP);
    printf("got:      top_p keeps %d, min_p keeps %d (with min_keep 1: %d and %d)\n", top_p, min_p, top_p1, min_p1);

    llama_model_free(model);
    llama_backend_free();
    if (top_p < 0 || min_p < 0 || top_p1 < 0 || min_p1 < 0 || top_p1 >= MIN_KEEP || min_p1 >= MIN_KEEP) {
        return 2;
    }
    return top_p >= MIN_KEEP && min_p >= MIN_KEEP ? 0 : 1;
}
