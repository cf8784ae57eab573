//! What this wrapper refuses before it calls llama.cpp, in one list, and a count of the calls
//! it does make, so that a test can check the first against the second.
//!
//! llama.cpp answers some bad input with `GGML_ASSERT` (which aborts the whole process) or a
//! C++ exception (which must never unwind into Rust), and answers more of it with silent
//! garbage. So every entry point below checks its input in Rust first and, on bad input,
//! returns `Err` **without making any call into llama.cpp**, which
//! [`ffi_calls_on_this_thread`] lets a caller observe. `tests/promise_fuzz.rs` checks the
//! list with its own copy of the rules: random specs, chains and arrays through the safe API,
//! each refusal confirmed by an `Err` and an unchanged count, each other input sent to C.
//!
//! # The one exception
//!
//! `Sampler::apply_unvalidated` (`edge.rs`) keeps only rules A3 and A5 (which protect memory)
//! and hands empty arrays, NaN and `+inf` logits and repeated ids to C on purpose: it exists
//! for the edge-input probes of `repro-edges`, which call it only inside a contained child
//! process. Nothing else in the workspace calls it.
//!
//! # The vocabulary bound
//!
//! A [`Sampler`](crate::Sampler) may carry a vocabulary bound `n_vocab`, and then ids at or
//! above it are refused (rules A5, B3, C2, F2, G4 below). It has one when it was built from
//! [`SamplerSpec::Stage`](crate::SamplerSpec::Stage) with `Stage::Penalties` or
//! `Stage::LogitBias` (the spec's `n_vocab`), from
//! [`SamplerSpec::Mirostat`](crate::SamplerSpec::Mirostat) (its `n_vocab`), by
//! `Sampler::grammar` or `Sampler::infill` (the vocabulary's size), by
//! `Sampler::custom_for_vocab(_, n)` (`n`, taken as given: a non-positive `n` makes every id
//! out of range), or by `Sampler::adopt(_, Some(n))`. A chain's bound is the smallest bound
//! of its stages; no other sampler has one, and then any id `>= 0` passes.
//!
//! # The list
//!
//! **A. Candidate arrays**, checked on every `Sampler::apply(&mut Candidates)`, whoever built
//! the array (a caller, or llama.cpp in a previous apply):
//! 1. an empty array (llama.cpp's softmax asserts `size > 0`);
//! 2. a logit that is NaN or `+inf` (`-inf` is allowed: it is how a mask is written);
//! 3. a negative id;
//! 4. an id that appears twice;
//! 5. an id at or above the sampler's vocabulary bound;
//! 6. `selected` outside `-1..len`.
//!
//! Not refused: any order of ids, a stale `sorted == true`, equal logits, any finite logit
//! however large, any `p` (passed through as given).
//!
//! **B. `Sampler::apply_in_id_order(logits)`** (ids `0..n` by construction, so A3, A4 and A6
//! cannot occur): 1. an empty row; 2. a NaN or `+inf` logit; 3. more logits than the
//! sampler's vocabulary bound.
//!
//! **C. `Sampler::accept(id)`**: 1. a negative id (adaptive-p's accept asserts on
//! `LLAMA_TOKEN_NULL`, which is -1); 2. an id at or above the vocabulary bound; 3. for a
//! sampler with a grammar stage, a token the grammar rejects (llama.cpp throws on it). The
//! check for C3 asks the grammar through llama.cpp (an apply on a clone of the chain), so
//! that refusal is the one in this list that makes calls into C; they are calls with
//! checked input.
//!
//! **D. `SamplerSpec::build()`** ([`SamplerSpec::validate`](crate::SamplerSpec::validate)).
//! "Finite" means neither NaN nor infinite; a window is an `i32` in `0..=MAX_WINDOW`
//! ([`MAX_WINDOW`](crate::MAX_WINDOW) is 2^20: llama.cpp allocates windows up front, and a
//! negative or huge one becomes a huge allocation, a C++ exception).
//! 1. `Stage::TopP`, `Stage::MinP`, `Stage::Typical`: `p` not finite, or `min_keep >
//!    MAX_WINDOW`;
//! 2. `Stage::Temp`: `t` not finite; `Stage::TempExt`: `t`, `delta` or `exponent` not
//!    finite;
//! 3. `Stage::Xtc`: `probability` or `threshold` not finite, or `min_keep > MAX_WINDOW`;
//! 4. `Stage::TopNSigma`: `n` not finite;
//! 5. `Stage::Penalties`: the spec's `n_vocab <= 0`, `last_n > MAX_WINDOW`, `repeat` not
//!    finite or `<= 0`, `freq` or `present` not finite;
//! 6. `Stage::LogitBias`: the spec's `n_vocab <= 0`, a biased id outside `0..n_vocab`
//!    (llama.cpp's backend path asserts on it), a bias not finite;
//! 7. (no rule: `sorted_guard` is `oracle::stage::SuiteStage`, not a `Stage`, so no
//!    `SamplerSpec` can hold it);
//! 8. `Mirostat`: `n_vocab <= 0`, `tau` or `eta` not finite, `m` outside `1..=n_vocab`;
//! 9. `MirostatV2`: `tau` or `eta` not finite;
//! 10. `Dry`: `multiplier` or `base` not finite, `allowed_length`, `last_n` or `n_ctx_train`
//!     not a window;
//! 11. `AdaptiveP`: `target` not finite, `decay` outside `0..=0.99` (NaN included).
//!
//! Not refused: `Stage::Greedy`, `Stage::TopK` with any `k` (llama.cpp treats `k <= 0` as
//! "keep all"), `Dist` and `Stage::Dist` with any seed, a `p` or temperature of any finite
//! value (negative, zero, above one), the `n_vocab` of a stage that takes none.
//!
//! **E. `Sampler::try_clone()`**: a sampler, or a chain member, that has state but no clone
//! function (llama.cpp aborts). The check reads the interface table and walks a chain with
//! `llama_sampler_chain_get`/`_n`, which are counted calls into C. No built-in sampler of
//! either pinned release and no [`CustomSampler`](crate::CustomSampler) lacks a clone, so
//! through this crate's constructors the refusal cannot happen.
//!
//! **F. [`ProbeArray`](crate::ProbeArray)**: 1. `ProbeArray::new(&candidates)` refuses A1 to
//! A4 and A6 (it calls nothing in C either way; every run starts from `sorted = false`,
//! `selected = -1`); 2. `ProbeArray::run(sampler)` refuses an id at or above the sampler's
//! vocabulary bound.
//!
//! **G. [`LogitsArray`](crate::LogitsArray) and [`IdOrder`](crate::IdOrder)** (no call into
//! C but `apply`): 1. `load(row)`: an empty row, a NaN or `+inf` logit; 2. `load_in(row,
//! order)`: the same, and an order whose length is not the row's; 3. `IdOrder::new(ids)`: no
//! ids, an id twice, an id outside `0..ids.len()`; 4. `apply(sampler)`: nothing loaded, more
//! entries than the sampler's vocabulary bound.
//!
//! **H. Handles**: `Sampler::grammar` refuses a grammar or root with a NUL byte (before any
//! call into C); `Vocab::piece` an id outside the vocabulary (after asking llama.cpp for the
//! vocabulary's size).
//!
//! # What is not promised
//!
//! The wrapper checks its callers, not llama.cpp: what a sampler leaves in an array (an
//! overflow to `+inf`, a NaN from `-inf - -inf`) comes back unchecked, and is refused only
//! when it is handed to C again through a path that checks it. Rule A checks every
//! `Candidates` on every apply; `LogitsArray` checks a row when it is loaded, so a second
//! `apply` without a reload hands C what the first one left. A stage whose parameters pass
//! D may still compute garbage from finite input; that is audited, not refused.
//!
//! # The count
//!
//! Every call into llama-cpp-sys-2 in this crate goes through the `ffi!` macro, which adds
//! one to a thread-local counter before the call (a unit test below fails on a call site
//! that does not). The counter is always on: one thread-local `Cell` increment took 0.9 ns
//! in a probe on the 2-core machine (2026, release build), against 130 ns for `apply` of
//! eight candidates through `top_k` and microseconds for a model's vocabulary; and a feature
//! would mean the promise is checked on a different build from the one the audits run.

use std::cell::Cell;

thread_local! {
    static FFI_CALLS: Cell<u64> = const { Cell::new(0) };
}

/// How many calls into llama.cpp this crate has made on the current thread since it started
/// (wrapping; read it before and after a call and compare). Callbacks that llama.cpp makes
/// into Rust samplers are not calls into C and are not counted; calls a callback's own code
/// makes through this crate (a custom sampler's clone) are.
pub fn ffi_calls_on_this_thread() -> u64 {
    FFI_CALLS.with(Cell::get)
}

/// Adds one to the current thread's count. Only `ffi!` calls this.
#[inline]
pub(crate) fn count_ffi_call() {
    FFI_CALLS.with(|c| c.set(c.get().wrapping_add(1)));
}

/// Counts one call into llama.cpp, then makes it: `unsafe { ffi!(sys::llama_...(...)) }`.
macro_rules! ffi {
    ($call:expr) => {{
        $crate::promise::count_ffi_call();
        $call
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every `sys::name(` or `llama_cpp_sys_2::name(` call in this crate's sources, outside
    /// comments and unit tests, as (file, line) with whether `ffi!(` wraps it.
    fn call_sites(src_dir: &Path) -> Vec<(String, usize, bool)> {
        let mut out = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(src_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        files.sort();
        for f in files {
            let all = std::fs::read_to_string(&f).unwrap();
            let text = all.split("\n#[cfg(test)]\nmod tests").next().unwrap();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            for prefix in ["sys::", "llama_cpp_sys_2::"] {
                for (i, _) in text.match_indices(prefix) {
                    let before = &text[..i];
                    if before
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        continue; // part of a longer path, e.g. `llama_cpp_sys_2::`
                    }
                    let line_start = before.rfind('\n').map_or(0, |k| k + 1);
                    if text[line_start..i].trim_start().starts_with("//") {
                        continue;
                    }
                    let rest = &text[i + prefix.len()..];
                    let ident: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let is_fn = ident.starts_with(|c: char| c.is_ascii_lowercase());
                    let is_call = rest[ident.len()..].trim_start().starts_with('(');
                    if !(is_fn && is_call) {
                        continue; // a type, a constant or a `use`
                    }
                    let wrapped = before.trim_end().ends_with("ffi!(");
                    let line = before.matches('\n').count() + 1;
                    out.push((name.clone(), line, wrapped));
                }
            }
        }
        out
    }

    #[test]
    fn every_call_into_llama_cpp_is_counted() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let sites = call_sites(&src);
        assert!(sites.len() > 50, "found only {} call sites", sites.len());
        let missing: Vec<String> = sites
            .iter()
            .filter(|(_, _, wrapped)| !wrapped)
            .map(|(f, l, _)| format!("src/{f}:{l}: a call into llama.cpp outside ffi!(...)"))
            .collect();
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn the_scan_sees_an_uncounted_call() {
        let dir = std::env::temp_dir().join(format!("subject-promise-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("planted.rs"),
            "use llama_cpp_sys_2 as sys;\n\
             fn a() { unsafe { ffi!(sys::llama_sampler_reset(p)) } }\n\
             fn b() { unsafe { sys::llama_sampler_free(p) } }\n\
             fn c() -> sys::llama_token_data { sys::llama_token_data { id: 0 } }\n\
             // sys::llama_sampler_apply(p, a) in a comment\n\
             #[cfg(test)]\nmod tests { fn d() { unsafe { sys::llama_sampler_free(p) } } }\n",
        )
        .unwrap();
        let sites = call_sites(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            sites,
            [
                ("planted.rs".to_string(), 2, true),
                ("planted.rs".to_string(), 3, false)
            ]
        );
    }

    #[test]
    fn the_count_is_per_thread_and_moves_with_each_call() {
        let before = ffi_calls_on_this_thread();
        count_ffi_call();
        count_ffi_call();
        assert_eq!(ffi_calls_on_this_thread(), before + 2);
        let other = std::thread::spawn(ffi_calls_on_this_thread).join().unwrap();
        assert_eq!(other, 0, "a fresh thread starts at zero");
    }
}
