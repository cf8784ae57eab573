//! The runs each job makes, derived from the registry: the audit's steps, F4's tables, the
//! release matrix's runs per revision and memcheck's runs. Each takes the findings as an
//! argument so a test can plan with a finding that is not registered.

use crate::{role_of, Engine, Finding, On, Role};

/// One run of a finding's binary on a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The progress line's name for it: `repro-clone with ledger-penalties on b11429`.
    pub label: String,
    pub binary: &'static str,
    /// The build whose binary runs.
    pub build: String,
    pub args: Vec<String>,
    /// It decodes a model, so it runs alone.
    pub decodes: bool,
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The audit's steps on `builds` (the first one also runs candle's steps when `candle`),
/// writing into `results`. Order: the steps that decode a model first (each runs alone),
/// then the rest; within each, build by build (candle's after every build), the longest
/// first.
pub fn audit(findings: &[Finding], builds: &[&str], candle: bool, results: &str) -> Vec<Run> {
    let mut keyed = Vec::new();
    for f in findings {
        for step in f.audit {
            let on: Vec<(usize, &str)> = match step.engine {
                Engine::Llama => builds.iter().copied().enumerate().collect(),
                Engine::Candle if candle => builds
                    .first()
                    .map(|b| (builds.len(), *b))
                    .into_iter()
                    .collect(),
                Engine::Candle => Vec::new(),
            };
            for (group, build) in on {
                let mut args = strings(step.args);
                args.extend(strings(&["--audit", "--results", results]));
                let label = match step.engine {
                    Engine::Llama => {
                        args.extend(strings(step.budget.on(role_of(build))));
                        let extra = if step.label.is_empty() {
                            String::new()
                        } else {
                            format!(" {}", step.label)
                        };
                        format!("{}{extra} on {build}", f.binary)
                    }
                    Engine::Candle => format!("{} {}", f.binary, step.label),
                };
                let key = (!f.decodes, group, std::cmp::Reverse(step.seconds));
                keyed.push((
                    key,
                    Run {
                        label,
                        binary: f.binary,
                        build: build.to_string(),
                        args,
                        decodes: f.decodes,
                    },
                ));
            }
        }
    }
    keyed.sort_by_key(|(key, _)| *key);
    keyed.into_iter().map(|(_, run)| run).collect()
}

/// The reported-only tables (`--tables`) on each build, by its role's budget.
pub fn tables(findings: &[Finding], builds: &[&str], results: &str) -> Vec<Run> {
    let mut out = Vec::new();
    for build in builds {
        for f in findings {
            let Some(budget) = f.tables else { continue };
            let mut args = strings(&["--tables", "--results", results]);
            args.extend(strings(budget.on(role_of(build))));
            out.push(Run {
                label: format!("{} --tables on {build}", f.binary),
                binary: f.binary,
                build: build.to_string(),
                args,
                decodes: f.decodes,
            });
        }
    }
    out
}

/// One finding's run on a matrix revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixRun {
    pub binary: &'static str,
    /// Beyond `--audit --results DIR`.
    pub args: Vec<String>,
    /// The stems of the reports it writes, `<stem>.<revision>.{json,txt}`.
    pub stems: &'static [&'static str],
    /// It decodes a model, so it holds the decode lock while it runs.
    pub decodes: bool,
}

/// What the release matrix runs on every revision, in registry order.
pub fn matrix(findings: &[Finding]) -> Vec<MatrixRun> {
    (findings.iter())
        .filter_map(|f| {
            f.matrix.map(|m| MatrixRun {
                binary: f.binary,
                args: strings(m.args),
                stems: f.stems,
                decodes: f.decodes,
            })
        })
        .collect()
}

/// One memcheck run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub build: String,
    pub binary: &'static str,
    pub args: Vec<String>,
    /// Valgrind follows its children.
    pub children: bool,
    /// How many followed children may end unjudged at their deadline.
    pub unjudged: usize,
}

/// Memcheck's runs on `builds`, `{models}` read as `models`. The runs that follow children
/// (the longest under valgrind) first on every build, then build by build in registry order.
pub fn memcheck(findings: &[Finding], builds: &[&str], models: &str) -> Vec<Probe> {
    let mut keyed = Vec::new();
    for (i, build) in builds.iter().enumerate() {
        for f in findings {
            for p in f.memcheck {
                if p.on == On::DefaultBuild && role_of(build) != Role::Default {
                    continue;
                }
                let args = (p.args.iter())
                    .map(|a| a.replace("{models}", models))
                    .collect();
                let run = Probe {
                    build: build.to_string(),
                    binary: f.binary,
                    args,
                    children: p.children,
                    unjudged: p.unjudged,
                };
                keyed.push(((!p.children, if p.children { 0 } else { i }), run));
            }
        }
    }
    keyed.sort_by_key(|(key, _)| *key);
    keyed.into_iter().map(|(_, run)| run).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Budget, FindingNumber, MatrixRun as Matrix, Step, FINDINGS};

    /// A finding that is not registered, planned beside the registered ones.
    const DUMMY: Finding = Finding {
        number: FindingNumber(10),
        binary: "repro-dummy",
        title: "a finding for the planner's test",
        decodes: false,
        stems: &["dummy"],
        audit: &[Step {
            label: "",
            engine: Engine::Llama,
            args: &[],
            budget: Budget {
                default: &[],
                older: &["--small"],
            },
            seconds: 1,
        }],
        tables: None,
        matrix: Some(Matrix { args: &["--quick"] }),
        memcheck: &[crate::Probe {
            args: &["--x"],
            children: false,
            unjudged: 0,
            on: On::EveryBuild,
        }],
    };

    fn with_dummy() -> Vec<Finding> {
        let mut all = FINDINGS.to_vec();
        all.push(DUMMY);
        all
    }

    #[test]
    fn a_new_finding_row_is_in_every_plan() {
        let all = with_dummy();
        let audit = audit(&all, &["b11429", "b10200"], true, "results");
        let mine: Vec<_> = audit.iter().filter(|r| r.binary == "repro-dummy").collect();
        assert_eq!(mine.len(), 2, "once per build");
        assert_eq!(
            mine[1].args,
            ["--audit", "--results", "results", "--small"],
            "the older build's budget"
        );
        assert!(matrix(&all)
            .iter()
            .any(|m| m.binary == "repro-dummy" && m.args == ["--quick"]));
        let probes = memcheck(&all, &["b11429", "b10200"], "m");
        assert_eq!(
            probes.iter().filter(|p| p.binary == "repro-dummy").count(),
            2
        );
    }

    #[test]
    fn decoding_steps_come_first_and_candle_runs_once() {
        let steps = audit(FINDINGS, &["b11429", "b10200"], true, "r");
        let first_other = steps.iter().position(|s| !s.decodes).unwrap();
        assert!(steps[first_other..].iter().all(|s| !s.decodes));
        assert!(steps[..first_other].iter().all(|s| s.decodes));
        assert_eq!(
            steps.iter().filter(|s| s.label.contains("candle")).count(),
            4
        );
        assert!(audit(FINDINGS, &["b11429+fixes"], false, "r")
            .iter()
            .all(|s| !s.label.contains("candle")));
    }

    #[test]
    fn a_patched_build_runs_its_base_budget() {
        let gauge = |b: &str| {
            audit(FINDINGS, &[b], false, "r")
                .into_iter()
                .find(|s| s.binary == "repro-gauge")
                .unwrap()
                .args
        };
        assert_eq!(gauge("b11429+fixes"), gauge("b11429"));
        assert_ne!(gauge("b10200"), gauge("b11429"));
    }

    #[test]
    fn models_are_substituted_and_default_only_runs_stay_on_the_default_build() {
        let probes = memcheck(FINDINGS, &["b11429", "b10200"], "/m");
        assert!(probes
            .iter()
            .any(|p| p.args.iter().any(|a| a == "/m/smollm2.gguf")));
        assert!(!probes
            .iter()
            .any(|p| p.build == "b10200" && p.args.iter().any(|a| a == "gemma3")));
        assert!(probes[0].children && probes[1].children);
    }
}
