// Checks llama_sampler_init_temp_ext(temp, delta, exponent) (llama.h) when it runs in the graph
// (llama_context_params.samplers): the same sampler must scale the candidates as its CPU path,
// llama_sampler_temp_ext_apply, does. Its backend_apply computes another temperature:
//   1. after a stage that masks with -INFINITY in the graph (min_p), it normalizes the entropy
//      by log of the whole tensor's length, where the CPU path divides by the log of the
//      candidates it still holds;
//   2. on a single candidate (after top_k(1)) it divides by log(1) = 0 and leaves NaN, where
//      the CPU path leaves the candidate as it is;
//   3. with temp <= 0 and delta > 0 it falls back to plain temperature 0 (keeps the top
//      candidate only), where the CPU path computes a dynamic temperature in [0, temp + delta].
// Each chain runs in the graph after the prompt and, on the CPU, over the raw logits of a
// second context without samplers. A candidate's logit counts as the CPU's when within 1e-3 of
// it (relative): rounding and the graph's clamp of the probabilities move it by less than 1e-4
// here, the differences above by tens of percent. A chain whose temp_ext the build keeps on the
// CPU (its backend_init returns false; llama.cpp then names it without a leading '+') is not
// compared.
// Usage: repro MODEL.gguf. Exit: 0 when every chain agrees, 1 when one does not, 2 on a setup
// error.
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-3

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

static struct llama_sampler * chain_of(struct llama_sampler * a, struct llama_sampler * b) {
    struct llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (a) llama_sampler_chain_add(c, a);
    llama_sampler_chain_add(c, b);
    return c;
}

// One chain (`top_k` > 0 adds top_k first, `min_p` > 0 min_p first) then temp_ext(temp, delta,
// 1): prints what it expected and got; returns 0 (agrees or not in the graph), 1 or 2.
static int check(struct llama_model * model, llama_token * toks, int n, const float * raw,
                 int n_vocab, const char * name, int top_k, float min_p, float temp, float delta) {
    struct llama_sampler * g_chain = chain_of(
        top_k > 0 ? llama_sampler_init_top_k(top_k) : min_p > 0 ? llama_sampler_init_min_p(min_p, 1) : NULL,
        llama_sampler_init_temp_ext(temp, delta, 1.0f));
    struct llama_sampler * c_chain = chain_of(
        top_k > 0 ? llama_sampler_init_top_k(top_k) : min_p > 0 ? llama_sampler_init_min_p(min_p, 1) : NULL,
        llama_sampler_init_temp_ext(temp, delta, 1.0f));

    // the CPU path over the raw logits
    llama_token_data * data = malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    float * graph = malloc(sizeof(float) * (size_t) n_vocab);
    int rc = 2;
    struct llama_context * ctx = data && graph ? decode(model, toks, n, g_chain) : NULL;
    if (ctx) {
        for (int i = 0; i < n_vocab; i++) {
            data[i] = (llama_token_data) { .id = i, .logit = raw[i], .p = 0.0f };
            graph[i] = -INFINITY;
        }
        llama_token_data_array cur = { .data = data, .size = (size_t) n_vocab, .selected = -1, .sorted = false };
        llama_sampler_apply(c_chain, &cur);

        // llama.cpp names a sampler it placed in the graph with a leading '+'
        const char * placed = llama_sampler_name(llama_sampler_chain_get(g_chain, llama_sampler_chain_n(g_chain) - 1));
        const float * logits = placed[0] == '+' ? llama_get_sampled_logits_ith(ctx, -1) : NULL;
        const uint32_t count = llama_get_sampled_logits_count_ith(ctx, -1);
        const llama_token * ids = llama_get_sampled_candidates_ith(ctx, -1);
        const uint32_t n_ids = llama_get_sampled_candidates_count_ith(ctx, -1);

        int cpu_kept = 0;
        for (size_t i = 0; i < cur.size; i++) {
            cpu_kept += isfinite(cur.data[i].logit) ? 1 : 0;
        }
        printf("expected: %s keeps the %d candidates the CPU keeps, each logit within %g (relative) of the CPU's\n",
               name, cpu_kept, TOL);
        if (!logits) {
            printf("got:      temp_ext does not run in the graph here (the CPU path runs it)\n");
            rc = 0;
        } else {
            int kept = 0;
            for (uint32_t i = 0; i < count; i++) {
                const int id = n_ids > 0 && ids ? ids[i] : (int) i;
                if (id >= 0 && id < n_vocab) {
                    graph[id] = logits[i];
                }
                kept += isfinite(logits[i]) ? 1 : 0;
            }
            double worst = 0.0;
            int missing = 0;
            for (size_t i = 0; i < cur.size; i++) {
                const float c = cur.data[i].logit;
                if (!isfinite(c)) {
                    continue;
                }
                const float g = graph[cur.data[i].id];
                if (!isfinite(g)) {
                    missing++;
                    continue;
                }
                const double d = c == 0.0f ? fabs((double) g) : fabs(((double) g - c) / c);
                worst = d > worst ? d : worst;
            }
            printf("got:      it keeps %d (%d of the CPU's missing or NaN), logits up to %.3g (relative) from the CPU's\n",
                   kept, missing, worst);
            rc = kept == cpu_kept && missing == 0 && worst <= TOL ? 0 : 1;
        }
        llama_free(ctx);
    }
    free(graph);
    free(data);
    llama_sampler_free(g_chain); // after the context that used it
    llama_sampler_free(c_chain);
    return rc;
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
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const char * prompt = "Name three rivers.";
    llama_token toks[64];
    const int n = llama_tokenize(vocab, prompt, (int) strlen(prompt), toks, 64, true, false);

    struct llama_context * plain = n > 0 ? decode(model, toks, n, NULL) : NULL;
    int rc = 2;
    if (plain) {
        const float * raw = llama_get_logits_ith(plain, -1);
        const int r1 = check(model, toks, n, raw, n_vocab, "in-graph min_p(0.05) -> temp_ext(0.8, 0.5, 1)", 0, 0.05f, 0.8f, 0.5f);
        const int r2 = check(model, toks, n, raw, n_vocab, "in-graph top_k(1) -> temp_ext(0.8, 0.5, 1)", 1, 0.0f, 0.8f, 0.5f);
        const int r3 = check(model, toks, n, raw, n_vocab, "in-graph temp_ext(0, 0.5, 1)", 0, 0.0f, 0.0f, 0.5f);
        rc = r1 == 2 || r2 == 2 || r3 == 2 ? 2 : r1 || r2 || r3 ? 1 : 0;
        llama_free(plain);
    }
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
