// Checks llama_sampler_clone (llama.h) on adaptive-p (llama_sampler_init_adaptive_p, PR 17927):
// a clone must carry the sampler's state, so clone and original fed the same input select the
// same tokens with bit-identical p values, as dist and mirostat clones do (they copy their RNG).
// adaptive-p's clone re-seeds its RNG from the seed and leaves original_probs empty.
// Run: original for WARMUP steps (apply, then accept the selected token), clone it, then
// STEPS more steps on both with the same input. Exit: 0 if they agree at every step, 1 if not.
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N_VOCAB 32
#define WARMUP  5
#define STEPS   20

// one step: the same fixed logits every time, so only the sampler state can differ
static llama_token step(struct llama_sampler * s, llama_token_data * data) {
    for (int i = 0; i < N_VOCAB; i++) {
        data[i] = (llama_token_data){ .id = i, .logit = 2.0f * sinf(0.7f * (float) i), .p = 0.0f };
    }
    llama_token_data_array cur = { .data = data, .size = N_VOCAB, .selected = -1, .sorted = false };
    llama_sampler_apply(s, &cur);
    const llama_token tok = cur.data[cur.selected].id;
    llama_sampler_accept(s, tok);
    return tok;
}

int main(void) {
    // target 0.3, decay 0.9, fixed seed: deterministic
    struct llama_sampler * orig = llama_sampler_init_adaptive_p(0.3f, 0.9f, 1234);

    llama_token_data a[N_VOCAB];
    llama_token_data b[N_VOCAB];
    for (int i = 0; i < WARMUP; i++) {
        step(orig, a);
    }

    // the original has no pending token here, so the clone's accept never reads a stale index
    struct llama_sampler * copy = llama_sampler_clone(orig);

    int first_diff = -1;
    llama_token ta = 0;
    llama_token tb = 0;
    for (int i = 0; i < STEPS && first_diff < 0; i++) {
        ta = step(orig, a);
        tb = step(copy, b);
        if (ta != tb || memcmp(a, b, sizeof a) != 0) {
            first_diff = i;
        }
    }

    printf("expected: clone after %d steps matches the original for %d more steps (same tokens, same p bits)\n",
           WARMUP, STEPS);
    if (first_diff < 0) {
        printf("got:      identical at every step\n");
    } else {
        printf("got:      first difference at step %d: original selected %d, clone selected %d%s\n",
               first_diff, ta, tb, ta == tb ? " (p values differ)" : "");
    }

    llama_sampler_free(copy);
    llama_sampler_free(orig);

    return first_diff < 0 ? 0 : 1;
}
