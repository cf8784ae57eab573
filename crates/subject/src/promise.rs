//! A count of the calls this crate makes into llama.cpp, per thread, so that a test can check
//! that an input the wrapper refuses never reached C.
//!
//! Every call into llama-cpp-sys-2 in this crate goes through the `ffi!` macro, which adds
//! one to a thread-local counter before the call (a unit test below fails on a call site
//! that does not). The counter is always on: one thread-local `Cell` increment is a few
//! nanoseconds next to the microseconds of the cheapest sampler call, and a feature would
//! mean the promise is checked on a different build from the one the audits run.

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
