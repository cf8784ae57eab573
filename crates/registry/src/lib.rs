//! The findings registry: one row per finding ([`FINDINGS`]) and the audited builds by role
//! ([`BUILDS`]).
//!
//! Every list that names findings is derived from here: the audit's steps, the release
//! matrix's runs and memcheck's runs ([`plan`]), and the order of the verdict table
//! ([`compare_ids`]). A new finding is its crate, one row in [`FINDINGS`], its PREREG section
//! and its docs page; `tests/registered.rs` fails when the crate, the section or the page is
//! missing. A finding's arguments per build role (the budgets PREREG's addenda state) live in
//! its row, so a new default build is one line of [`BUILDS`] and the Cargo pin.

mod number;
pub mod plan;

pub use number::{compare_ids, FindingNumber};

/// What an audited build is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The newest release: the root workspace, every finding at its full pre-registered
    /// budget, candle's rows beside it, and the base of the patched build.
    Default,
    /// An older pinned release, audited with the stated subsets of PREREG's addenda.
    Older,
}

/// A build the audit runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// The llama.cpp tag that names it (`b11429`).
    pub tag: &'static str,
    pub role: Role,
}

/// The audited builds, the default first. The default build is the root workspace: its
/// newest llama-cpp-sys-2 release (crates/builds/releases.tsv) is the root `Cargo.toml`'s pin.
pub const BUILDS: [Build; 2] = [
    Build {
        tag: "b11429",
        role: Role::Default,
    },
    Build {
        tag: "b10200",
        role: Role::Older,
    },
];

/// The default build: the one with [`Role::Default`].
pub fn default_build() -> &'static Build {
    (BUILDS.iter().find(|b| b.role == Role::Default)).expect("BUILDS holds the default build")
}

/// What the patched build's name adds to its base's (`b11429+fixes`).
pub const FIXES: &str = "+fixes";

/// The patched build: the default build with every `upstream/llama.cpp/*/fix.patch`.
pub fn patched_build() -> String {
    format!("{}{FIXES}", default_build().tag)
}

/// The role of a build by name: a patched build (`<tag>+...`) has its base's role; a build
/// not in [`BUILDS`] (a matrix revision, a maintainer's tree) runs at the default budget.
pub fn role_of(build: &str) -> Role {
    let base = build.split('+').next().unwrap_or(build);
    (BUILDS.iter().find(|b| b.tag == base)).map_or(Role::Default, |b| b.role)
}

/// The engine a step runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// llama.cpp, on every build the audit names.
    Llama,
    /// candle, linked on the default build only.
    Candle,
}

/// Arguments that differ by build role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub default: &'static [&'static str],
    pub older: &'static [&'static str],
}

impl Budget {
    /// The same arguments (none) on every role.
    pub const FULL: Budget = Budget {
        default: &[],
        older: &[],
    };

    pub fn on(&self, role: Role) -> &'static [&'static str] {
        match role {
            Role::Default => self.default,
            Role::Older => self.older,
        }
    }
}

/// One audit run of a finding's binary on a build: `<binary> <args> --audit --results DIR
/// <budget>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// What the progress line says beyond the binary's name: `with ledger-penalties`.
    pub label: &'static str,
    pub engine: Engine,
    pub args: &'static [&'static str],
    /// Arguments by the build's role (llama.cpp steps).
    pub budget: Budget,
    /// About how long it runs on the default build on 2 idle cores, in seconds (the
    /// fresh-clone audit in docs/timings.md): the audit starts the longest steps first, so its
    /// two slots stay busy to the end.
    pub seconds: u32,
}

impl Step {
    /// The plain step: `--audit` and nothing else.
    const fn plain(seconds: u32) -> Step {
        Step {
            label: "",
            engine: Engine::Llama,
            args: &[],
            budget: Budget::FULL,
            seconds,
        }
    }
}

/// How the release matrix runs a finding on every revision (PREREG's release-matrix addenda
/// state each one's power).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixRun {
    pub args: &'static [&'static str],
}

/// Which audited builds a memcheck run covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    EveryBuild,
    DefaultBuild,
}

/// One memcheck run of a finding's binary. `{models}` in an argument is the models folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub args: &'static [&'static str],
    /// Valgrind follows the children the run starts (each must be clean too).
    pub children: bool,
    /// How many followed children may end at their deadline, unjudged (a planted control
    /// that never returns); one more fails the run.
    pub unjudged: usize,
    pub on: On,
}

impl Probe {
    /// A run on every build that follows no children.
    const fn on_every_build(args: &'static [&'static str]) -> Probe {
        Probe {
            args,
            children: false,
            unjudged: 0,
            on: On::EveryBuild,
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    pub number: FindingNumber,
    /// The binary and its package, under `repros/`.
    pub binary: &'static str,
    /// One line: what the finding asks.
    pub title: &'static str,
    /// It decodes a model: its runs go one at a time (llama.cpp's CPU threads spin while they
    /// wait for each other, so two decoding runs on 2 cores crawl).
    pub decodes: bool,
    /// The reports its plain `--audit` writes, `<stem>.<build>.{json,txt}`.
    pub stems: &'static [&'static str],
    /// Its audit steps on each build; none for a finding with no verdict.
    pub audit: &'static [Step],
    /// Its reported-only tables (`--tables`), by role; `make audit-tables`.
    pub tables: Option<Budget>,
    /// How the release matrix runs it, if it does.
    pub matrix: Option<MatrixRun>,
    /// Its memcheck runs.
    pub memcheck: &'static [Probe],
}

impl Finding {
    /// Its page, relative to the repository.
    pub fn docs_page(&self) -> String {
        format!("docs/findings/{}.md", self.number)
    }

    /// Whether a line of PREREG.md opens its section: `## F<n>:` or `## F<n> and ...:`.
    pub fn opens_prereg_section(&self, line: &str) -> bool {
        (line.strip_prefix(&format!("## {}", self.number))).is_some_and(|rest| {
            rest.starts_with(':') || (rest.starts_with(' ') && rest.contains(':'))
        })
    }

    /// Its package folder, relative to the repository.
    pub fn package_dir(&self) -> String {
        format!("repros/{}", self.binary)
    }
}

/// A chain with every deterministic stage llama.cpp has, plus the sorted_guard fix, each left
/// several candidates (the published chain's bias would leave one after typical): memcheck's
/// F2 run over every stage.
const EVERY_STAGE: &[&str] = &[
    "--logits",
    "2,1.5,1,0.5,0,-0.5,-1,-1.5",
    "--history",
    "0,0,1",
    "--stage",
    "penalties=4:1.3:0.1:0.1",
    "--stage",
    "top_k=7",
    "--stage",
    "logit_bias=3:+1",
    "--stage",
    "sorted_guard",
    "--stage",
    "temp_ext=1.2:0.2:1",
    "--stage",
    "typical=0.99",
    "--stage",
    "top_p=0.99",
    "--stage",
    "min_p=0.02",
    "--stage",
    "xtc=1:0.15",
    "--stage",
    "top_n_sigma=3",
    "--stage",
    "temp=0.8",
    "--stage",
    "greedy",
];

/// F3 decoding as short as repro-scope goes, for memcheck: the prompt through the chat
/// template, the `all` scope with its llama.cpp twins, the planted scopes and the
/// single-vector table, each a fresh prefill plus one token. One token cannot diverge, so the
/// verdict reads inconclusive; the memory is the point.
macro_rules! short_decode {
    ($($model:literal),*) => {
        &[$($model,)* "--prompt", "Hi", "--max-new", "1", "--scopes", "all", "--vector-at", "0", "--threads", "1"]
    };
}

/// Every finding, by number.
pub const FINDINGS: &[Finding] = &[
    Finding {
        number: FindingNumber(1),
        binary: "repro-clone",
        title: "a cloned penalties sampler keeps the window and its token counts",
        decodes: false,
        stems: &["clone", "clone-stateful"],
        audit: &[
            Step::plain(40),
            Step {
                label: "with ledger-penalties",
                args: &["--sampler", "ledger"],
                seconds: 32,
                ..Step::plain(0)
            },
        ],
        tables: None,
        matrix: Some(MatrixRun {
            // The sweep over alphabets 2 to 4 with a^L <= 2^14 (455,527 sequences; the
            // audit's is 3,740,518).
            args: &["--sweep-bits", "14", "--sweep-max-alphabet", "4"],
        }),
        memcheck: &[
            Probe::on_every_build(&[]),
            Probe::on_every_build(&["--sampler", "ledger"]),
            // --stateful's own memcheck probes run as children under their own valgrind;
            // this run checks the parent.
            Probe::on_every_build(&["--stateful"]),
        ],
    },
    Finding {
        number: FindingNumber(2),
        binary: "repro-sortpoison",
        title: "a truncation stage after logit_bias trusts a stale `sorted` flag",
        decodes: false,
        stems: &["sortpoison", "sortpoison-guard"],
        audit: &[Step::plain(12)],
        tables: None,
        // The fuzzer with a tenth of the audit's chains.
        matrix: Some(MatrixRun {
            args: &["--fuzz-chains", "10000"],
        }),
        memcheck: &[
            Probe::on_every_build(&[]),
            Probe::on_every_build(EVERY_STAGE),
            // dist at the end: the stale flag's overflow and 10,000 draws through llama.cpp's
            // dist, beside the planted dists.
            Probe {
                args: &[
                    "--stage",
                    "top_k=4",
                    "--stage",
                    "logit_bias=3:+100",
                    "--stage",
                    "dist=1",
                ],
                children: false,
                unjudged: 0,
                on: On::EveryBuild,
            },
        ],
    },
    Finding {
        number: FindingNumber(3),
        binary: "repro-scope",
        title: "which tokens the repetition penalty sees",
        decodes: true,
        stems: &["scope"],
        audit: &[
            Step::plain(120),
            Step {
                label: "with candle on smollm2",
                engine: Engine::Candle,
                args: &["--engine", "candle", "--model", "smollm2"],
                seconds: 38,
                budget: Budget::FULL,
            },
            Step {
                label: "with candle on gemma3",
                engine: Engine::Candle,
                args: &["--engine", "candle", "--model", "gemma3"],
                seconds: 61,
                budget: Budget::FULL,
            },
        ],
        tables: None,
        matrix: None,
        memcheck: &[
            // SmolLM2 by its file path: the same decode without the default system turn and
            // the sha256 check (a third of the decoding under valgrind). Gemma3's file has
            // no chat template, so it runs by name, on the default build only.
            Probe::on_every_build(short_decode!("--model", "{models}/smollm2.gguf")),
            Probe {
                args: short_decode!("--model", "gemma3"),
                children: false,
                unjudged: 0,
                on: On::DefaultBuild,
            },
        ],
    },
    Finding {
        number: FindingNumber(4),
        binary: "repro-gauge",
        title: "the repetition penalty depends on the logits' gauge",
        decodes: true,
        stems: &["gauge", "gauge-ledger"],
        audit: &[
            Step {
                // The A1 design in full on the default build (both models, 16 prompts), a
                // stated subset on the older one (PREREG, F4 addenda of 2026-11-30).
                budget: Budget {
                    default: &[],
                    older: &["--models", "smollm2", "--prompts", "4"],
                },
                ..Step::plain(1206)
            },
            Step {
                label: "with candle",
                engine: Engine::Candle,
                args: &[
                    "--engine",
                    "candle",
                    "--models",
                    "smollm2",
                    "--prompts",
                    "2",
                ],
                budget: Budget::FULL,
                seconds: 50,
            },
        ],
        // 40,960 teacher-forced positions per model and 8 JSON prompts on the default
        // build; SmolLM2, 2,048 positions, 4 JSON prompts and 16 grammar pairs on the older
        // one (PREREG, F4 addendum of 2026-12-03).
        tables: Some(Budget {
            default: &["--json-prompts", "8"],
            older: &[
                "--models",
                "smollm2",
                "--positions",
                "2048",
                "--json-prompts",
                "4",
                "--structural-pairs",
                "16",
            ],
        }),
        matrix: None,
        memcheck: &[],
    },
    Finding {
        number: FindingNumber(5),
        binary: "penalty-cost",
        title: "the penalties stage's cost (a benchmark, no verdict: make bench)",
        decodes: false,
        stems: &[],
        audit: &[],
        tables: None,
        matrix: None,
        memcheck: &[],
    },
    Finding {
        number: FindingNumber(6),
        binary: "repro-edges",
        title: "what each sampler does on edge inputs",
        decodes: false,
        stems: &["edges"],
        audit: &[Step::plain(12)],
        tables: None,
        matrix: Some(MatrixRun { args: &[] }),
        // Valgrind follows every probe child into llama.cpp's sampler calls. A child takes
        // 1 to 2 s under valgrind; the deadline, 30 s, bounds the planted control that never
        // returns, the two children allowed to end unjudged (a time-out is retried once).
        memcheck: &[Probe {
            args: &[
                "--sampler",
                "top_k,typical,greedy,dist",
                "--input",
                "plain,empty,equal,some-neg-inf",
                "--timeout",
                "30",
            ],
            children: true,
            unjudged: 2,
            on: On::EveryBuild,
        }],
    },
    Finding {
        number: FindingNumber(7),
        binary: "repro-engines",
        title: "each engine's draws against the oracle's distribution",
        decodes: false,
        stems: &["engines"],
        audit: &[
            Step::plain(16),
            Step {
                label: "with candle",
                engine: Engine::Candle,
                args: &["--engine", "candle"],
                budget: Budget::FULL,
                seconds: 8,
            },
        ],
        tables: None,
        matrix: Some(MatrixRun { args: &[] }),
        // llama.cpp's chain ending in dist, applied again and again.
        memcheck: &[Probe::on_every_build(&[
            "--sampling",
            "top_k=3,top_p=0.9,temp=0.5",
            "--draws",
            "200",
        ])],
    },
    Finding {
        number: FindingNumber(8),
        binary: "repro-ingraph",
        title: "backend (in-graph) sampling against the CPU chain and the oracle",
        decodes: true,
        stems: &["ingraph"],
        audit: &[
            Step::plain(102),
            // Gemma3 without the draw row (PREREG, F8 addendum of 2026-12-03).
            Step {
                label: "on gemma3",
                args: &["--model", "gemma3", "--draws", "0"],
                seconds: 6,
                ..Step::plain(0)
            },
        ],
        tables: None,
        // The draw row at 300 draws (the audit's is 4,000).
        matrix: Some(MatrixRun {
            args: &["--draws", "300"],
        }),
        memcheck: &[],
    },
    Finding {
        number: FindingNumber(9),
        binary: "repro-copy",
        title: "a copied sampler (llama_sampler_copy) continues as its original",
        decodes: false,
        stems: &["copy"],
        audit: &[Step::plain(8)],
        tables: None,
        matrix: Some(MatrixRun { args: &[] }),
        memcheck: &[],
    },
];

/// The finding whose binary is `binary`.
pub fn by_binary(binary: &str) -> Option<&'static Finding> {
    FINDINGS.iter().find(|f| f.binary == binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_heading_is_the_number_then_a_colon_or_words_and_a_colon() {
        let f = |n| Finding {
            number: FindingNumber(n),
            ..FINDINGS[0]
        };
        assert!(f(5).opens_prereg_section("## F5 and the fixes: ledger samplers"));
        assert!(f(1).opens_prereg_section("## F1: cloning"));
        assert!(!f(1).opens_prereg_section("## F10: a later finding"));
        assert!(!f(1).opens_prereg_section("## F1 without a colon"));
    }
}
