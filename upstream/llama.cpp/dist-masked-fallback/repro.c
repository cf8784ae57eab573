// Checks what dist's own code states: its draw loop always finds a candidate. After the loop,
// llama_sampler_dist_apply says "fallback to the last token (don't think this can happen)"
// and asserts `found` (compiled out in release builds, which then take the last token).
//
// Input: four candidates whose logits are all -inf, as when a grammar, a logit bias or a
// draft model masks every token. dist subtracts the largest logit (-inf) from each, so every
// p is expf(-inf - -inf) = NaN, every running sum is NaN, no comparison with the target holds,
// and the fallback runs: the last candidate, whatever the seed, with NaN probabilities.
// Exit: 0 when, for every seed, dist leaves finite probabilities that sum to 1 and selects
// inside the array (the loop found a candidate); 1 otherwise.
#include "llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#define N 4
#define SEEDS 8

int main(void) {
    printf("expected: every logit -inf; for seeds 1..%d dist finds a candidate by its loop "
           "(p finite, summing to 1)\n", SEEDS);
    bool found_every_time = true;
    printf("got:     ");
    for (uint32_t seed = 1; seed <= SEEDS; seed++) {
        llama_token_data data[N];
        for (int i = 0; i < N; i++) {
            data[i] = (llama_token_data){ .id = i, .logit = -INFINITY, .p = 0.0f };
        }
        llama_token_data_array cur = { .data = data, .size = N, .selected = -1, .sorted = false };

        struct llama_sampler * dist = llama_sampler_init_dist(seed);
        llama_sampler_apply(dist, &cur);
        llama_sampler_free(dist);

        double sum = 0.0;
        bool finite = true;
        for (int i = 0; i < N; i++) {
            finite = finite && isfinite(data[i].p);
            sum += data[i].p;
        }
        const bool ok = finite && fabs(sum - 1.0) < 1e-6 && cur.selected >= 0 && cur.selected < N;
        found_every_time = found_every_time && ok;
        printf(" seed %u: selected %lld, p[0] = %g;", seed, (long long) cur.selected, data[0].p);
    }
    printf("\n");
    if (!found_every_time) {
        printf("          no probability is finite: dist drew by no running sum (where its loop ends in\n"
               "          the fallback marked unreachable, that fallback ran)\n");
    }
    return found_every_time ? 0 : 1;
}
