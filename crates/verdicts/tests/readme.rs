//! The verdict matrix a reader sees is the one the committed results give: results/VERDICTS.md
//! is `verdicts --markdown results` and the README's block between the markers is
//! `verdicts --embed README.md results` (the compact form), byte for byte.

use std::path::PathBuf;

fn root() -> PathBuf {
    test_support::results_dir().parent().unwrap().to_path_buf()
}

fn generated(compact: bool) -> String {
    let args = verdicts::Args {
        dir: test_support::results_dir(),
        markdown: true,
        compact,
        embed: None,
    };
    let checked = match verdicts::check(args) {
        Ok(c) => c,
        Err(cmdline::Failure::BadInput(e) | cmdline::Failure::Failed(e)) => panic!("{e:#}"),
    };
    verdicts::render(&checked)
}

#[test]
fn verdicts_md_is_the_results() {
    let file = root().join("results/VERDICTS.md");
    let committed = std::fs::read_to_string(&file).expect("results/VERDICTS.md");
    assert!(
        committed == generated(false),
        "results/VERDICTS.md differs from `verdicts --markdown results`; regenerate it (make audit)"
    );
}

#[test]
fn the_readme_matrix_is_the_results() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = verdicts::embedded(&readme).expect("README.md has no verdict markers");
    assert!(
        block == generated(true),
        "README.md's verdict matrix differs from `verdicts --embed README.md results`; regenerate it (make audit)"
    );
}

#[test]
fn embedding_replaces_only_the_block() {
    let doc = format!("a\n{}\nold\n{}\nb\n", verdicts::BEGIN, verdicts::END);
    let out = verdicts::embed(&doc, "new\n").unwrap();
    assert_eq!(
        out,
        format!("a\n{}\nnew\n{}\nb\n", verdicts::BEGIN, verdicts::END)
    );
    assert_eq!(verdicts::embedded(&out), Some("new\n"));
    assert!(verdicts::embed("no markers", "x").is_err());
    let twice = format!("{0}\n{0}\n{1}\n", verdicts::BEGIN, verdicts::END);
    assert!(verdicts::embed(&twice, "x").is_err());
    let reversed = format!("{}\n{}\n", verdicts::END, verdicts::BEGIN);
    assert!(verdicts::embed(&reversed, "x").is_err());
}

#[test]
fn the_readme_stays_under_ten_thousand_characters() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.chars().count();
    assert!(
        n <= 10_000,
        "README.md has {n} characters; at most 10,000 (detail belongs in docs/)"
    );
}
