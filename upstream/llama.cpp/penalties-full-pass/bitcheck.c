// Not a reproducer: a differential check for fix.patch. It prints the bits of every logit
// (and the sorted flag) that llama_sampler_penalties leaves, over arrays in id order (the fast
// path), truncated, reversed and shuffled (the full pass), and windows that hold ids past the
// array's end. Run it against a stock and a patched build: the outputs must be identical.
#include "llama.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define V 64

static uint32_t lcg = 12345u;
static uint32_t next(void) { lcg = lcg * 1664525u + 1013904223u; return lcg >> 8; }

int main(void) {
    const float repeat[] = { 1.0f, 1.1f, 1.3f, 2.0f };
    const float freq[]   = { 0.0f, 0.5f, -0.25f };
    const float present[] = { 0.0f, 0.5f, 1.5f };
    unsigned long n_lines = 0;
    for (int layout = 0; layout < 4; layout++)         // 0 id order, 1 truncated, 2 reversed, 3 shuffled
    for (int cfg = 0; cfg < 36; cfg++)
    for (int trial = 0; trial < 8; trial++) {
        const int last_n = trial % 2 ? 4 : 64;
        struct llama_sampler * s = llama_sampler_init_penalties(V, last_n, repeat[cfg % 4],
                                                                freq[(cfg / 4) % 3], present[cfg / 12]);
        const int n_hist = 1 + (int) (next() % 20);
        for (int h = 0; h < n_hist; h++) {
            llama_sampler_accept(s, (llama_token) (next() % V)); // ids past a truncated end too
        }
        llama_token_data d[V];
        size_t size = layout == 1 ? V / 2 : V;
        for (int i = 0; i < V; i++) {
            const int id = layout == 2 ? V - 1 - i : i;
            // quarter steps in [-8, 8), zero included: both branches of the repeat rule
            d[i] = (llama_token_data){ id, (float) ((int) (next() % 64) - 32) / 4.0f, 0.0f };
        }
        if (layout == 3) {
            for (int i = V - 1; i > 0; i--) {
                const int j = (int) (next() % (uint32_t) (i + 1));
                llama_token_data t = d[i]; d[i] = d[j]; d[j] = t;
            }
        }
        llama_token_data_array cur = { d, size, -1, trial % 3 == 0 };
        llama_sampler_apply(s, &cur);
        printf("%d %d %d sorted=%d", layout, cfg, trial, cur.sorted);
        for (size_t i = 0; i < cur.size; i++) {
            uint32_t bits;
            memcpy(&bits, &cur.data[i].logit, sizeof bits);
            printf(" %d:%08x", cur.data[i].id, bits);
        }
        printf("\n");
        n_lines++;
        llama_sampler_free(s);
    }
    fprintf(stderr, "%lu arrays\n", n_lines);
    return 0;
}
