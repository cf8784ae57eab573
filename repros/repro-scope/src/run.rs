//! One prompt under several scopes: trajectories, their divergences from `all` explained, the
//! single-vector table, and the controls.

use crate::controls::{planted_controls, twin_controls, PlantedRuns, SamplerRuns};
use crate::cross::{self, Parting};
use crate::decode::{Divergence, EngineSide, ScopeDecoder, StepChecks, Tally, Trajectory};
use crate::scope::ScopeSpec;
use crate::vector::{self, VectorTable};
use anyhow::Result;
use engine::{EngineInfo, EngineName};
use oracle::TokenId;
use report::{Control, Report, Verdict};
use serde::{Serialize, Serializer};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    pub prompt: String,
    pub theta: f32,
    pub max_new: usize,
    pub scopes: Vec<ScopeSpec>,
    pub threads: i32,
    /// Generated tokens (under `all`) in the single-vector context.
    pub vector_at: usize,
    /// Whose logits, penalty and greedy choice the trajectories use.
    pub engine: EngineName,
}

pub use harness::LoadedModel;

/// The run's data: every scope's tokens, text, divergence and checks.
impl Serialize for RunReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            model: &'a str,
            model_desc: &'a str,
            prompt: &'a str,
            prompt_tokens: usize,
            prompt_ids: Vec<i32>,
            penalty: f32,
            max_new: usize,
            threads: i32,
            scopes: Scopes<'a>,
            planted: &'a PlantedRuns,
            planted_samplers: Option<&'a SamplerRuns>,
            vector: &'a VectorTable,
            cross_engine: &'a [Parting],
        }
        Written {
            model: &self.model_label,
            model_desc: &self.model_desc,
            prompt: &self.config.prompt,
            prompt_tokens: self.prompt_ids.len(),
            prompt_ids: self.prompt_ids.iter().map(|i| i.0).collect(),
            penalty: self.config.theta,
            max_new: self.config.max_new,
            threads: self.config.threads,
            scopes: Scopes(self),
            planted: &self.planted,
            planted_samplers: self.samplers.as_ref(),
            vector: &self.vector,
            cross_engine: &self.cross,
        }
        .serialize(s)
    }
}

/// Every scope's trajectory, keyed by the scope.
struct Scopes<'a>(&'a RunReport);

impl Serialize for Scopes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// A twin's steps; `greedy_not_first_max` only for the engine's own.
        #[derive(Serialize)]
        struct Twin {
            steps: usize,
            mismatching_steps: usize,
            #[serde(skip_serializing_if = "Option::is_none")]
            greedy_not_first_max: Option<usize>,
        }
        #[derive(Serialize)]
        struct Scope<'a> {
            tokens: Vec<i32>,
            text: &'a str,
            diverges_at: Option<usize>,
            divergence: &'a Option<Divergence>,
            stopped_at: usize,
            stop: &'static str,
            llama_twin: Twin,
            engine_twin: Twin,
            planted_exact: Tally,
            planted_wrong: Tally,
        }
        let r = self.0;
        s.collect_map(r.trajectories.iter().zip(&r.texts).map(|(t, text)| {
            let c = &t.checks;
            let scope = Scope {
                tokens: t.tokens.iter().map(|i| i.0).collect(),
                text,
                diverges_at: harness::divergence(&t.tokens, &r.all().tokens),
                divergence: &t.divergence,
                stopped_at: t.stopped_at(),
                stop: t.stop.as_str(),
                llama_twin: Twin {
                    steps: c.twin.steps,
                    mismatching_steps: c.twin.mismatching_steps,
                    greedy_not_first_max: None,
                },
                engine_twin: Twin {
                    steps: c.engine_twin.steps,
                    mismatching_steps: c.engine_twin.mismatching_steps,
                    greedy_not_first_max: Some(c.greedy_mismatches),
                },
                planted_exact: c.planted_exact,
                planted_wrong: c.planted_wrong,
            };
            (t.scope, scope)
        }))
    }
}

/// The verdict's name.
pub const NAME: &str = "penalty-scope-divergence";

pub struct RunReport {
    pub engine: EngineInfo,
    pub model_label: String,
    pub model_desc: String,
    pub config: RunConfig,
    pub prompt_ids: Vec<TokenId>,
    /// One per configured scope, `all` first; every other one carries its divergence from it.
    pub trajectories: Vec<Trajectory>,
    pub texts: Vec<String>,
    pub planted: PlantedRuns,
    /// llama.cpp: the planted penalties samplers in its penalties slot, the verdict's own
    /// controls (none for another engine, whose penalty has no llama.cpp chain).
    pub samplers: Option<SamplerRuns>,
    pub vector: VectorTable,
    /// Another engine than llama.cpp: each scope decoded by llama.cpp too, compared.
    pub cross: Vec<Parting>,
}

/// llama.cpp's decoder for `prompt_ids`.
fn llama_decoder(m: &LoadedModel, cfg: &RunConfig, prompt_ids: &[TokenId]) -> Result<ScopeDecoder> {
    let (model, prompt) = (Arc::clone(&m.model), prompt_ids.to_vec());
    ScopeDecoder::new(model, prompt, cfg.theta, cfg.max_new, cfg.threads)
}

/// The configured engine's decoder for `prompt_ids`.
fn decoder(m: &LoadedModel, cfg: &RunConfig, prompt_ids: &[TokenId]) -> Result<ScopeDecoder> {
    if cfg.engine == EngineName::Llama {
        return llama_decoder(m, cfg, prompt_ids);
    }
    let engine = harness::engines::get(cfg.engine)?;
    // Asked already by the command line's check; a caller that skipped it gets the child load
    // here, before the file reaches the engine in this process.
    crate::engine_load::preflight(cfg.engine, &m.choice)?;
    let logits = engine.load(&m.choice.path, cfg.threads.max(1) as usize, cfg.max_new)?;
    let side = EngineSide { engine, logits };
    let (model, prompt) = (Arc::clone(&m.model), prompt_ids.to_vec());
    ScopeDecoder::with_engine(model, side, prompt, cfg.theta, cfg.max_new)
}

pub fn run(m: &LoadedModel, cfg: &RunConfig) -> Result<RunReport> {
    let prompt_ids = m.chat_ids(&cfg.prompt)?;
    let mut dec = decoder(m, cfg, &prompt_ids)?;
    let trajectories = dec.against_first(&cfg.scopes, cfg.max_new)?;
    let planted = PlantedRuns::run(&mut dec, &trajectories[0], cfg.max_new)?;
    let samplers = (cfg.engine == EngineName::Llama)
        .then(|| SamplerRuns::run(&mut dec, &trajectories[0], cfg.max_new))
        .transpose()?;
    let texts = (trajectories.iter())
        .map(|t| m.model.detokenize(&t.tokens))
        .collect::<Result<Vec<_>>>()?;
    let vector = vector::table(&mut dec, &trajectories[0], &cfg.scopes, cfg.vector_at)?;
    let cross = if cfg.engine == EngineName::Llama {
        Vec::new()
    } else {
        let mut llama = llama_decoder(m, cfg, &prompt_ids)?;
        cross::compare(&mut llama, &mut dec, &trajectories, cfg.max_new)?
    };
    Ok(RunReport {
        engine: dec.side.engine.info(),
        model_label: m.choice.label.clone(),
        model_desc: dec.side.logits.describe(),
        config: cfg.clone(),
        prompt_ids,
        trajectories,
        texts,
        planted,
        samplers,
        vector,
        cross,
    })
}

pub use crate::rule::measured;

impl RunReport {
    pub fn all(&self) -> &Trajectory {
        &self.trajectories[0]
    }

    pub fn controls(&self) -> Vec<Control> {
        let mut c = twin_controls(&self.trajectories);
        c.extend(planted_controls([("published".to_string(), &self.planted)]));
        c.extend(self.samplers.iter().flat_map(SamplerRuns::controls));
        c
    }

    /// Whether `t` is a scope the verdict judges: on llama.cpp its own penalties sampler
    /// (`llama:N`); on another engine every scope but `all`, each that engine's own penalty over
    /// the tokens its examples pass. The others are reported comparisons.
    pub fn is_judged(&self, t: &Trajectory) -> bool {
        match self.engine.name {
            EngineName::Llama => matches!(t.scope, ScopeSpec::Llama(_)),
            _ => !t.scope.is_all(),
        }
    }

    /// On llama.cpp with no `llama:N` scope listed, nothing the verdict judges ran:
    /// `undecided`, the verdict word that claims nothing either way.
    pub fn measured(&self) -> Verdict {
        let judged: Vec<&Trajectory> = (self.trajectories.iter())
            .filter(|t| self.is_judged(t))
            .collect();
        if judged.is_empty() && self.engine.name == EngineName::Llama {
            return Verdict::Undecided;
        }
        measured(judged)
    }

    /// The scopes of llama.cpp's report that the oracle's penalty decoded on llama.cpp's
    /// logits: reported, not judged.
    fn reported(&self) -> Vec<&Trajectory> {
        (self.trajectories[1..].iter())
            .filter(|t| !self.is_judged(t))
            .collect()
    }

    /// Each scope's first divergence from `all` (or `same`).
    fn partings<'a>(scopes: impl IntoIterator<Item = &'a Trajectory>) -> String {
        let per: Vec<String> = (scopes.into_iter())
            .map(|t| match &t.divergence {
                None => format!("{} same", t.scope),
                Some(d) => {
                    let undecided = if d.decisive { "" } else { " (undecided)" };
                    format!("{} diverges at {}{undecided}", t.scope, d.step)
                }
            })
            .collect();
        per.join(", ")
    }

    /// Every scope's first divergence from `all` (or `same`) and where `all` stopped; on
    /// llama.cpp the scopes the verdict judges first, then those reported.
    pub fn evidence(&self) -> String {
        let judged = (self.trajectories[1..].iter()).filter(|t| self.is_judged(t));
        let scopes = if self.engine.name == EngineName::Llama {
            let own = Self::partings(judged);
            let own = if own.is_empty() {
                "no llama:N scope ran, so no verdict of its own".to_string()
            } else {
                own
            };
            let reported = Self::partings(self.reported());
            if reported.is_empty() {
                format!("llama.cpp's own sampler: {own}")
            } else {
                format!("llama.cpp's own sampler: {own}; reported, not judged (the oracle's penalty on llama.cpp's logits): {reported}")
            }
        } else {
            Self::partings(judged)
        };
        let mut out = format!(
            "{} {} prompt tokens: {scopes}; all stops at {}",
            self.model_label,
            self.prompt_ids.len(),
            self.all().stopped_at()
        );
        if let Some(checks) = self.engine_checks() {
            let parts: Vec<String> = (self.cross.iter())
                .map(|p| match p.parts_at {
                    None => format!("{} same", p.scope),
                    Some(x) => format!("{} parts at {x}", p.scope),
                })
                .collect();
            out += &format!("; {checks}; against llama.cpp: {}", parts.join(", "));
        }
        out
    }

    /// The header's subject: the finding, the verdict's name, the engine and its build.
    pub fn subject(&self) -> report::ReportId {
        report::ReportId::new(
            &crate::FINDING,
            NAME,
            self.engine.name.label(),
            self.engine.tag.clone(),
            self.engine.detail.clone(),
            report::Sources(self.engine.sources),
        )
    }

    /// Another engine: its own penalty against the oracle's, and its greedy choice against
    /// the first maximum, over every step of every scope.
    pub fn engine_checks(&self) -> Option<String> {
        if self.engine.name == EngineName::Llama {
            return None;
        }
        let sum = |f: fn(&StepChecks) -> usize| -> usize {
            self.trajectories.iter().map(|t| f(&t.checks)).sum()
        };
        let steps = sum(|c| c.engine_twin.steps);
        let differ = sum(|c| c.engine_twin.mismatching_steps);
        let greedy = sum(|c| c.greedy_mismatches);
        Some(format!(
            "{}'s penalty differs from the oracle's at {differ} of {steps} steps, its greedy choice from the first maximum at {greedy}",
            self.engine.name.label()
        ))
    }

    /// On llama.cpp, the note that the scopes decoded with the oracle's penalty are reported
    /// comparisons, with their partings.
    pub fn add_notes(&self, r: &mut Report) {
        let reported = self.reported();
        if self.engine.name != EngineName::Llama || reported.is_empty() {
            return;
        }
        let data: std::collections::BTreeMap<String, Option<usize>> = (reported.iter())
            .map(|t| (t.scope.to_string(), t.divergence.as_ref().map(|d| d.step)))
            .collect();
        r.add_note(
            format!("{NAME}-oracle-scopes"),
            format!(
                "{}: the oracle's penalty over these scopes on llama.cpp's logits, each decoded against all (first divergence, or same). They show what a scope does to greedy output, not what llama.cpp's sampler does, so the verdict rests on llama:N alone.",
                Self::partings(reported)
            ),
            serde_json::json!({ "diverges_at": data }),
        );
    }

    pub fn report(&self) -> Report {
        let mut r = Report::new(
            self.subject(),
            self.measured(),
            self.evidence(),
            self.controls(),
        );
        self.add_notes(&mut r);
        r.with_body(self).with_text(self.to_text())
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}, {} greedy, penalty {} once per distinct id, up to {} new tokens\nprompt ({} tokens through the chat template): {:?}\n",
            self.model_label,
            self.model_desc,
            self.config.theta,
            self.config.max_new,
            self.prompt_ids.len(),
            self.config.prompt
        );
        out.push_str("  scope        diverges at  stopped at  llama.cpp twin (steps differing)\n");
        for t in &self.trajectories {
            // On llama.cpp, which rows the verdict rests on (another engine's rest on all).
            let role = match (self.engine.name, t.scope.is_all(), self.is_judged(t)) {
                (EngineName::Llama, true, _) => "  (reference)",
                (EngineName::Llama, _, true) => "  (the verdict)",
                (EngineName::Llama, _, false) => "  (reported)",
                _ => "",
            };
            out.push_str(&format!(
                "  {:<12} {:>11}  {:>4} ({:<5})  {} of {}{role}\n",
                t.scope.to_string(),
                t.divergence
                    .as_ref()
                    .map_or("-".to_string(), |d| d.step.to_string()),
                t.stopped_at(),
                t.stop.as_str(),
                t.checks.twin.mismatching_steps,
                t.checks.twin.steps
            ));
        }
        for t in &self.trajectories[1..] {
            if let Some(d) = &t.divergence {
                out.push_str(&format!("  {} at {}\n", t.scope, d.describe()));
            }
        }
        if let Some(s) = &self.samplers {
            out.push_str("  planted penalties samplers in llama.cpp's penalties slot (prompt accepted, then llama.cpp's greedy), against all by the verdict's rule:\n");
            out.push_str(&s.to_text());
        }
        for (t, text) in self.trajectories.iter().zip(&self.texts) {
            out.push_str(&format!("  [{}] {:?}\n", t.scope, text));
        }
        out.push_str(&self.vector.to_text());
        if let Some(checks) = self.engine_checks() {
            out.push_str(&format!("{checks}\n"));
            out.push_str(&format!(
                "against llama.cpp on the same file and prompt ids (llama.cpp with the oracle's penalty, {} with its own):\n",
                self.engine.name.label()
            ));
            for p in &self.cross {
                out.push_str(&format!("  {}\n", p.describe(self.engine.name.label())));
            }
        }
        out
    }
}
