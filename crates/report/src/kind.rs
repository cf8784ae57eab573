//! What a `present` verdict would mean, for every verdict the suite gives: a **defect** (the
//! engine breaks its own documented contract, or an invariant its own code states) or a
//! **divergence** (the engine differs from a named, cited reference, which may be a design
//! choice). Each verdict's kind and what it rests on is stated once, here, by the verdict's
//! name; reports write it beside each verdict and `verdicts` keeps the two kinds apart.

use serde::Serialize;

/// A defect or a divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The engine breaks its own documented contract or a stated invariant of its code.
    Defect,
    /// The engine differs from a named reference implementation.
    Divergence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Defect => "defect",
            Kind::Divergence => "divergence",
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<Kind> {
        match text {
            "defect" => Ok(Kind::Defect),
            "divergence" => Ok(Kind::Divergence),
            other => anyhow::bail!("unknown kind '{other}' (defect or divergence)"),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict's kind and what it rests on: for a defect the contract or invariant (quoted from
/// the engine), for a divergence the reference, cited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Basis {
    pub kind: Kind,
    pub rests_on: &'static str,
}

/// One rule of the catalog: verdict names on `engine` (any engine when `None`) that start
/// with `prefix` and, if given, contain `contains`.
struct Rule {
    engine: Option<&'static str>,
    prefix: &'static str,
    contains: Option<&'static str>,
    basis: Basis,
}

const fn defect(rests_on: &'static str) -> Basis {
    Basis {
        kind: Kind::Defect,
        rests_on,
    }
}

const fn divergence(rests_on: &'static str) -> Basis {
    Basis {
        kind: Kind::Divergence,
        rests_on,
    }
}

/// The catalog, most specific rule first.
const RULES: &[Rule] = &[
    Rule {
        engine: None,
        prefix: "clone-drops-token-count",
        contains: None,
        basis: defect("llama.cpp's penalties keep `prev` and `token_count` in step (the check left under `#if 0` in `llama_sampler_penalties_accept`), and `llama_sampler_clone` duplicates a sampler with its state"),
    },
    Rule {
        engine: None,
        prefix: "clone-incomplete",
        contains: None,
        basis: defect("`llama_sampler_clone` duplicates a sampler with its state: the clone, fed the same input, acts as the original does"),
    },
    Rule {
        engine: None,
        prefix: "copy-unrefused",
        contains: None,
        basis: defect("llama.h on `llama_sampler_copy`: \"src and dst must have the same type and configuration\", which the code asserts (`GGML_ASSERT`); a copy that goes through, or ends other than by that assertion, breaks it"),
    },
    Rule {
        engine: None,
        prefix: "copy",
        contains: None,
        basis: defect("llama.h: `llama_sampler_copy` copies \"mutable state from src into dst\"; the copy, fed the same input, acts as the original does, whatever dst held before"),
    },
    Rule {
        engine: None,
        prefix: "stale-sorted",
        contains: None,
        basis: defect("llama.h on `llama_token_data_array.sorted`: \"do not assume the data is sorted - always check this flag\"; top_k, top_p and min_p read a prefix when it is set, so a stage that changes logits must clear it"),
    },
    Rule {
        engine: None,
        prefix: "penalty-scope-divergence",
        contains: None,
        basis: divergence("transformers' `RepetitionPenaltyLogitsProcessor`, which penalizes every distinct id of the whole `input_ids` (prompt and generated tokens)"),
    },
    Rule {
        engine: None,
        prefix: "penalty-gauge-dependence",
        contains: None,
        basis: divergence("the penalty on log-softmax values of arXiv 2607.09791 and transformers PR 48642 (`normalize=True`), which adding one constant to every logit does not change"),
    },
    Rule {
        engine: None,
        prefix: "edge-inputs",
        contains: None,
        basis: defect("llama.h: `llama_sampler_apply` takes any `llama_token_data_array` and the header states no precondition (the `GGML_ASSERT`s inside the source are not in it); `p` is the token's probability and `selected` an index into `data`; each stage keeps what its documented rule keeps"),
    },
    Rule {
        engine: Some("candle"),
        prefix: "draw-conformance",
        contains: Some(",top_p="),
        basis: divergence("top_p over the renormalized top_k, as transformers (`TopKLogitsWarper` then `TopPLogitsWarper`), vLLM and llama.cpp compute it; candle compares p with the whole vocabulary's mass of the top k"),
    },
    Rule {
        engine: None,
        prefix: "draw-conformance",
        contains: None,
        basis: defect("each stage's documented rule: the chain draws from the softmax of what its stages keep"),
    },
    Rule {
        engine: None,
        prefix: "ingraph",
        contains: None,
        basis: defect("llama.h: a sampler runs in the graph only when its `backend_init` returns true, documented as \"the backend supports all ops needed by the sampler\"; it is the same sampler object with the same parameters (such as the `min_keep` of `llama_sampler_init_top_p` and `llama_sampler_init_min_p`) as on the CPU; `llama_get_sampled_token_ith` returns \"the backend sampled token\" and `llama_get_sampled_candidates_ith` \"token ids\""),
    },
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
            Some(Kind::Defect)
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
    fn every_divergence_names_a_reference_and_every_defect_a_contract() {
        for r in RULES {
            assert!(r.basis.rests_on.len() > 40, "{}", r.prefix);
        }
    }
}
