//! `scripts/ingraph-gpu.sh` as far as a machine without a GPU can check it: its argument
//! handling, its one-line refusal where no CUDA toolkit or GPU is present (before building
//! or creating anything), and that its build command turns on llama.cpp's CUDA backend for
//! both binaries it runs.

use std::process::Command;
use std::time::{Duration, Instant};
use test_support::repo_root as root;

fn script(args: &[&str]) -> (i32, String, String, Duration) {
    let t = Instant::now();
    let out = Command::new(root().join("scripts/ingraph-gpu.sh"))
        .args(args)
        .output()
        .expect("the script runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn bad_arguments_are_refused_in_one_line() {
    let file = std::env::temp_dir().join(format!("gpu-script-file-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    for args in [
        &[][..],
        &["a", "b"],
        &["--bogus"],
        &[""],
        &[file.to_str().unwrap()],
    ] {
        let (code, out, err, _) = script(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ingraph-gpu: "), "{err}");
    }
    std::fs::remove_file(&file).unwrap();
    let (code, out, _, _) = script(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("usage: scripts/ingraph-gpu.sh OUTDIR"));
}

/// On a machine with no CUDA toolkit or no GPU the script must stop at once, in one line,
/// without building or creating its folder. (On a machine with both this test says nothing.)
#[test]
fn without_a_gpu_it_stops_before_building() {
    let have_gpu = Command::new("nvcc").arg("--version").output().is_ok()
        && Command::new("nvidia-smi")
            .output()
            .is_ok_and(|o| o.status.success());
    if have_gpu {
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpu-script-out-{}", std::process::id()));
    let (code, out, err, took) = script(&[dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no CUDA toolkit") || err.contains("GPU") || err.contains("driver"),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(!dir.exists(), "the folder was created before the refusal");
}

/// The features the script builds with reach llama-cpp-sys-2's `cuda` for both binaries.
#[test]
fn its_build_turns_on_the_cuda_backend() {
    let text = std::fs::read_to_string(root().join("scripts/ingraph-gpu.sh")).unwrap();
    assert!(text.contains("-p repro-ingraph -p repro-engines --features subject/cuda"));
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "repro-ingraph",
            "-p",
            "repro-engines",
        ])
        .args([
            "--features",
            "subject/cuda",
            "-e",
            "features",
            "-i",
            "llama-cpp-sys-2",
        ])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tree.contains("llama-cpp-sys-2 feature \"cuda\""), "{tree}");
}
