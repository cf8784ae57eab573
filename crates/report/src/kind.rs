//! What a `present` verdict would mean, for every verdict the suite gives: a **defect** (the
//! engine breaks its own documented contract, or an invariant its own code states) or a
//! **divergence** (the engine differs from a named, cited reference, which may be a design
//! choice). Each verdict's kind and what it rests on is stated once, here, by the verdict's
//! name; reports write it beside each verdict and `verdicts` keeps the two kinds apart.

use crate::contract::{Quote, CANDLE_GENERATION};
use serde::Serialize;

/// What a verdict is: a defect, a divergence, or a robustness observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The engine breaks its own documented contract or a stated invariant of its code,
    /// quoted from the build it ran on ([`Basis::contract`]).
    Defect,
    /// The engine differs from a named reference implementation.
    Divergence,
    /// What the engine does with an input its API accepts, judged by the suite's own rule
    /// where the engine states no contract (its own asserts included): reported, never a
    /// defect, never filed upstream.
    Robustness,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Defect, Kind::Divergence, Kind::Robustness];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Defect => "defect",
            Kind::Divergence => "divergence",
            Kind::Robustness => "robustness",
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<Kind> {
        (Kind::ALL.into_iter())
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                anyhow::anyhow!("unknown kind '{text}' (defect, divergence or robustness)")
            })
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict's kind and what it rests on: for a defect the contract or invariant in words and
/// where the engine states it (`contract`, searched in the build's own sources), for a
/// divergence the reference, cited; for a robustness row the suite's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Basis {
    pub kind: Kind,
    pub rests_on: &'static str,
    /// For a defect: the statements that make it one, the first the build states winning
    /// (older releases word some of them differently or elsewhere). Empty for the others.
    #[serde(skip)]
    pub contract: &'static [Quote],
}

/// One rule of the catalog: verdict names on `engine` (any engine when `None`) that start
/// with `prefix` and, if given, contain `contains`.
struct Rule {
    engine: Option<&'static str>,
    prefix: &'static str,
    contains: Option<&'static str>,
    basis: Basis,
}

const fn defect(rests_on: &'static str, contract: &'static [Quote]) -> Basis {
    Basis {
        kind: Kind::Defect,
        rests_on,
        contract,
    }
}

const fn divergence(rests_on: &'static str) -> Basis {
    Basis {
        kind: Kind::Divergence,
        rests_on,
        contract: &[],
    }
}

const fn robustness(rests_on: &'static str) -> Basis {
    Basis {
        kind: Kind::Robustness,
        rests_on,
        contract: &[],
    }
}

const fn rule(prefix: &'static str, basis: Basis) -> Rule {
    Rule {
        engine: None,
        prefix,
        contains: None,
        basis,
    }
}

/// The statement a sampler's clone makes about copying its state.
const fn clone_says(within: &'static str) -> Quote {
    Quote::samplers(within, "// copy the state")
}

const CLONE: &str = "the sampler's clone function states that it copies the sampler's state; `llama_sampler_clone` returns that clone, which, fed the same input, must act as the original does";

/// dist's own words for its draw (the releases before b6482 draw through a helper without
/// them).
const DIST_DRAWS_SOFTMAX: Quote = Quote::samplers(
    "static void llama_sampler_dist_apply(",
    "// apply softmax to obtain the probabilities",
);

/// llama.h on what a sampler that runs in the graph promises.
const BACKEND_INIT: Quote =
    Quote::header("return true if the backend supports all ops needed by the sampler");

/// llama.cpp's draws after truncation stages: the stages are judged by the references llama.h
/// cites for them, the draw by dist's own words.
const TRUNCATED_DRAW: Basis = divergence("each truncation stage as llama.h cites it (top-k and nucleus sampling: arXiv 1904.09751; min-p: llama.cpp PR 3841; temperature: llama.h's own formula), then a draw from the softmax of what the stages keep, as dist's code states (\"apply softmax to obtain the probabilities\")");

/// The catalog, most specific rule first.
const RULES: &[Rule] = &[
    rule(
        "clone-drops-token-count",
        defect(
            "the penalties sampler's clone states that it copies the state (\"copy the state\"), and that state keeps `token_count` equal to the histogram of the window `prev` (the sanity check in `llama_sampler_penalties_accept`, compiled out under `#if 0`, asserts it); a clone must keep both",
            // The clone's own words first; the compiled-out assert states the invariant only
            // on a build whose clone function says nothing.
            &[
                clone_says("llama_sampler_penalties_clone("),
                Quote::samplers(
                    "static void llama_sampler_penalties_accept(",
                    "assert(ctx->token_count == tmp);",
                ),
            ],
        ),
    ),
    rule(
        "clone-incomplete-adaptive_p",
        defect(
            "adaptive_p's clone states that it copies everything, the RNG included (\"copy everything (target, decay, seed, and RNG are already set)\"); the clone, fed the same input, must act as the original does",
            &[Quote::samplers(
                "llama_sampler_adaptive_p_clone(",
                "// copy everything",
            )],
        ),
    ),
    // A chain's clone clones each member; the chains audited fail through their first member.
    rule(
        "clone-incomplete-chain(penalties",
        defect(CLONE, &[clone_says("llama_sampler_penalties_clone(")]),
    ),
    rule(
        "clone-incomplete-dry",
        defect(
            CLONE,
            &[Quote::samplers(
                "llama_sampler_dry_clone(",
                "// Copy the state, including the processed breakers",
            )],
        ),
    ),
    rule(
        "clone-incomplete-dist",
        defect(CLONE, &[clone_says("llama_sampler_dist_clone(")]),
    ),
    rule(
        "clone-incomplete-xtc",
        defect(CLONE, &[clone_says("llama_sampler_xtc_clone(")]),
    ),
    rule(
        "clone-incomplete-mirostat_v2",
        defect(CLONE, &[clone_says("llama_sampler_mirostat_v2_clone(")]),
    ),
    rule(
        "clone-incomplete-mirostat",
        defect(CLONE, &[clone_says("llama_sampler_mirostat_clone(")]),
    ),
    rule(
        "clone-incomplete-penalties",
        defect(CLONE, &[clone_says("llama_sampler_penalties_clone(")]),
    ),
    // A stateful sampler the rules above do not name: its clone's statement is not known to
    // the catalog, so its rows read `not offered` until a rule quotes it.
    rule(
        "clone-incomplete",
        defect(CLONE, &[clone_says("llama_sampler_clone_of_a_sampler_the_catalog_names(")]),
    ),
    rule(
        "copy-unrefused",
        defect(
            "llama.h on `copy_state`: \"src and dst must have the same type and configuration\", which `llama_sampler_copy` asserts (`GGML_ASSERT`); a copy that goes through, or ends other than by that assertion, breaks it",
            &[Quote::header("src and dst must have the same type and configuration")],
        ),
    ),
    rule(
        "copy",
        defect(
            "llama.h on `copy_state`, which `llama_sampler_copy` calls: it copies \"mutable state from src into dst\"; the copy, fed the same input, acts as the original does, whatever dst held before",
            &[Quote::header("copy mutable state from src into dst")],
        ),
    ),
    rule(
        "stale-sorted",
        defect(
            "the `sorted` flag says the array is sorted: llama.h, \"do not assume the data is sorted - always check this flag\", and the truncation stages read a prefix when it is set (releases before b6482 say it in min_p's code: \"if the cur_p aren't sorted, try the unsorted implementation first\"); a stage that reorders logits must clear it",
            &[
                Quote::header("do not assume the data is sorted - always check this flag"),
                Quote::samplers(
                    "static void llama_sampler_min_p_apply(",
                    "// if the cur_p aren't sorted, try the unsorted implementation first",
                ),
            ],
        ),
    ),
    rule(
        "penalty-scope-divergence",
        divergence("transformers' `RepetitionPenaltyLogitsProcessor`, which penalizes every distinct id of the whole `input_ids` (prompt and generated tokens)"),
    ),
    rule(
        "penalty-gauge-dependence",
        divergence("the penalty on log-softmax values of arXiv 2607.09791 and transformers PR 48642 (`normalize=True`), which adding one constant to every logit does not change"),
    ),
    rule(
        "edge-dist-fallback",
        defect(
            "dist's own code: its draw loop always finds a candidate, and the fallback after it is marked as unreachable (\"fallback to the last token (don't think this can happen)\", then `assert(found)`); an input that leaves every `p` NaN makes every comparison fail, so the fallback runs",
            &[Quote::samplers(
                "static void llama_sampler_dist_apply(",
                "// fallback to the last token (don't think this can happen)",
            )],
        ),
    ),
    rule(
        "edge-robustness",
        robustness("the suite's own rule (PREREG, F6): on an input the C API accepts with no NaN or +inf logit, a sampler should not abort, hang, leave an unreadable window, leave `selected` outside the array, or leave a NaN logit or a NaN, infinite or negative `p`. llama.cpp states no such contract for these inputs (its aborts are its own `GGML_ASSERT`s), so this is reported, never a defect"),
    ),
    rule(
        "edge-set-top_k-zero",
        defect(
            "llama.h on `llama_sampler_init_top_k`: \"Setting k <= 0 makes this a noop\"",
            &[Quote::header("Setting k <= 0 makes this a noop")],
        ),
    ),
    rule(
        "edge-set-top_k-negative",
        defect(
            "llama.h on `llama_sampler_init_top_k`: \"Setting k <= 0 makes this a noop\"",
            &[Quote::header("Setting k <= 0 makes this a noop")],
        ),
    ),
    rule(
        "edge-set-top_k",
        divergence("top-k as llama.h cites it for `llama_sampler_init_top_k` (arXiv 1904.09751): the k largest logits survive, unchanged"),
    ),
    rule(
        "edge-set-top_p",
        divergence("nucleus sampling as llama.h cites it for `llama_sampler_init_top_p` (arXiv 1904.09751): the smallest prefix of the logits in descending order whose softmax mass reaches p survives, and at least `min_keep` entries"),
    ),
    rule(
        "edge-set-min_p",
        divergence("min-p as llama.h cites it for `llama_sampler_init_min_p` (llama.cpp PR 3841): the entries whose probability is at least p times the largest survive, and at least `min_keep` entries"),
    ),
    rule(
        "edge-set-typical",
        divergence("locally typical sampling as llama.h cites it for `llama_sampler_init_typical` (arXiv 2202.00666), with 0 ln 0 = 0, and at least `min_keep` entries"),
    ),
    rule(
        "edge-set-temp_ext",
        divergence("dynamic temperature as llama.h cites it for `llama_sampler_init_temp_ext` (arXiv 2309.02772): the logits divided by a temperature mapped from the normalized entropy"),
    ),
    rule(
        "edge-set-temp",
        defect(
            "llama.h on `llama_sampler_init_temp`: \"Updates the logits l_i` = l_i/t. When t <= 0.0f, the maximum logit is kept at it's original value, the rest are set to -inf\"",
            &[Quote::header("Updates the logits l_i` = l_i/t")],
        ),
    ),
    rule(
        "edge-set-xtc",
        divergence("XTC as llama.h cites it for `llama_sampler_init_xtc` (text-generation-webui PR 6335)"),
    ),
    rule(
        "edge-set-top_n_sigma",
        divergence("top-n-sigma as llama.h cites it for `llama_sampler_init_top_n_sigma` (arXiv 2411.07641): the entries within n standard deviations of the largest logit survive"),
    ),
    rule(
        "edge-set-logit_bias",
        divergence("a logit bias as OpenAI's API defines the `logit_bias` request field that llama-server takes: each bias is added to its token's logit, nothing else changes"),
    ),
    rule(
        "edge-set-penalties",
        defect(
            "the penalties sampler's code states its rule: \"This is common fix for this problem, which is to multiply by the penalty instead of dividing\" (divide a positive logit, multiply a non-positive one), then subtract the frequency and presence terms",
            &[Quote::samplers(
                "static void llama_sampler_penalties_apply(",
                "This is common fix for this problem, which is to multiply by the penalty instead of dividing.",
            )],
        ),
    ),
    rule(
        "edge-set-greedy",
        divergence("greedy decoding as transformers defines it (`do_sample=False`: the argmax of the logits); among equal maxima any may be chosen"),
    ),
    rule(
        "edge-set-dist",
        defect(
            "dist's own code: \"apply softmax to obtain the probabilities\" and sample from them, so the draw is one of the candidates with a non-zero probability",
            &[DIST_DRAWS_SOFTMAX],
        ),
    ),
    rule(
        "edge-set-mirostat",
        divergence("mirostat as llama.h cites it for `llama_sampler_init_mirostat` and `_v2` (arXiv 2007.14966): the draw is one of the candidates the truncation keeps"),
    ),
    rule(
        "edge-set-adaptive_p",
        divergence("adaptive-p as llama.h cites it for `llama_sampler_init_adaptive_p` (llama.cpp PR 17927): the draw is one of the candidates with a non-zero probability"),
    ),
    Rule {
        engine: Some("candle"),
        prefix: "draw-conformance",
        contains: Some(",top_p="),
        basis: divergence("top_p over the renormalized top_k, as transformers (`TopKLogitsWarper` then `TopPLogitsWarper`), vLLM and llama.cpp compute it; candle compares p with the whole vocabulary's mass of the top k"),
    },
    Rule {
        engine: Some("candle"),
        prefix: "draw-conformance",
        contains: Some("top_k="),
        basis: defect(
            "candle-transformers' `LogitsProcessor::sample_topk`: \"top-k sampling samples from the k tokens with the largest probabilities\"",
            &[Quote {
                files: CANDLE_GENERATION,
                within: None,
                text: "// top-k sampling samples from the k tokens with the largest probabilities.",
            }],
        ),
    },
    Rule {
        engine: Some("candle"),
        prefix: "draw-conformance",
        contains: Some("top_p="),
        basis: defect(
            "candle-transformers' `LogitsProcessor::sample_topp`: \"top-p sampling (or \\\"nucleus sampling\\\") samples from the smallest set of tokens that exceed probability top_p\"",
            &[Quote {
                files: CANDLE_GENERATION,
                within: None,
                text: "/// top-p sampling (or \"nucleus sampling\") samples from the smallest set of tokens that exceed",
            }],
        ),
    },
    Rule {
        engine: Some("candle"),
        prefix: "draw-conformance",
        contains: None,
        basis: defect(
            "candle-transformers' `LogitsProcessor::sample_f`: \"simply sample from the predicted probability distribution\" (the softmax of the logits over the temperature)",
            &[Quote {
                files: CANDLE_GENERATION,
                within: None,
                text: "// simply sample from the predicted probability distribution",
            }],
        ),
    },
    Rule {
        engine: None,
        prefix: "draw-conformance",
        contains: Some("top_"),
        basis: TRUNCATED_DRAW,
    },
    Rule {
        engine: None,
        prefix: "draw-conformance",
        contains: Some("min_p"),
        basis: TRUNCATED_DRAW,
    },
    rule(
        "draw-conformance",
        defect(
            "dist's own code: \"apply softmax to obtain the probabilities\" and draw from them, so each candidate is drawn with its softmax probability (with temperature, llama.h's own formula for `llama_sampler_init_temp`: \"Updates the logits l_i` = l_i/t\")",
            &[DIST_DRAWS_SOFTMAX],
        ),
    ),
    Rule {
        engine: None,
        prefix: "ingraph",
        contains: Some("greedy"),
        basis: defect(
            "llama.h: `llama_get_sampled_token_ith` returns \"the backend sampled token\" (a token id, as the CPU chain returns), and a sampler runs in the graph only when its `backend_init` returns true, \"if the backend supports all ops needed by the sampler\"",
            &[Quote::header("Get the backend sampled token for the ith token")],
        ),
    },
    rule(
        "ingraph",
        defect(
            "llama.h: a sampler runs in the graph only when its `backend_init` returns true, \"if the backend supports all ops needed by the sampler\"; it is the same sampler object with the same parameters (such as the `min_keep` of `llama_sampler_init_top_p` and `llama_sampler_init_min_p`) as on the CPU",
            &[BACKEND_INIT],
        ),
    ),
];

/// The basis of the verdict `name` on `engine`; a fix's rerun (`<name>+<fix>`) has its
/// verdict's basis. `None` for a name the catalog does not know.
pub fn basis(engine: &str, name: &str) -> Option<Basis> {
    let name = name.split('+').next().unwrap_or(name);
    RULES
        .iter()
        .find(|r| {
            r.engine.is_none_or(|e| e == engine)
                && name.starts_with(r.prefix)
                && r.contains.is_none_or(|c| name.contains(c))
        })
        .map(|r| r.basis)
}

/// Sources in which every contract of the catalog is stated once, for reports a test makes up
/// (a synthetic `copy-planted` row, say) that must not read `not offered` for want of them.
pub fn sources_stating_every_contract() -> crate::Sources {
    static FILES: std::sync::OnceLock<Vec<(&'static str, &'static str)>> =
        std::sync::OnceLock::new();
    let files = FILES.get_or_init(|| {
        // Each function once, holding every quote said to lie in it.
        let mut bodies: std::collections::BTreeMap<(&str, Option<&str>), Vec<&str>> =
            Default::default();
        for q in RULES.iter().flat_map(|r| r.basis.contract) {
            bodies
                .entry((q.files[0], q.within))
                .or_default()
                .push(q.text);
        }
        let mut by_file: std::collections::BTreeMap<&'static str, String> = Default::default();
        for ((file, within), quotes) in bodies {
            let text = by_file.entry(file).or_default();
            let lines: String = quotes.iter().map(|q| format!("    {q}\n")).collect();
            match within {
                Some(f) => *text += &format!("{f}\n{lines}}}\n"),
                None => *text += &lines,
            }
        }
        (by_file.into_iter())
            .map(|(f, t)| (f, &*Box::leak(t.into_boxed_str())))
            .collect()
    });
    crate::Sources(files.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specific_rules_win_and_fixes_keep_their_verdicts_kind() {
        let k = |e, n| basis(e, n).map(|b| b.kind);
        assert_eq!(k("llama.cpp", "ingraph-temp_ext"), Some(Kind::Defect));
        assert_eq!(k("llama.cpp", "ingraph-top_p-min_keep"), Some(Kind::Defect));
        assert_eq!(
            k("llama.cpp", "copy-unrefused-across-types"),
            Some(Kind::Defect)
        );
        assert_eq!(
            k("candle", "draw-conformance-published-top_k=3,top_p=0.9"),
            Some(Kind::Divergence)
        );
        assert_eq!(
            k("candle", "draw-conformance-published-top_k=3"),
            Some(Kind::Defect)
        );
        assert_eq!(
            k("llama.cpp", "draw-conformance-published-top_k=3,top_p=0.9"),
            Some(Kind::Divergence)
        );
        assert_eq!(
            k("llama.cpp", "draw-conformance-published-all,temp=0.5"),
            Some(Kind::Defect)
        );
        assert_eq!(k("llama.cpp", "edge-set-temp_ext"), Some(Kind::Divergence));
        assert_eq!(k("llama.cpp", "edge-set-temp-zero"), Some(Kind::Defect));
        assert_eq!(k("llama.cpp", "edge-dist-fallback"), Some(Kind::Defect));
        assert_eq!(
            k("llama.cpp", "edge-robustness-top_p"),
            Some(Kind::Robustness)
        );
        assert_eq!(
            k("llama.cpp", "penalty-gauge-dependence+ledger-normalized"),
            Some(Kind::Divergence)
        );
        assert_eq!(
            k("llama.cpp", "stale-sorted-truncation+sorted_guard"),
            Some(Kind::Defect)
        );
        assert_eq!(k("llama.cpp", "no-such-verdict"), None);
    }

    #[test]
    fn the_made_up_sources_state_every_contract() {
        let all = sources_stating_every_contract();
        for r in RULES.iter().filter(|r| r.basis.kind == Kind::Defect) {
            assert!(
                crate::contract::locate(&all, r.basis.contract).is_some(),
                "{}",
                r.prefix
            );
        }
    }

    #[test]
    fn every_divergence_names_a_reference_and_every_defect_a_contract() {
        for r in RULES {
            assert!(r.basis.rests_on.len() > 40, "{}", r.prefix);
            let defect = r.basis.kind == Kind::Defect;
            assert_eq!(defect, !r.basis.contract.is_empty(), "{}", r.prefix);
        }
    }
}
