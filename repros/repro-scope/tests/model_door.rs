//! The `--model PATH` door, fuzzed: mutated GGUF files derived from both pinned models
//! (truncations at header fields, huge counts and lengths, wrong magic and versions, flipped
//! bytes, whole files with a byte inverted), a folder, `/dev/null`, a missing path. Each goes
//! through `repro-scope --model PATH` in check-only mode, which loads a user-named file in a
//! contained child, and, where candle is linked, the same file through
//! `repro-scope --engine candle --model PATH`, which loads it in a contained child with candle
//! first (then with llama.cpp, which tokenizes for it). At each door the tool must refuse the
//! file in one line with exit 2 (a contained crash included, reported as such) or accept it
//! with exit 0, and never die of a signal.

use test_support::gguf;
use test_support::run_bin_with_env;

const BIN: &str = env!("CARGO_BIN_EXE_repro-scope");
const CHECK_ONLY: (&str, &str) = ("SAMPLER_AUDIT_CHECK_ONLY", "1");

/// What one path did at the door.
#[derive(Debug, PartialEq)]
enum Door {
    Accepted,
    Refused,
    RefusedContainedCrash,
}

/// The doors a file is shown: the engine flags before `--model PATH`.
fn doors() -> Vec<&'static [&'static str]> {
    let mut doors: Vec<&[&str]> = vec![&[]];
    if cfg!(feature = "candle") {
        doors.push(&["--engine", "candle"]);
    }
    doors
}

fn knock(engine: &[&str], path: &str) -> Door {
    let args = [engine, &["--model", path]].concat();
    let (code, out, err) = run_bin_with_env(BIN, &args, &[CHECK_ONLY]);
    assert!(out.is_empty(), "{args:?}: check-only printed {out:?}");
    match code {
        0 => Door::Accepted,
        2 => {
            assert_eq!(
                err.lines().count(),
                1,
                "{args:?}: more than one line:\n{err}"
            );
            assert!(err.starts_with("error: "), "{args:?}: {err}");
            assert!(!err.contains("internal error"), "{args:?}: {err}");
            if err.contains("contained in a child process") {
                Door::RefusedContainedCrash
            } else {
                Door::Refused
            }
        }
        other => panic!("{args:?}: exit {other} (-1 is a signal)\n{err}"),
    }
}

#[test]
fn mutated_model_files_are_refused_in_one_line_or_accepted() {
    let dir = std::env::temp_dir().join(format!("model-door-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut tally = std::collections::BTreeMap::new();
    let mut total = 0;
    for (k, name) in ["smollm2", "gemma3"].iter().enumerate() {
        let src = models::resolve(name).expect("run `make models` first").path;
        let mutants = gguf::mutants(&src, &dir, 1 + k as u64, 110).unwrap();
        assert!(mutants.len() >= 110, "{name}: {} mutants", mutants.len());
        for m in &mutants {
            for engine in doors() {
                let door = knock(engine, m.path.to_str().unwrap());
                *tally.entry(format!("{engine:?} {door:?}")).or_insert(0) += 1;
                total += 1;
                if door == Door::Accepted {
                    assert!(
                        m.label.starts_with("whole file"),
                        "{name} {engine:?}: accepted a broken header: {}",
                        m.label
                    );
                }
            }
            std::fs::remove_file(&m.path).unwrap();
        }
    }
    for special in [
        dir.to_str().unwrap(),
        "/dev/null",
        "/no/such/model.gguf",
        "",
    ] {
        for engine in doors() {
            assert_ne!(
                knock(engine, special),
                Door::Accepted,
                "{engine:?} {special:?}"
            );
            total += 1;
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("model door: {total} knocks, {tally:?}");
    assert!(total >= 200 * doors().len());
}
