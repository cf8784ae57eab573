//! buildgen on planted inputs: which members a generated build takes, the vendored-source
//! check, build names, the OpenMP rule and shards.

use buildgen::{
    check_release, manifest_from_metadata, names, parse_build, parse_shard, sys_features, Build,
};
use serde_json::json;
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("buildgen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn dep(name: &str, kind: Option<&str>, optional: bool, path: Option<&str>) -> serde_json::Value {
    json!({"name": name, "kind": kind, "optional": optional, "path": path, "req": "^1",
           "features": [], "uses_default_features": true, "rename": null})
}

fn package(
    name: &str,
    deps: Vec<serde_json::Value>,
    targets: Vec<(&str, &str)>,
) -> serde_json::Value {
    let targets: Vec<_> = targets
        .iter()
        .map(
            |(kind, t)| json!({"kind": [kind], "name": t, "src_path": format!("/r/{name}/{t}.rs")}),
        )
        .collect();
    json!({"name": name, "manifest_path": format!("/r/{name}/Cargo.toml"), "features": {"default": ["candle"], "candle": []},
           "dependencies": deps, "targets": targets})
}

#[test]
fn a_generated_build_takes_every_member_that_links_llama_cpp_and_nothing_else() {
    let meta = json!({"packages": [
        package("subject", vec![dep("llama-cpp-sys-2", None, false, None), dep("anyhow", None, false, None)], vec![("lib", "subject"), ("test", "lifecycle")]),
        package("repro-a", vec![dep("subject", None, false, Some("/r/subject")), dep("insta", Some("dev"), false, None)], vec![("bin", "repro-a"), ("test", "plots"), ("test", "a")]),
        package("repro-b", vec![dep("subject", None, false, Some("/r/subject")), dep("candle-thing", None, true, Some("/r/candle-thing"))], vec![("bin", "repro-b"), ("test", "plots")]),
        package("candle-thing", vec![dep("candle-core", None, false, None)], vec![("lib", "candle-thing"), ("test", "candle")]),
        package("oracle", vec![], vec![("lib", "oracle"), ("test", "oracle")]),
        // Linked only through a dev-dependency: its tests are not the build's.
        package("verdicts", vec![dep("test-support", Some("dev"), false, Some("/r/subject"))], vec![("bin", "verdicts")]),
    ]});
    let m = manifest_from_metadata(&meta, "0.1.154", false, &[]).unwrap();
    assert!(
        m.contains("llama-cpp-sys-2 = { version = \"=0.1.154\", default-features = false }"),
        "{m}"
    );
    for wanted in [
        "name = \"repro-a\"",
        "name = \"repro-b\"",
        "name = \"lifecycle\"",
        "name = \"a\"",
        "candle = []",
    ] {
        assert!(m.contains(wanted), "{wanted} missing:\n{m}");
    }
    // A test name two members share gets the member's name; a unique one keeps the root's.
    assert!(
        m.contains("name = \"repro-a-plots\"") && m.contains("name = \"repro-b-plots\""),
        "{m}"
    );
    for unwanted in [
        "candle-thing",
        "candle-core",
        "name = \"oracle\"",
        "verdicts",
        "[patch",
    ] {
        assert!(!m.contains(unwanted), "{unwanted} present:\n{m}");
    }
    assert!(
        m.contains("subject = { path = \"/r/subject\", default-features = false }"),
        "{m}"
    );
    assert!(
        m.contains("[dev-dependencies]\ninsta = { version = \"^1\" }"),
        "{m}"
    );
    let tree = manifest_from_metadata(&meta, "0.1.161", true, &["openmp".into()]).unwrap();
    assert!(
        tree.contains("features = [\"openmp\"]")
            && tree.contains("[patch.crates-io]\nllama-cpp-sys-2 = { path = \"llama-cpp-sys-2\" }"),
        "{tree}"
    );
}

fn planted_crate(sampler: &str) -> PathBuf {
    let d = temp(&format!("crate-{}", sampler.len()));
    std::fs::create_dir_all(d.join("llama.cpp/include")).unwrap();
    std::fs::create_dir_all(d.join("llama.cpp/src")).unwrap();
    std::fs::write(d.join("llama.cpp/include/llama.h"), "int llama_x(void);\n").unwrap();
    std::fs::write(d.join("llama.cpp/src/llama-sampler.cpp"), sampler).unwrap();
    d
}

#[test]
fn a_release_whose_vendored_sampler_differs_from_the_table_is_refused() {
    let good = planted_crate("int a;\n");
    let mut r = builds::releases()
        .into_iter()
        .find(|r| r.crate_version == "0.1.154")
        .unwrap();
    r.sources_sha256 = builds::sources_sha256(&good.join("llama.cpp")).unwrap();
    check_release(&r, &good).unwrap();
    let edited = planted_crate("int a; /* patched */\n");
    let e = check_release(&r, &edited).unwrap_err().to_string();
    assert!(
        e.contains("not") && e.contains("b10200") && e.contains("refusing"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn build_names_resolve_to_releases_or_trees_and_the_rest_is_refused_in_one_line() {
    let Build::Release(r) = parse_build("0.1.154").unwrap() else {
        panic!()
    };
    assert_eq!(r.name(), "b10200");
    let e = parse_build("b1").unwrap_err().to_string();
    assert!(
        e.starts_with("unknown build 'b1'; known builds: b4240") && !e.contains('\n'),
        "{e}"
    );
    let t = planted_crate("x");
    match parse_build(t.join("llama.cpp").to_str().unwrap()).unwrap() {
        Build::Tree(p) => assert!(p.ends_with("llama.cpp")),
        b => panic!("{b:?}"),
    }
    let e = parse_build(t.to_str().unwrap()).unwrap_err().to_string();
    assert!(e.contains("is not a llama.cpp source tree"), "{e}");
}

#[test]
fn openmp_is_turned_on_only_where_the_release_leaves_it_on_unlinked() {
    let d = temp("openmp");
    let later = "if cfg!(feature = \"openmp\") {\n    config.define(\"GGML_OPENMP\", \"ON\");\n} else {\n    config.define(\"GGML_OPENMP\", \"OFF\");\n}\n";
    std::fs::write(d.join("build.rs"), later).unwrap();
    assert!(sys_features(&d).unwrap().is_empty());
    let early = "if cfg!(feature = \"openmp\") {\n    config.define(\"GGML_OPENMP\", \"ON\");\n}\n";
    std::fs::write(d.join("build.rs"), early).unwrap();
    assert_eq!(sys_features(&d).unwrap(), ["openmp"]);
}

#[test]
fn shards_split_the_revisions_without_overlap() {
    let all = names(None);
    assert_eq!(all.len(), 24);
    let mut joined: Vec<String> = (1..=3).flat_map(|i| names(Some((i, 3)))).collect();
    joined.sort();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(joined, sorted);
    assert_eq!(names(Some((1, 3)))[0], all[0]);
    for bad in ["0/3", "4/3", "1/0", "x", "1/"] {
        assert!(parse_shard(bad).is_err(), "{bad}");
    }
}
