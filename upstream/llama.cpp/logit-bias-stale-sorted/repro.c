// Checks llama.h's contract on llama_token_data_array.sorted: "do not assume the data is
// sorted - always check this flag". top_k/top_p/min_p trust the flag, so a stage that changes
// logits must clear it. llama_sampler_logit_bias_apply changes logits and leaves it set.
//
// Chain: logits 4,3,2,1,0,-1,-2,-3 for ids 0..7, top_k(4) -> logit_bias(+6 on id 3) -> top_p(0.80).
// top_k sorts and sets sorted = true; the bias lifts id 3 (logit 1 -> 7) to about 93% of the
// mass, so top_p(0.80) must keep {3}. With the stale flag, top_p walks ids 0,1,2 first
// (cumulative p 0.046, 0.063, 0.070) and keeps {0,1,2,3}.
// Exit: 0 when the chain keeps {3}, 1 otherwise.
#include "llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#define N 8

int main(void) {
    llama_token_data data[N];
    for (int i = 0; i < N; i++) {
        data[i] = (llama_token_data){ .id = i, .logit = 4.0f - (float) i, .p = 0.0f };
    }
    // filled by hand: not sorted as far as the samplers know
    llama_token_data_array cur = { .data = data, .size = N, .selected = -1, .sorted = false };

    const llama_logit_bias bias = { .token = 3, .bias = 6.0f };

    struct llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(4));
    llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(N, 1, &bias));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.80f, 1));

    llama_sampler_apply(chain, &cur);

    // exact reference for id 3: softmax over the four survivors {4,3,2,1+6}
    const double p3 = exp(7.0) / (exp(4.0) + exp(3.0) + exp(2.0) + exp(7.0));
    printf("expected: top_k(4) -> logit_bias(3:+6) -> top_p(0.80) keeps {3} (p(3) = %.4f >= 0.80)\n", p3);

    printf("got:      keeps {");
    bool only_3 = cur.size == 1;
    for (size_t i = 0; i < cur.size; i++) {
        printf("%s%d", i ? "," : "", cur.data[i].id);
        only_3 = only_3 && cur.data[i].id == 3;
    }
    printf("} (sorted = %s)\n", cur.sorted ? "true" : "false");

    llama_sampler_free(chain); // frees the three samplers it owns

    return only_3 ? 0 : 1;
}
