//! The chains F8 runs, registered in PREREG before the first run: each backend-capable stage
//! alone, chains that run wholly in the graph, chains whose graph prefix hands over to a CPU
//! tail, and the planted controls.

use crate::planted::{History, Kind, Planted};
use anyhow::{Context, Result};
use oracle::stage::Stage;
use oracle::TokenId;
use subject::{Sampler, SamplerSpec};

/// One stage of a case's chain.
#[derive(Debug, Clone)]
pub enum Link {
    /// One of llama.cpp's own stages.
    Llama(Stage),
    /// A stage written here (see [`crate::planted`]), judged against its oracle stage.
    Planted(Planted),
    /// llama.cpp's `logit_bias`, with the biases that lift `ids` to exactly [`TIE_LEVEL`] on
    /// the prompt's raw logits, so that they tie above every other entry. Its biases depend
    /// on the model's output, so [`Case::on`] computes them before the case runs.
    Tie { ids: Vec<TokenId> },
}

impl Link {
    fn stage(&self) -> Stage {
        match self {
            Link::Llama(s) => s.clone(),
            Link::Planted(p) => p.stage(),
            Link::Tie { ids } => Stage::LogitBias {
                biases: ids.iter().map(|&id| (id, f32::NAN)).collect(),
            },
        }
    }
}

/// The logit that [`Link::Tie`] lifts its ids to: above any logit of the audited models, and
/// a bias to it stays inside the limit the stage parser accepts.
pub const TIE_LEVEL: f32 = 64.0;

/// The ids the registered tie cases lift to [`TIE_LEVEL`].
pub const TIE_IDS: [i32; 3] = [100, 200, 300];

/// The f32 bias `b` with `logit + b == level` exactly, as both paths and the oracle add it (the
/// nearest representable difference, or one of its neighbours when that rounds off `level`).
pub fn bias_to(level: f32, logit: f32) -> Option<f32> {
    let b = level - logit;
    (-4i32..=4)
        .map(|d| f32::from_bits(b.to_bits().wrapping_add_signed(d)))
        .find(|&x| x.is_finite() && logit + x == level)
}

/// One chain and how closely its two paths must agree.
#[derive(Debug, Clone)]
pub struct Case {
    /// The row's name: `ingraph-<name>`.
    pub name: String,
    pub links: Vec<Link>,
    /// How many units in the last place a survivor's logit may differ between the graph and
    /// the CPU: 0 where both paths copy, mask or add exactly; 1 where the graph multiplies by
    /// `fl(1/t)` and the CPU divides by `t` (both faithful, so at most one ulp apart).
    pub ulps: u32,
    /// The context's `n_outputs_max_per_seq` (above 1, some stages refuse the graph).
    pub outputs_per_seq: u32,
    /// Whether the graph's logits are also judged against the oracle's (where the oracle
    /// computes them in f32 as llama.cpp does: penalties).
    pub values_against_oracle: bool,
    /// Whether both chains first accept [`crate::compare::primed`]'s history (run as the first
    /// step of the stepped procedure), so that a leading penalties stage changes something.
    pub primed: bool,
}

impl Case {
    fn of(name: &str, links: Vec<Link>) -> Case {
        Case {
            name: name.to_string(),
            ulps: u32::from(links.iter().any(|l| needs_ulp(&l.stage()))),
            links,
            outputs_per_seq: 1,
            values_against_oracle: false,
            primed: false,
        }
    }

    /// The same case in a context that allows `n` outputs per sequence.
    pub fn with_outputs_per_seq(mut self, n: u32) -> Case {
        self.outputs_per_seq = n;
        self
    }

    pub fn stages(name: &str, text: &str) -> Case {
        let stages = parse(text).expect("registered cases parse");
        Case::of(name, stages.into_iter().map(Link::Llama).collect())
    }

    /// A case from the command line: `--stage` texts in order.
    pub fn from_cli(texts: &[String]) -> Result<Case> {
        let stages = texts
            .iter()
            .map(|t| {
                t.parse::<Stage>()
                    .map_err(|e| anyhow::anyhow!("--stage {t}: {}", e.0))
            })
            .collect::<Result<Vec<_>>>()?;
        anyhow::ensure!(!stages.is_empty(), "give at least one --stage");
        Ok(Case::of(
            &texts.join(","),
            stages.into_iter().map(Link::Llama).collect(),
        ))
    }

    /// The case on a prompt whose raw logits are `raw`: every [`Link::Tie`] becomes the
    /// `logit_bias` it stands for (see [`bias_to`]).
    pub fn on(&self, raw: &[f32]) -> Result<Case> {
        let links = (self.links.iter())
            .map(|l| match l {
                Link::Tie { ids } => {
                    let biases = (ids.iter())
                        .map(|&id| {
                            let logit = *raw
                                .get(id.0 as usize)
                                .with_context(|| format!("tie id {id} is outside the vocabulary"))?;
                            let b = bias_to(TIE_LEVEL, logit).with_context(|| {
                                format!("no f32 bias lifts id {id} (logit {logit}) to exactly {TIE_LEVEL}")
                            })?;
                            Ok((id, b))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Ok(Link::Llama(Stage::LogitBias { biases }))
                }
                other => Ok(other.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Case {
            links,
            ..self.clone()
        })
    }

    /// The oracle's description of the chain.
    pub fn oracle_stages(&self) -> Vec<Stage> {
        self.links.iter().map(Link::stage).collect()
    }

    /// The planted stage of the chain, if it has one.
    pub fn planted(&self) -> Option<&Planted> {
        self.links.iter().find_map(|l| match l {
            Link::Planted(p) => Some(p),
            Link::Llama(_) | Link::Tie { .. } => None,
        })
    }

    /// A fresh chain of this case for a vocabulary of `n_vocab` ids.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        let members = (self.links.iter())
            .map(|l| match l {
                Link::Llama(s) => SamplerSpec::from(s.clone()).with_vocab(n_vocab).build(),
                Link::Planted(p) => p.build(n_vocab),
                Link::Tie { .. } => {
                    anyhow::bail!("a tie link is resolved by Case::on before it runs")
                }
            })
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("building case {}", self.name))?;
        Sampler::chain(members)
    }

    /// The chain's text, as `--stage` takes it (a planted stage by its name and oracle stage).
    pub fn describe(&self) -> String {
        (self.links.iter())
            .map(|l| match l {
                Link::Llama(s) => s.to_string(),
                Link::Planted(p) => format!("{} ({})", p.name(), p.stage()),
                Link::Tie { ids } => {
                    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                    format!("logit_bias(ids {} to {TIE_LEVEL})", ids.join("/"))
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether the chain ends by choosing a token.
    pub fn selects(&self) -> bool {
        self.oracle_stages()
            .last()
            .is_some_and(|s| matches!(s, Stage::Greedy | Stage::Dist { .. }))
    }

    /// Whether the choice is a draw (then the two paths' tokens are compared as a note).
    pub fn draws(&self) -> bool {
        self.oracle_stages()
            .iter()
            .any(|s| matches!(s, Stage::Dist { .. }))
    }
}

/// A temperature whose reciprocal is not exact in f32 (see [`Case::ulps`]). A dynamic
/// temp_ext (`delta > 0`) is judged by its derived bound instead ([`crate::dyntemp`]); with
/// `delta <= 0` it is `temp`.
fn needs_ulp(s: &Stage) -> bool {
    let inexact = |t: f32| t > 0.0 && !is_power_of_two(t);
    match s {
        Stage::Temp { t } => inexact(*t),
        Stage::TempExt { t, delta, .. } => *delta <= 0.0 && inexact(*t),
        _ => false,
    }
}

fn is_power_of_two(t: f32) -> bool {
    t > 0.0 && t.to_bits() & 0x007f_ffff == 0
}

fn parse(text: &str) -> Result<Vec<Stage>> {
    text.split(',')
        .map(|t| {
            t.parse::<Stage>()
                .map_err(|e| anyhow::anyhow!("{t}: {}", e.0))
        })
        .collect()
}

/// The min_keep that the min_keep cases and the planted controls use, and their p values:
/// small enough that the stage alone keeps fewer than `MIN_KEEP` entries on the prompt.
pub const MIN_KEEP: usize = 8;
pub const MIN_KEEP_MIN_P: f32 = 0.5;

/// The dynamic temp_ext every temp_ext case composes (range [0.3, 1.3], linear in the
/// normalized entropy), as `--stage` writes it.
pub const TEMP_EXT: &str = "temp_ext=0.8:0.5:1";

/// `temp_ext` after each backend-capable stage that can precede it, and alone; then the
/// parameter edges of the derivation (docs/findings/F8.md): `t <= 0` with `delta > 0` (after
/// top_k, so that the row keeps a stage in the graph where temp_ext itself stays on the CPU),
/// a single survivor, a single finite entry in a longer CPU array (after `temp=0`), exponent 0
/// and `delta = 0`.
pub fn temp_ext_cases() -> Vec<Case> {
    let after = |name: &str, before: &str| {
        Case::stages(&format!("{name}-temp_ext"), &format!("{before},{TEMP_EXT}"))
    };
    vec![
        Case::stages("temp_ext", TEMP_EXT),
        after("top_k", "top_k=40"),
        after("top_p", TEMP_EXT_TOP_P),
        after("min_p", "min_p=0.05"),
        after("temp", "temp=0.7"),
        after("temp_ext", TEMP_EXT),
        after("logit_bias", "logit_bias=100:+30/200:-30"),
        Case {
            primed: true,
            ..after("penalties", "penalties=16:2:0.5:0.25")
        },
        Case::stages("top_k-temp_ext-t0", "top_k=40,temp_ext=0:0.5:1"),
        after("top_k-1", "top_k=1"),
        after("temp-0", "temp=0"),
        Case::stages("temp_ext-exp0", "temp_ext=0.8:0.5:0"),
        Case::stages("temp_ext-delta0", "temp_ext=0.7:0:1"),
    ]
}

/// The top_p before temp_ext: on SmolLM2 after the audit's prompt it keeps 2, and no
/// cumulative mass near the cut lies within the oracle's f32 slack of it (at the registered
/// top_p = 0.9, and at 0.4 to 0.75, one does).
pub const TEMP_EXT_TOP_P: &str = "top_p=0.3";

/// Every registered case, in report order.
pub fn registered() -> Vec<Case> {
    vec![
        Case::stages("top_k", "top_k=40"),
        Case::stages("top_p", "top_p=0.9"),
        Case::stages("top_p-min_keep", "top_p=0.1:8"),
        Case::stages("min_p", "min_p=0.05"),
        Case::stages("min_p-min_keep", "min_p=0.5:8"),
        Case::stages("temp-0.7", "temp=0.7"),
        Case::stages("temp-2", "temp=2"),
        Case::stages("temp-0", "temp=0"),
        Case::stages("logit_bias", "logit_bias=100:+30/200:-30"),
        Case::stages("greedy", "greedy"),
        Case::stages("top_k-greedy", "top_k=40,greedy"),
        Case::stages(
            "chain-truncate-temp-greedy",
            "top_k=40,top_p=0.9,min_p=0.05,temp=0.7,greedy",
        ),
        Case::stages(
            "chain-bias-top_k-dist",
            "logit_bias=100:+30,top_k=8,dist=1234",
        ),
        Case::stages("tail-typical-greedy", "top_k=40,typical=0.9,greedy"),
        Case::stages("tail-top_n_sigma-dist", "top_k=40,top_n_sigma=1,dist=1234"),
        // Two outputs per sequence: penalties refuses the graph then, so the chain's graph
        // prefix ends before it.
        Case::stages("two-outputs-top_k-greedy", "top_k=40,greedy").with_outputs_per_seq(2),
        Case::stages(
            "two-outputs-top_k-penalties-greedy",
            "top_k=40,penalties=16:2:0.5:0.25,greedy",
        )
        .with_outputs_per_seq(2),
        // Ties made by equal biases: three ids lifted to exactly the same logit above all
        // others, then a cut or choice inside them.
        tie_case("ties-top_k", "top_k=2"),
        tie_case("ties-top_p", "top_p=0.5"),
        tie_case("ties-greedy", "greedy"),
        tie_case("ties-top_k-dist", "top_k=2,dist=1234"),
    ]
    .into_iter()
    .chain(temp_ext_cases())
    .collect()
}

/// [`Link::Tie`] on [`TIE_IDS`], then `text`'s stages.
fn tie_case(name: &str, text: &str) -> Case {
    let mut links = vec![tie_link()];
    links.extend(
        parse(text)
            .expect("registered cases parse")
            .into_iter()
            .map(Link::Llama),
    );
    Case::of(name, links)
}

fn tie_link() -> Link {
    Link::Tie {
        ids: TIE_IDS.iter().map(|&i| TokenId(i)).collect(),
    }
}

/// The penalties case run over several decode steps (PREREG, F8's penalties addendum): dyadic
/// parameters, so both paths' arithmetic is exact and no ulp is allowed.
pub fn stepped() -> Case {
    Case {
        values_against_oracle: true,
        ..Case::stages("penalties-steps", "penalties=16:2:0.5:0.25,greedy")
    }
}

/// Decode steps of [`stepped`].
pub const STEPS: usize = 24;

/// The stepped row's planted controls, run as it is: a penalties stage written here with
/// [`stepped`]'s parameters, then greedy, whose graph path counts the window (exact), each
/// token twice, or every token (wrong); in that order.
pub fn stepped_planted() -> [Case; 3] {
    let [Stage::Penalties { last_n, params }, Stage::Greedy] = stepped().oracle_stages()[..] else {
        unreachable!("the stepped case is penalties, then greedy")
    };
    // The planted graph path multiplies by 1/repeat where the CPU divides: equal only for a
    // power of two.
    assert!(
        is_power_of_two(params.repeat),
        "the planted penalties are exact only for a repeat that is a power of two"
    );
    [History::Window, History::Twice, History::Unbounded].map(|h| {
        let p = Planted::penalties(last_n.0, params, h);
        Case {
            values_against_oracle: true,
            ..Case::of(
                &format!("penalties-steps-{}", p.name()),
                vec![Link::Planted(p), Link::Llama(Stage::Greedy)],
            )
        }
    })
}

/// An exact and a wrong planted `kind` between `before` and `after`, named `<prefix><name>`.
pub fn planted_pair(prefix: &str, kind: Kind, before: Vec<Link>, after: Vec<Link>) -> [Case; 2] {
    [true, false].map(|exact| {
        let p = Planted::new(kind, exact);
        let name = format!("{prefix}{}", p.name());
        let mut links = before.clone();
        links.push(Link::Planted(p));
        links.extend(after.iter().cloned());
        Case::of(&name, links)
    })
}

/// The planted controls, each as (exact, wrong), in the order their checks are listed in
/// [`crate::planted`].
pub fn planted() -> Vec<[Case; 2]> {
    let top_k = |k| Link::Llama(Stage::TopK { k });
    let pair = |kind: Kind, before: Vec<Link>| planted_pair("", kind, before, vec![]);
    vec![
        pair(
            Kind::MinP {
                p: MIN_KEEP_MIN_P,
                min_keep: MIN_KEEP,
            },
            vec![],
        ),
        pair(
            Kind::Temp {
                t: 0.5,
                skew: f32::from_bits(1.0f32.to_bits() + 4),
            },
            vec![top_k(40)],
        ),
        pair(Kind::Greedy, vec![top_k(40)]),
        pair(Kind::SoftmaxGreedy, vec![top_k(8)]),
        pair(Kind::TieTopK { k: 2 }, vec![tie_link()]),
        pair(
            Kind::TempExt {
                t: 0.8,
                delta: 0.5,
                exponent: 1.0,
            },
            vec![Link::Llama(Stage::MinP {
                p: 0.05,
                min_keep: 1,
            })],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_cases_build_and_name_uniquely() {
        let cases = registered();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cases.len());
        assert!(cases.iter().all(|c| !c.oracle_stages().is_empty()));
    }

    #[test]
    fn a_tie_bias_lands_exactly_on_the_level() {
        for logit in [-31.7f32, -1e-7, 0.0, 3.3, 17.123_457, 25.000_002, 63.9] {
            let b = bias_to(TIE_LEVEL, logit).unwrap();
            assert_eq!(logit + b, TIE_LEVEL, "{logit}");
        }
    }

    #[test]
    fn tie_cases_lift_three_ids_to_one_logit_above_the_rest() {
        let mut raw: Vec<f32> = (0..400).map(|i| (i as f32 * 0.731).sin() * 20.0).collect();
        raw[7] = 30.0;
        let case = registered()
            .into_iter()
            .find(|c| c.name == "ties-top_k")
            .unwrap();
        let on = case.on(&raw).unwrap();
        let pool = oracle::truncation::Pool::from_logits(&raw);
        let comp = oracle::truncation::compose(&on.oracle_stages(), &pool, &[]);
        assert_eq!(comp.pool.len(), 2);
        assert!(comp.edges.iter().all(|(_, e)| e.is_tie()) && !comp.edges.is_empty());
        assert!(
            Case::of("x", vec![tie_link()]).build(400).is_err(),
            "unresolved ties never run"
        );
    }

    #[test]
    fn one_ulp_only_where_a_reciprocal_is_inexact() {
        assert!(needs_ulp(&Stage::Temp { t: 0.7 }));
        assert!(!needs_ulp(&Stage::Temp { t: 2.0 }));
        assert!(!needs_ulp(&Stage::Temp { t: 0.5 }));
        assert!(!needs_ulp(&Stage::TopK { k: 4 }));
        let te = |t, delta| Stage::TempExt {
            t,
            delta,
            exponent: 1.0,
        };
        assert!(needs_ulp(&te(0.7, 0.0)));
        assert!(!needs_ulp(&te(0.5, 0.0)));
        assert!(!needs_ulp(&te(0.7, 0.5)), "judged by the derived bound");
    }

    #[test]
    fn every_temp_ext_case_ends_in_temp_ext() {
        for c in temp_ext_cases() {
            assert!(
                matches!(c.oracle_stages().last(), Some(Stage::TempExt { .. })),
                "{}",
                c.name
            );
        }
    }
}
