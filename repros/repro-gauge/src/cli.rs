//! Command-line parsing and the three modes: one gauge run (default), `--audit` (the design
//! and its verdicts) and `--tables` (the reported-only tables).

use crate::audit;
use crate::free_running::Design;
use crate::implementation::Implementation;
use anyhow::{ensure, Context as _, Result};
use clap::Parser;
use engine::EngineName;
use harness::LoadedModel;
use oracle::gauge::Operator;
use std::ffi::OsString;
use std::path::PathBuf;
use subject::{BuildInfo, Weights};

/// F4: does the repetition penalty depend on where the logits' zero point sits?
#[derive(Parser, Debug)]
#[command(name = "repro-gauge")]
pub struct Args {
    #[command(flatten)]
    pub model_choice: cmdline::ModelChoice,
    /// One prompt per line (blank lines and lines starting with '#' skipped); each goes
    /// through the model's chat template. At most 1024 prompts (after --prompts). Default: the
    /// 16 prompts of prompts/a1.txt.
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// One prompt on the command line instead of a file (through the chat template as above).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Penalty strengths, comma-separated (each in (0, 100]); 1 (the no-op leg) is always
    /// added. Thetas x shifts, after both additions, at most 85 (3 operators make at most 256
    /// runs per prompt).
    #[arg(long, default_value = "1.0,1.15,1.3", allow_hyphen_values = true)]
    pub theta: String,
    /// Shifts added to every logit, comma-separated (each 0 or 1e-3 <= |c| <= 1000); 0 (the
    /// reference) is always added. Thetas x shifts at most 85, as for --theta.
    #[arg(long, default_value = "-5,-3,-1,0,1,3,5", allow_hyphen_values = true)]
    pub shifts: String,
    /// Maximum number of generated tokens per run, 1 to 512 (default 200; a prompt plus these
    /// must fit in 512 positions; runs x --max-new at most 65536). Not with --tables.
    #[arg(long, allow_negative_numbers = true)]
    pub max_new: Option<i64>,
    #[command(flatten)]
    pub decoding: cmdline::Decoding,
    #[command(flatten)]
    pub out: cmdline::Output,
    /// The design on SmolLM2 and Gemma3 and its verdicts; writes
    /// results/gauge.<build>.{json,txt}, results/gauge-ledger.<build>.{json,txt} and the plots.
    #[arg(long)]
    pub audit: bool,
    /// The reported-only tables (no verdict rests on them): teacher forcing on each model, the
    /// JSON corpus free-running on the first model and along grammar references on every model;
    /// writes results/tables/gauge.<build>.{json,txt}, then the JSON charts; exits 1 (without
    /// the charts) when one of the tables' own checks fails.
    #[arg(long, conflicts_with = "audit")]
    pub tables: bool,
    /// With --audit or --tables: the models, comma-separated, at most 4 (default:
    /// smollm2,gemma3).
    #[arg(long)]
    pub models: Option<String>,
    /// With --audit: only the first N prompts of the prompt file, 1 to 1024.
    #[arg(long, allow_negative_numbers = true)]
    pub prompts: Option<i64>,
    /// With --tables: free-running answers for only the first N prompts of the JSON corpus, 1
    /// to 1024 (default: all).
    #[arg(long, allow_negative_numbers = true)]
    pub json_prompts: Option<i64>,
    /// With --tables: structural positions along grammar references for only the first N
    /// prompt/schema pairs of the JSON corpus, on every model, 1 to 1024 (default: all).
    #[arg(long, allow_negative_numbers = true)]
    pub structural_pairs: Option<i64>,
    /// Teacher-forced positions per model, 1 to 200000 (default 2048; with --tables 40960).
    /// --audit runs no teacher forcing.
    #[arg(long, allow_negative_numbers = true)]
    pub positions: Option<i64>,
    /// The teacher-forced text (default: the file `make models` builds in models-cache/).
    #[arg(long)]
    pub teacher_text: Option<PathBuf>,
    /// Whose penalty fills the sign slot: llama (llama.cpp's penalties stage) or candle (its
    /// `apply_repeat_penalty` through the engine seam, over the same window; default build
    /// only). The logits are llama.cpp's decoding in both. With candle, --audit runs the
    /// design and the zero-boundary row only; --tables measures llama.cpp's own stage only.
    #[arg(long, default_value = "llama")]
    pub engine: String,
}

/// New tokens per run when --max-new is not given.
pub const DEFAULT_MAX_NEW: i64 = 200;

/// At most this many runs share one batch (llama.cpp's LLAMA_MAX_SEQ).
pub const MAX_RUNS: usize = 256;
/// Runs x `--max-new` per prompt, the worst-case KV cells of one batch.
pub const MAX_CELLS: usize = 65_536;

fn numbers(flag: &str, text: &str) -> Result<Vec<f32>> {
    let v = text
        .split(',')
        .map(|p| {
            let x: f32 = p
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("{flag}: '{}' is not a number", p.trim()))?;
            ensure!(x.is_finite(), "{flag}: '{}' is not finite", p.trim());
            Ok(x)
        })
        .collect::<Result<Vec<_>>>()?;
    ensure!(!v.is_empty(), "{flag} is empty");
    Ok(v)
}

/// `v` with `must` added, sorted, without repeats.
fn with(mut v: Vec<f32>, must: f32) -> Vec<f32> {
    v.push(must);
    v.sort_by(f32::total_cmp);
    v.dedup();
    v
}

pub fn design(args: &Args) -> Result<Design> {
    let thetas = numbers("--theta", &args.theta)?;
    for t in &thetas {
        ensure!(
            *t > 0.0 && *t <= 100.0,
            "--theta must be in (0, 100], got {t}"
        );
    }
    let shifts = numbers("--shifts", &args.shifts)?;
    for c in &shifts {
        // Larger shifts would leave f32 logits without resolution; tiny non-zero ones are
        // below it. Both would test rounding, not the operators.
        ensure!(
            c.abs() <= 1000.0 && (*c == 0.0 || c.abs() >= 1e-3),
            "--shifts: {c} is outside 1e-3 <= |c| <= 1000 (or 0)"
        );
    }
    ensure!(
        !(args.tables && args.max_new.is_some()),
        "--max-new does not apply with --tables (its JSON answers take up to {} tokens)",
        crate::tables::JSON_MAX_NEW
    );
    let max_new = args.max_new.unwrap_or(DEFAULT_MAX_NEW);
    ensure!(
        (1..=MAX_SEQUENCE as i64).contains(&max_new),
        "--max-new must be in 1..={MAX_SEQUENCE}, got {max_new}"
    );
    let threads = args.decoding.threads()?;
    let (thetas, shifts) = (with(thetas, 1.0), with(shifts, 0.0));
    let runs = thetas.len() * shifts.len() * Operator::ALL.len();
    ensure!(
        runs <= MAX_RUNS,
        "{} thetas x {} shifts x 3 operators = {runs} runs per prompt; at most {MAX_RUNS} share a batch",
        thetas.len(),
        shifts.len()
    );
    // Every run may hold its own suffix of the shared cache.
    ensure!(
        runs * max_new as usize <= MAX_CELLS,
        "{runs} runs x --max-new {max_new} exceed {MAX_CELLS} cache cells per prompt"
    );
    let mut design = Design::standard(thetas, shifts, max_new as usize, threads);
    let engine = EngineName::parse(&args.engine).context("--engine")?;
    ensure!(
        !(args.tables && engine != EngineName::Llama),
        "--tables measures llama.cpp's own penalties stage; --engine {} does not apply",
        args.engine
    );
    if engine != EngineName::Llama {
        harness::engines::get(engine)?;
        for (op, imp) in &mut design.slots {
            if *op == Operator::Sign {
                *imp = Implementation::EngineSign(engine);
            }
        }
    }
    Ok(design)
}

/// Most models `--models` names (two are known; the rest would be paths).
pub const MAX_MODELS: usize = 4;

/// The models to run: `--models` with `--audit` or `--tables` (default: every known model),
/// else `--model`.
pub fn model_names(args: &Args) -> Result<Vec<String>> {
    match (&args.models, args.audit || args.tables) {
        (Some(_), false) => anyhow::bail!("--models only applies with --audit or --tables"),
        (Some(list), true) => {
            let v: Vec<String> = list
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            ensure!(!v.is_empty(), "--models is empty");
            ensure!(
                v.len() <= MAX_MODELS,
                "--models names {} models; at most {MAX_MODELS}",
                v.len()
            );
            Ok(v)
        }
        (None, true) => Ok(models::KNOWN.iter().map(|k| k.name.to_string()).collect()),
        (None, false) => Ok(vec![args.model_choice.model.clone()]),
    }
}

/// Prompt tokens plus `--max-new` per sequence. Gemma3 attends within a sliding window of 512
/// positions; beyond it llama.cpp recycles cells per sequence, which the fork loop does not
/// trust (see `subject::MultiContext`).
pub const MAX_SEQUENCE: usize = 512;

fn check_lengths(m: &LoadedModel, prompts: &[String], design: &Design) -> Result<()> {
    for p in prompts {
        let n = m.chat_ids(p)?.len();
        ensure!(
            n + design.max_new <= MAX_SEQUENCE,
            "a prompt of {n} tokens on {} plus --max-new {} exceeds {MAX_SEQUENCE} positions",
            m.choice.label,
            design.max_new
        );
    }
    Ok(())
}

/// Teacher-forced positions per model when --positions is not given.
pub const POSITIONS: usize = 2048;
pub const TABLES_POSITIONS: usize = 40_960;
pub const MAX_POSITIONS: i64 = 200_000;

pub fn positions(args: &Args) -> Result<usize> {
    match args.positions {
        Some(_) if args.audit => {
            anyhow::bail!("--positions does not apply with --audit, which runs no teacher forcing (see --tables)")
        }
        Some(n) => {
            ensure!(
                (1..=MAX_POSITIONS).contains(&n),
                "--positions must be in 1..={MAX_POSITIONS}, got {n}"
            );
            Ok(n as usize)
        }
        None if args.tables => Ok(TABLES_POSITIONS),
        None => Ok(POSITIONS),
    }
}

pub fn teacher_text(args: &Args) -> Result<String> {
    let p = args
        .teacher_text
        .clone()
        .unwrap_or_else(models::teacher_text);
    let t = std::fs::read_to_string(&p).with_context(|| {
        format!(
            "cannot read the teacher text {} (run `make models`)",
            p.display()
        )
    })?;
    ensure!(
        !t.trim().is_empty(),
        "the teacher text {} is empty",
        p.display()
    );
    Ok(t)
}

/// Most prompts a run takes, and the largest `--prompts`, `--json-prompts` and
/// `--structural-pairs`.
pub const MAX_PROMPTS: usize = 1024;

/// The prompts: the file's (or the default set), at most `--prompts` of them.
pub fn prompts(args: &Args) -> Result<Vec<String>> {
    let mut v = match (&args.prompt, &args.prompt_file) {
        (Some(one), _) => {
            ensure!(!one.trim().is_empty(), "--prompt is empty");
            vec![one.clone()]
        }
        (None, Some(p)) => audit::parse_prompts(
            &std::fs::read_to_string(p)
                .with_context(|| format!("--prompt-file: cannot read {}", p.display()))?,
        ),
        (None, None) => audit::parse_prompts(audit::DEFAULT_PROMPTS),
    };
    ensure!(!v.is_empty(), "--prompt-file holds no prompt");
    ensure!(
        !(args.tables && (args.prompt.is_some() || args.prompt_file.is_some())),
        "--tables runs the JSON corpus and the teacher text, not prompts; --prompt and --prompt-file do not apply"
    );
    let count = |flag: &str, n: i64, with: bool, mode: &str| -> Result<usize> {
        ensure!(with, "{flag} only applies with {mode}");
        ensure!(
            (1..=MAX_PROMPTS as i64).contains(&n),
            "{flag} must be in 1..={MAX_PROMPTS}, got {n}"
        );
        Ok(n as usize)
    };
    if let Some(n) = args.prompts {
        v.truncate(count("--prompts", n, args.audit, "--audit")?);
    }
    ensure!(
        v.len() <= MAX_PROMPTS,
        "--prompt-file holds {} prompts; at most {MAX_PROMPTS} (or cut them with --prompts)",
        v.len()
    );
    if let Some(n) = args.json_prompts {
        count("--json-prompts", n, args.tables, "--tables")?;
    }
    if let Some(n) = args.structural_pairs {
        count("--structural-pairs", n, args.tables, "--tables")?;
    }
    Ok(v)
}

/// What the command line asks for, checked: the flags, the design, the prompts, the
/// teacher-forced text and its positions, and the model files.
pub struct Config {
    pub args: Args,
    pub design: Design,
    pub prompts: Vec<String>,
    pub positions: usize,
    /// The teacher text, when the run forces it (not in `--audit`).
    pub text: Option<String>,
    pub models: Vec<models::ModelChoice>,
}

/// Everything that can refuse the command line before any work (see `cmdline::run_checked`):
/// the build, the flags, the files they name, and the models (a named model's size and
/// sha256; a path is loaded once in a contained child, `harness::preflight`). Whether the
/// prompts and the teacher-forced text fit a model's positions is known only when the run has
/// loaded the models.
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(BuildInfo::verified())?;
    let design = cmdline::refuse(design(&args))?;
    let prompts = cmdline::refuse(prompts(&args))?;
    let positions = cmdline::refuse(positions(&args))?;
    if args.audit && args.teacher_text.is_some() {
        return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
            "--teacher-text does not apply with --audit, which runs no teacher forcing (see --tables)"
        )));
    }
    let text = if args.audit {
        None
    } else {
        Some(cmdline::refuse(teacher_text(&args))?)
    };
    let resolve = |names: Vec<String>| names.iter().map(|n| models::resolve(n)).collect();
    let models: Vec<_> = cmdline::refuse(model_names(&args).and_then(resolve))?;
    for m in &models {
        cmdline::refuse(harness::preflight(m, Weights::AsStored))?;
    }
    Ok(Config {
        args,
        design,
        prompts,
        positions,
        text,
        models,
    })
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| {
        let load = |m| LoadedModel::load_with(m, Weights::AsStored);
        let loaded: Vec<_> = cmdline::refuse(c.models.into_iter().map(load).collect())?;
        for m in &loaded {
            if let Some(text) = &c.text {
                cmdline::refuse(crate::teacher_forced::check_text(m, text, c.positions))?;
            }
            if !c.args.tables {
                cmdline::refuse(check_lengths(m, &c.prompts, &c.design))?;
            }
        }
        let teacher = c.text.as_deref().map(|t| (t, c.positions));
        cmdline::fail(execute(&c.args, &c.design, &c.prompts, teacher, &loaded))
    })
}

fn execute(
    args: &Args,
    design: &Design,
    prompts: &[String],
    teacher: Option<(&str, usize)>,
    loaded: &[LoadedModel],
) -> Result<String> {
    if args.tables {
        let all = |n: Option<i64>| n.map_or(usize::MAX, |n| n as usize);
        let counts = crate::tables::Counts {
            json_prompts: all(args.json_prompts),
            structural_pairs: all(args.structural_pairs),
        };
        let teacher = teacher.context("the tables need the teacher text")?;
        let t = crate::tables::Tables::run(loaded, design, teacher, counts)?;
        t.write(&args.out.results)?;
        t.failed_checks()?;
        return Ok(if args.out.json {
            serde_json::to_string_pretty(&t.to_json()?)? + "\n"
        } else {
            t.to_text()
        });
    }
    // Another engine in the sign slot: the design only (teacher forcing measures llama.cpp's
    // own stage).
    let llama = design.engine() == EngineName::Llama;
    let a = audit::run(loaded, design, prompts, teacher.filter(|_| llama))?;
    if args.audit {
        a.write(&args.out.results)?;
    }
    Ok(a.report()?.render(args.out.json))
}
