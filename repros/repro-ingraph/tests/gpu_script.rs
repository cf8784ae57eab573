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

/// Where nvcc or the GPU is missing the script must stop at once, in one line, without
/// building or creating its folder. Each refusal is reached with stand-ins for `nvcc` and
/// `nvidia-smi` on a PATH of their own (so this runs the same on a machine with a GPU).
#[test]
fn each_missing_piece_stops_it_before_building() {
    let stub = std::env::temp_dir().join(format!("gpu-script-stub-{}", std::process::id()));
    let bin = stub.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let put = |name: &str, body: Option<&str>| {
        let p = bin.join(name);
        let _ = std::fs::remove_file(&p);
        if let Some(body) = body {
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
        }
    };
    let system_path = "/usr/bin:/bin";
    let out_dir = stub.join("out");
    for (nvcc, smi, says) in [
        (None, None, "no CUDA toolkit"),
        (Some("exit 0"), None, "no NVIDIA driver"),
        (Some("exit 0"), Some("exit 9"), "found no GPU"),
        (Some("exit 0"), Some("exit 0"), "lists no GPU"),
    ] {
        put("nvcc", nvcc);
        put("nvidia-smi", smi);
        let t = Instant::now();
        let out = Command::new(root().join("scripts/ingraph-gpu.sh"))
            .arg(&out_dir)
            .env("PATH", format!("{}:{system_path}", bin.display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{says}: {err}");
        assert!(out.stdout.is_empty(), "{says}");
        assert_eq!(err.lines().count(), 1, "{says}: {err}");
        assert!(err.contains(says), "expected {says:?}: {err}");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{says}: took {:?}",
            t.elapsed()
        );
        assert!(
            !out_dir.exists(),
            "{says}: the folder was created before the refusal"
        );
    }
    std::fs::remove_dir_all(&stub).unwrap();
}

/// The features the script builds with reach llama-cpp-sys-2's `cuda` for both binaries.
#[test]
fn its_build_turns_on_the_cuda_backend() {
    let text = std::fs::read_to_string(root().join("scripts/ingraph-gpu.sh")).unwrap();
    // The build command itself, not a comment: its lines joined, spaces collapsed.
    let code: Vec<String> = (text.lines())
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let build = "cargo build --release --locked --target-dir target/cuda -p repro-ingraph -p repro-engines --features subject/cuda >&2";
    assert!(code.iter().any(|l| l == build), "{code:?}");
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
