//! The `--model PATH` door, fuzzed: mutated GGUF files derived from both pinned models
//! (truncations at header fields, huge counts and lengths, wrong magic and versions, flipped
//! bytes, whole files with a byte inverted), a folder, `/dev/null`, a missing path. Each goes
//! through `repro-scope --model PATH` in check-only mode, which loads a user-named file in a
//! contained child: the tool must refuse it in one line with exit 2 (a contained abort
//! included, reported as such) or accept it with exit 0, and never die of a signal.

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

fn knock(path: &str) -> Door {
    let (code, out, err) = run_bin_with_env(BIN, &["--model", path], &[CHECK_ONLY]);
    assert!(out.is_empty(), "{path}: check-only printed {out:?}");
    match code {
        0 => Door::Accepted,
        2 => {
            assert_eq!(err.lines().count(), 1, "{path}: more than one line:\n{err}");
            assert!(err.starts_with("error: "), "{path}: {err}");
            assert!(!err.contains("internal error"), "{path}: {err}");
            if err.contains("contained in a child process") {
                Door::RefusedContainedCrash
            } else {
                Door::Refused
            }
        }
        other => panic!("{path}: exit {other} (-1 is a signal)\n{err}"),
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
            let door = knock(m.path.to_str().unwrap());
            *tally.entry(format!("{door:?}")).or_insert(0) += 1;
            total += 1;
            if door == Door::Accepted {
                assert!(
                    m.label.starts_with("whole file"),
                    "{name}: accepted a broken header: {}",
                    m.label
                );
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
        assert_ne!(knock(special), Door::Accepted, "{special:?}");
        total += 1;
    }
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("model door: {total} paths, {tally:?}");
    assert!(total >= 200);
}
