// Checks llama_get_sampled_token_ith (llama.h, backend sampling API): it returns the sampled
// token, i.e. a vocab id. With the in-graph chain top_k(40) -> greedy, greedy's backend_apply
// takes argmax over top_k's 40 survivors and returns that index without mapping it through
// data->candidates (dist's backend_apply does map), so the "token" is an index in [0, 40).
// Expected: the argmax id of the raw logits, read from a second context without samplers
// (in the sampling context llama_get_logits_ith returns top_k's 40 sampled logits instead).
// Usage: repro MODEL.gguf. Exit: 0 when they agree, 1 when not, 2 on a setup error or when
// the argmax id is below 40 (an index and an id would then be indistinguishable).
#include "llama.h"

#include <stdio.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) level; (void) text; (void) user;
}

// a context that has decoded the prompt, with `chain` in the graph for seq 0 unless NULL
static struct llama_context * decode(struct llama_model * model, llama_token * toks, int n,
                                     struct llama_sampler * chain) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_sampler_seq_config cfg = { .seq_id = 0, .sampler = chain };
    if (chain) {
        cp.samplers = &cfg; // copied by the context; the chain must outlive it
        cp.n_samplers = 1;
    }
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (ctx && llama_decode(ctx, llama_batch_get_one(toks, n)) != 0) {
        llama_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0; // CPU: the build under test has no other backend
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        llama_backend_free();
        return 2;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const char * prompt = "Name three rivers.";
    llama_token toks[64];
    const int n = llama_tokenize(vocab, prompt, (int) strlen(prompt), toks, 64, true, false);

    struct llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());

    struct llama_context * plain = n > 0 ? decode(model, toks, n, NULL) : NULL;
    struct llama_context * graph = n > 0 ? decode(model, toks, n, chain) : NULL;

    int rc = 2;
    if (plain && graph) {
        const float * raw = llama_get_logits_ith(plain, -1);
        llama_token want = 0;
        for (llama_token i = 1; i < llama_vocab_n_tokens(vocab); i++) {
            want = raw[i] > raw[want] ? i : want;
        }
        const llama_token got = llama_get_sampled_token_ith(graph, -1);
        printf("expected: in-graph top_k(40) -> greedy samples token %d (argmax of the raw logits)\n", want);
        printf("got:      llama_get_sampled_token_ith = %d (%u candidates after top_k)\n", got,
               llama_get_sampled_candidates_count_ith(graph, -1));
        // An argmax below 40 could equal its own index: the check would then see nothing.
        rc = got == LLAMA_TOKEN_NULL || want < 40 ? 2 : got == want ? 0 : 1;
    }

    if (graph) llama_free(graph);
    if (plain) llama_free(plain);
    llama_sampler_free(chain); // after the context that used it
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
