// Not a reproducer: a differential check for fix.patch. Run it against a stock and a patched
// build and compare the outputs line by line. Each line is one array after
// llama_sampler_penalties has been applied to it: its class, its case, the sorted flag, and every
// entry's id and logit bits.
//
// The arrays: in id order (the patch's shortcut), truncated, reversed and shuffled (the full
// pass); with repeated ids; with ids below 0 and past n_vocab, in the array and in the window;
// empty and one-element arrays; n_vocab of 64, 32 and 0 over the same 64 ids; windows of 1, 4
// and 64 tokens, which evict; and samplers reset, cloned and copied (llama_sampler_copy, also
// between samplers of different n_vocab, into one that already held tokens) before more
// tokens are accepted.
//
// Class `own-index-repeat`: every id of the window sits at its own index (data[id].id == id) and
// one of them appears at another index too. The patch's shortcut adjusts only the entry at the
// id's own index there (stock adjusts both), so these lines may differ. Every other line is
// class `exact` and must be the same bytes on both builds.
#include "llama.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define V 64
#define MAX_WINDOW 64

static uint32_t lcg = 12345u;
static uint32_t next(void) { lcg = lcg * 1664525u + 1013904223u; return lcg >> 8; }

// The window as the sampler should hold it (the last last_n accepted ids), kept here to name
// each array's class; empty when the parameters disable the stage (nothing is penalized).
struct window {
    int last_n;
    int off;
    int n;
    llama_token ids[MAX_WINDOW]; // oldest first
};

static void window_accept(struct window * w, llama_token t) {
    if (w->off) {
        return;
    }
    if (w->n == w->last_n) {
        memmove(w->ids, w->ids + 1, (size_t) (w->n - 1) * sizeof w->ids[0]);
        w->n--;
    }
    w->ids[w->n++] = t;
}

static int in_window(const struct window * w, llama_token t) {
    for (int k = 0; k < w->n; k++) {
        if (w->ids[k] == t) {
            return 1;
        }
    }
    return 0;
}

static int own_index_repeat(const struct window * w, const llama_token_data * d, size_t size) {
    if (w->n == 0) {
        return 0;
    }
    for (int k = 0; k < w->n; k++) {
        const llama_token t = w->ids[k];
        if (t < 0 || (size_t) t >= size || d[t].id != t) {
            return 0;
        }
    }
    for (size_t i = 0; i < size; i++) {
        if ((size_t) d[i].id != i && d[i].id >= 0 && in_window(w, d[i].id)) {
            return 1;
        }
    }
    return 0;
}

static unsigned long n_lines = 0;
static unsigned long n_repeat = 0;

// Applies s to a copy of the array and prints the line.
static void apply_and_print(struct llama_sampler * s, const struct window * w, const llama_token_data * src,
                            size_t size, int sorted, const char * name) {
    llama_token_data d[V + 1];
    memcpy(d, src, size * sizeof d[0]);
    const int repeat = own_index_repeat(w, d, size);
    llama_token_data_array cur = { d, size, -1, sorted };
    llama_sampler_apply(s, &cur);
    printf("%s %s sorted=%d size=%zu", repeat ? "own-index-repeat" : "exact", name, cur.sorted, cur.size);
    for (size_t i = 0; i < cur.size; i++) {
        uint32_t bits;
        memcpy(&bits, &cur.data[i].logit, sizeof bits);
        printf(" %d:%08x", cur.data[i].id, bits);
    }
    printf("\n");
    n_lines++;
    n_repeat += (unsigned long) repeat;
}

static void accept_n(struct llama_sampler * s, struct window * w, int n, int outside) {
    for (int h = 0; h < n; h++) {
        // with `outside`, ids from -4 to V + 3: below 0 and past n_vocab too
        const llama_token t = outside ? (llama_token) (next() % (V + 8)) - 4 : (llama_token) (next() % V);
        llama_sampler_accept(s, t);
        window_accept(w, t);
    }
}

static const float repeat[] = { 1.0f, 1.1f, 1.3f, 2.0f };
static const float freq[]   = { 0.0f, 0.5f, -0.25f };
static const float present[] = { 0.0f, 0.5f, 1.5f };
static const int last_ns[] = { 1, 4, 64 };
static const int32_t n_vocabs[] = { V, V / 2, 0 };

static struct llama_sampler * init(int cfg, int32_t n_vocab, int last_n) {
    return llama_sampler_init_penalties(n_vocab, last_n, repeat[cfg % 4], freq[(cfg / 4) % 3], present[cfg / 12]);
}

// The window of a fresh sampler of configuration cfg (cfg 0 is repeat 1, freq 0, present 0: disabled).
static struct window fresh(int cfg, int last_n) {
    struct window w = { last_n, cfg == 0, 0, { 0 } };
    return w;
}

// Fills d with V entries in id order, logits in quarter steps in [-8, 8) (zero included: both
// branches of the repeat rule).
static void fill(llama_token_data * d) {
    for (int i = 0; i < V; i++) {
        d[i] = (llama_token_data){ i, (float) ((int) (next() % 64) - 32) / 4.0f, 0.0f };
    }
}

static void shuffle(llama_token_data * d, size_t size) {
    for (size_t i = size - 1; i > 0; i--) {
        const size_t j = next() % (uint32_t) (i + 1);
        llama_token_data t = d[i]; d[i] = d[j]; d[j] = t;
    }
}

// An id of the window if there is one (else any id), for repeats that matter.
static llama_token windowed_or_any(const struct window * w) {
    return w->n > 0 ? w->ids[next() % (uint32_t) w->n] : (llama_token) (next() % V);
}

enum { ID_ORDER, TRUNCATED, REVERSED, SHUFFLED, REPEAT_ID_ORDER, REPEAT_SHUFFLED, OUTSIDE_IDS, TINY, N_LAYOUTS };
static const char * layout_names[] = { "id-order", "truncated", "reversed", "shuffled", "repeat-id-order",
                                       "repeat-shuffled", "outside-ids", "tiny" };

// One array per layout, configuration and trial, from a fresh sampler.
static void layouts(void) {
    for (int layout = 0; layout < N_LAYOUTS; layout++)
    for (int cfg = 0; cfg < 36; cfg++)
    for (int trial = 0; trial < 12; trial++) {
        const int last_n = last_ns[trial % 3];
        const int32_t n_vocab = n_vocabs[(trial / 3) % 3];
        const int outside = layout == OUTSIDE_IDS || trial >= 9;
        struct llama_sampler * s = init(cfg, n_vocab, last_n);
        struct window w = fresh(cfg, last_n);
        accept_n(s, &w, 1 + (int) (next() % 20), outside);
        llama_token_data d[V];
        fill(d);
        size_t size = V;
        switch (layout) {
            case TRUNCATED: size = V / 2; break; // windowed ids past the end
            case REVERSED:
                for (int i = 0; i < V; i++) {
                    d[i].id = V - 1 - i;
                }
                break;
            case SHUFFLED: shuffle(d, size); break;
            case REPEAT_ID_ORDER: {
                // a windowed id again at another index, over the id that was there
                const llama_token t = windowed_or_any(&w);
                const size_t j = next() % V;
                if (t >= 0 && t < V && (size_t) t != j) {
                    d[j].id = t;
                }
                break;
            }
            case REPEAT_SHUFFLED:
                shuffle(d, size);
                for (int k = 0; k < 4; k++) {
                    d[next() % V].id = windowed_or_any(&w);
                }
                break;
            case OUTSIDE_IDS: {
                const llama_token far[] = { -4, -1, V, V + 3 };
                for (int k = 0; k < 4; k++) {
                    d[next() % V].id = far[next() % 4];
                }
                if (trial % 2) {
                    shuffle(d, size);
                }
                break;
            }
            case TINY:
                size = (size_t) (trial % 2);
                d[0].id = trial % 4 < 2 ? windowed_or_any(&w) : (llama_token) (next() % V);
                break;
        }
        char name[64];
        snprintf(name, sizeof name, "%s/%d/%d", layout_names[layout], cfg, trial);
        apply_and_print(s, &w, d, size, trial % 4 == 0, name);
        llama_sampler_free(s);
    }
}

// Reset, clone and copy, then more tokens, then one array in id order and one shuffled.
static void state_ops(void) {
    static const char * op_names[] = { "reset", "clone", "copy-same", "copy-to-smaller", "copy-to-larger" };
    for (int op = 0; op < 5; op++)
    for (int cfg = 0; cfg < 36; cfg++)
    for (int trial = 0; trial < 6; trial++) {
        const int last_n = last_ns[trial % 3];
        const int outside = trial >= 3;
        const int32_t n_vocab_src = op == 4 ? V / 2 : V;
        const int32_t n_vocab_dst = op == 3 ? V / 2 : V;
        struct llama_sampler * s = init(cfg, n_vocab_src, last_n);
        struct window w = fresh(cfg, last_n);
        accept_n(s, &w, 1 + (int) (next() % 20), outside);
        struct llama_sampler * t = NULL; // the sampler the op produces (s itself for reset)
        struct window tw = w;
        switch (op) {
            case 0:
                llama_sampler_reset(s);
                w.n = 0;
                tw = w;
                break;
            case 1: t = llama_sampler_clone(s); break;
            default: {
                // the destination held tokens of its own first: none of them may outlive the copy
                t = init(cfg, n_vocab_dst, last_n);
                struct window stale = fresh(cfg, last_n);
                accept_n(t, &stale, 1 + (int) (next() % 20), 1);
                llama_sampler_copy(s, t);
                break;
            }
        }
        const int more = (int) (next() % 6);
        for (int h = 0; h < more; h++) {
            const llama_token tok = outside ? (llama_token) (next() % (V + 8)) - 4 : (llama_token) (next() % V);
            llama_sampler_accept(s, tok);
            window_accept(&w, tok);
            if (t) {
                llama_sampler_accept(t, tok);
                window_accept(&tw, tok);
            }
        }
        llama_token_data d[V];
        fill(d);
        for (int shuffled = 0; shuffled < 2; shuffled++) {
            if (shuffled) {
                shuffle(d, V);
            }
            char name[64];
            snprintf(name, sizeof name, "%s/%d/%d/%s", op_names[op], cfg, trial, shuffled ? "shuffled" : "id-order");
            if (t) {
                apply_and_print(t, &tw, d, V, 0, name);
            }
            snprintf(name, sizeof name, "%s-source/%d/%d/%s", op_names[op], cfg, trial, shuffled ? "shuffled" : "id-order");
            apply_and_print(s, &w, d, V, 0, name);
        }
        if (t) {
            llama_sampler_free(t);
        }
        llama_sampler_free(s);
    }
}

int main(void) {
    layouts();
    state_ops();
    fprintf(stderr, "%lu arrays, %lu of class own-index-repeat\n", n_lines, n_repeat);
    return 0;
}
