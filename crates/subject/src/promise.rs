//! What this wrapper refuses before it calls llama.cpp, in one list, and a count of the calls
//! it does make, so that a test can check the first against the second.
//!
//! llama.cpp answers some bad input with `GGML_ASSERT` (which aborts the process) or a C++
//! exception (which must never unwind into Rust), and more of it with silent garbage. So every
//! entry point below checks its input in Rust and, on bad input, returns `Err` **without any
//! call into llama.cpp**, which [`ffi_calls_on_this_thread`] lets a caller observe.
//! `tests/promise_fuzz.rs` checks the list with its own copy of the rules.
//!
//! # The one exception
//!
//! `Sampler::apply_unvalidated` (`edge.rs`) keeps only rules A3 and A5 (which protect memory)
//! and hands empty arrays, NaN and `+inf` logits and repeated ids to C on purpose, for the
//! edge-input probes of `repro-edges`, which call it only inside a contained child process.
//!
//! # The vocabulary bound
//!
//! A [`Sampler`](crate::Sampler) may carry a vocabulary bound `n_vocab`; ids at or above it
//! are refused (rules A5, B3, C2, F2, G4). It has one when built from
//! [`SamplerSpec::Stage`](crate::SamplerSpec::Stage) with `Stage::Penalties` or
//! `Stage::LogitBias` (the spec's `n_vocab`), from
//! [`SamplerSpec::Mirostat`](crate::SamplerSpec::Mirostat) (its `n_vocab`), by
//! `Sampler::grammar` or `Sampler::infill` (the vocabulary's size), or by
//! `Sampler::custom_for_vocab(_, n)` (`n` as given: a non-positive `n` admits no id). A
//! chain's bound is the smallest of its stages'; no other sampler has one (any id `>= 0`).
//!
//! # The list
//!
//! **A. `Sampler::apply(&mut Candidates)`**, on every call, whoever built the array (a caller,
//! or llama.cpp in a previous apply): 1. an empty array (softmax asserts `size > 0`); 2. a
//! NaN or `+inf` logit (`-inf` is how a mask is written); 3. a negative id; 4. an id twice;
//! 5. an id at or above the bound; 6. `selected` outside `-1..len`. Not refused: any order of
//! ids, a stale `sorted == true`, equal logits, any finite logit, any `p`.
//!
//! **B. `Sampler::apply_in_id_order(logits)`** (ids `0..n`, so A3, A4, A6 cannot occur):
//! 1. an empty row; 2. a NaN or `+inf` logit; 3. more logits than the bound.
//!
//! **C. `Sampler::accept(id)`**: 1. a negative id (adaptive-p asserts on `LLAMA_TOKEN_NULL`,
//! -1); 2. an id at or above the bound; 3. with a grammar stage, a token the grammar rejects
//! (llama.cpp throws). C3 asks the grammar through llama.cpp (an apply on a clone of the
//! chain): the one refusal here that calls into C, with checked input.
//!
//! **D. `SamplerSpec::build()`** ([`SamplerSpec::validate`](crate::SamplerSpec::validate)).
//! "Finite": neither NaN nor infinite; a window: an `i32` in `0..=MAX_WINDOW`
//! ([`MAX_WINDOW`](crate::MAX_WINDOW) = 2^20: llama.cpp allocates windows up front, and a
//! negative or huge one becomes a huge allocation, a C++ exception).
//! 1. `TopP`, `MinP`, `Typical`: `p` not finite, or `min_keep > MAX_WINDOW`;
//! 2. `Temp`: `t` not finite; `TempExt`: `t`, `delta` or `exponent` not finite;
//! 3. `Xtc`: `probability` or `threshold` not finite, or `min_keep > MAX_WINDOW`;
//! 4. `TopNSigma`: `n` not finite;
//! 5. `Penalties`: the spec's `n_vocab <= 0`, `last_n > MAX_WINDOW`, `repeat` not finite or
//!    `<= 0`, `freq` or `present` not finite;
//! 6. `LogitBias`: the spec's `n_vocab <= 0`, an id outside `0..n_vocab` (llama.cpp's backend
//!    path asserts on it), a bias not finite;
//! 7. (none: `sorted_guard` is `oracle::stage::SuiteStage`, which no `SamplerSpec` holds);
//! 8. `Mirostat`: `n_vocab <= 0`, `tau` or `eta` not finite, `m` outside `1..=n_vocab`;
//! 9. `MirostatV2`: `tau` or `eta` not finite;
//! 10. `Dry`: `multiplier` or `base` not finite; `allowed_length`, `last_n` or `n_ctx_train`
//!     not a window;
//! 11. `AdaptiveP`: `target` not finite, `decay` outside `0..=0.99` (NaN included).
//!
//! Not refused: `Greedy`, `TopK` with any `k` (`k <= 0` keeps all), `Dist` with any seed,
//! any finite `p` or temperature, the `n_vocab` of a stage that takes none.
//!
//! **E. `Sampler::try_clone()`**: a sampler or chain member with state but no clone function
//! (llama.cpp aborts). The check walks a chain with `llama_sampler_chain_get`/`_n` (counted
//! calls). No built-in sampler of either release and no
//! [`CustomSampler`](crate::CustomSampler) lacks a clone, so it cannot happen through this
//! crate's constructors.
//!
//! **F. [`ProbeArray`](crate::ProbeArray)**: 1. `new(&candidates)`: A1 to A4 and A6 (no C call
//! either way; every run starts from `sorted = false`, `selected = -1`); 2. `run(sampler)`: an
//! id at or above the bound.
//!
//! **G. [`LogitsArray`](crate::LogitsArray), [`IdOrder`](crate::IdOrder)** (no C call but
//! `apply`): 1. `load(row)`: an empty row, a NaN or `+inf` logit; 2. `load_in(row, order)`:
//! the same, or an order whose length is not the row's; 3. `IdOrder::new(ids)`: no ids, an id
//! twice, an id outside `0..ids.len()`; 4. `apply(sampler)`: nothing loaded, more entries
//! than the bound.
//!
//! **H. Handles**: `Sampler::grammar`, a grammar or root with a NUL byte (before any C call);
//! `Vocab::piece`, an id outside the vocabulary (after asking llama.cpp for its size).
//!
//! # What is not promised
//!
//! The wrapper checks its callers, not llama.cpp: what a sampler leaves in an array (an
//! overflow to `+inf`, a NaN from `-inf - -inf`) comes back unchecked, refused only when it is
//! handed to C again through a checking path. `LogitsArray` checks a row when it is loaded, so
//! a second `apply` without a reload hands C what the first left. Parameters that pass D may
//! still compute garbage from finite input; that is audited, not refused.
//!
//! # The count
//!
//! Every call into llama-cpp-sys-2 in this crate goes through `ffi!`, which adds one to a
//! thread-local counter first (a unit test below fails on a call site that does not). It is
//! always on: one `Cell` increment took 0.9 ns in a probe (2026, release build, the 2-core
//! machine) against 130 ns for an `apply` of eight candidates through `top_k`, and a feature
//! would check the promise on another build than the audits run.

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
            // The shims forward one call each and are themselves called inside `ffi!(`, so
            // each C call is counted once, at its call site.
            if name == "compat.rs" {
                continue;
            }
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
