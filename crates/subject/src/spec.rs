//! Every built-in sampler the audits use, described as data and checked before it is built.
//!
//! Parameters are validated here because llama.cpp does not validate them: a negative or
//! huge window becomes a huge allocation (a C++ exception that must not cross into Rust),
//! and an out-of-range token id in a bias reaches an assert.

use crate::compat as sys;
use crate::sampler::Sampler;
use anyhow::{bail, Context, Result};
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;

/// Windows and `min_keep` values above this are refused (the oracle's limit, one for all).
pub use oracle::stage::MAX_WINDOW;

/// DRY's parameters (no sequence breakers: those need a model's vocabulary).
#[derive(Debug, Clone, PartialEq)]
pub struct DryParams {
    pub multiplier: f32,
    pub base: f32,
    pub allowed_length: i32,
    pub last_n: i32,
    /// Only the releases whose DRY takes a training context use this (b4524 to b10200, where it
    /// resolves `last_n = -1`); ignored otherwise.
    pub n_ctx_train: i32,
}

/// A built-in llama.cpp sampler and its parameters.
///
/// The deterministic stages are the oracle's own description ([`Stage`]), so a stage is
/// listed once in the workspace and converted into a C call in exactly one place
/// ([`SamplerSpec::build`]). The variants beside it are samplers the oracle does not compose.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplerSpec {
    /// A stage the oracle models. `n_vocab` is told to the samplers that take a vocabulary
    /// size (penalties, logit_bias) and `seed` to the one that may draw (xtc, when its
    /// probability is strictly between 0 and 1); the others ignore them (dist carries its
    /// own seed).
    Stage {
        stage: Stage,
        n_vocab: i32,
        seed: u32,
    },
    /// The same sampler as `Stage::Dist`, built by the same call.
    Dist {
        seed: u32,
    },
    Mirostat {
        n_vocab: i32,
        seed: u32,
        tau: f32,
        eta: f32,
        m: i32,
    },
    MirostatV2 {
        seed: u32,
        tau: f32,
        eta: f32,
    },
    Dry(DryParams),
    AdaptiveP {
        target: f32,
        decay: f32,
        seed: u32,
    },
}

/// A stage that takes no vocabulary size (for penalties and logit_bias use
/// [`SamplerSpec::Stage`] with the vocabulary's size).
impl From<Stage> for SamplerSpec {
    fn from(stage: Stage) -> SamplerSpec {
        SamplerSpec::Stage {
            stage,
            n_vocab: 0,
            seed: 0,
        }
    }
}

fn finite(name: &str, x: f32) -> Result<()> {
    if !x.is_finite() {
        bail!("{name} must be finite, got {x}");
    }
    Ok(())
}

fn window(name: &str, n: i32) -> Result<()> {
    if n < 0 {
        bail!("{name} must be >= 0, got {n}");
    }
    if n > MAX_WINDOW {
        bail!("{name} must be <= {MAX_WINDOW}, got {n}");
    }
    Ok(())
}

fn vocab(n: i32) -> Result<()> {
    if n <= 0 {
        bail!("n_vocab must be positive, got {n}");
    }
    Ok(())
}

fn keep(min_keep: usize) -> Result<()> {
    if min_keep > MAX_WINDOW as usize {
        bail!("min_keep must be <= {MAX_WINDOW}, got {min_keep}");
    }
    Ok(())
}

impl SamplerSpec {
    /// The largest vocabulary this sampler is told about, if it takes one: ids at or above it
    /// are refused by [`Sampler::accept`] and [`Sampler::apply`].
    pub fn n_vocab(&self) -> Option<i32> {
        match self {
            SamplerSpec::Mirostat { n_vocab, .. }
            | SamplerSpec::Stage {
                stage: Stage::Penalties { .. } | Stage::LogitBias { .. },
                n_vocab,
                ..
            } => Some(*n_vocab),
            _ => None,
        }
    }

    /// llama.cpp's penalties sampler for a vocabulary of `n_vocab` ids.
    pub fn penalties(n_vocab: i32, last_n: WindowLen, params: PenaltyParams) -> SamplerSpec {
        SamplerSpec::from(Stage::Penalties { last_n, params }).with_vocab(n_vocab)
    }

    /// The same stage told a vocabulary of `n_vocab` ids (no effect on other variants).
    pub fn with_vocab(mut self, n: i32) -> SamplerSpec {
        if let SamplerSpec::Stage { n_vocab, .. } = &mut self {
            *n_vocab = n;
        }
        self
    }

    /// The same stage with its draws seeded by `s` (no effect on other variants).
    pub fn with_seed(mut self, s: u32) -> SamplerSpec {
        if let SamplerSpec::Stage { seed, .. } = &mut self {
            *seed = s;
        }
        self
    }

    /// Checks the parameters against what llama.cpp can take without aborting or throwing.
    pub fn validate(&self) -> Result<()> {
        match self {
            SamplerSpec::Stage { stage, n_vocab, .. } => validate_stage(stage, *n_vocab)?,
            SamplerSpec::Dist { .. } => {}
            SamplerSpec::Mirostat {
                n_vocab,
                tau,
                eta,
                m,
                ..
            } => {
                vocab(*n_vocab)?;
                finite("tau", *tau)?;
                finite("eta", *eta)?;
                if *m < 1 || *m > *n_vocab {
                    bail!("mirostat m must be in 1..={n_vocab}, got {m}");
                }
            }
            SamplerSpec::MirostatV2 { tau, eta, .. } => {
                finite("tau", *tau)?;
                finite("eta", *eta)?;
            }
            SamplerSpec::Dry(d) => {
                finite("dry multiplier", d.multiplier)?;
                finite("dry base", d.base)?;
                window("dry allowed_length", d.allowed_length)?;
                window("dry penalty_last_n", d.last_n)?;
                window("n_ctx_train", d.n_ctx_train)?;
            }
            SamplerSpec::AdaptiveP { target, decay, .. } => {
                finite("target", *target)?;
                if !(0.0..=0.99).contains(decay) {
                    bail!("adaptive-p decay must be in 0..=0.99, got {decay}");
                }
            }
        }
        Ok(())
    }

    /// Why the linked release cannot build this sampler, if it cannot: its header does not
    /// declare the init function, or declares one that needs a model this wrapper does not pass
    /// (DRY before b4524 takes a `llama_model` and reads it even without sequence breakers).
    pub fn not_offered(&self) -> Option<NotOffered> {
        let missing = match self {
            SamplerSpec::Stage {
                stage: Stage::TopNSigma { .. },
                ..
            } => (!cfg!(llama_fn = "llama_sampler_init_top_n_sigma")).then_some("top_n_sigma"),
            SamplerSpec::AdaptiveP { .. } => {
                (!cfg!(llama_fn = "llama_sampler_init_adaptive_p")).then_some("adaptive_p")
            }
            SamplerSpec::Dry(_) => (!cfg!(llama_param0 = "llama_sampler_init_dry:llama_vocab*"))
                .then_some("dry without a model"),
            _ => None,
        };
        missing.map(|what| NotOffered { what })
    }

    /// Validates, then asks llama.cpp for the sampler. A sampler the linked release lacks is a
    /// [`NotOffered`] error (downcast it to tell it from a failure).
    pub fn build(&self) -> Result<Sampler> {
        if let Some(n) = self.not_offered() {
            return Err(n.into());
        }
        self.validate()
            .with_context(|| format!("invalid parameters for {self:?}"))?;
        // SAFETY: every init function below takes plain values (or a pointer to a buffer
        // that outlives the call) and returns an owned sampler or NULL; the parameters
        // were checked above against the inputs that make llama.cpp abort or throw.
        let raw = unsafe {
            match self {
                SamplerSpec::Stage {
                    stage,
                    n_vocab,
                    seed,
                } => init_stage(stage, *n_vocab, *seed)?,
                SamplerSpec::Dist { seed } => init_stage(&Stage::Dist { seed: *seed }, 0, 0)?,
                SamplerSpec::Mirostat {
                    n_vocab,
                    seed,
                    tau,
                    eta,
                    m,
                } => ffi!(sys::llama_sampler_init_mirostat(
                    *n_vocab, *seed, *tau, *eta, *m
                )),
                SamplerSpec::MirostatV2 { seed, tau, eta } => {
                    ffi!(sys::llama_sampler_init_mirostat_v2(*seed, *tau, *eta))
                }
                SamplerSpec::Dry(d) => init_dry(d),
                #[cfg(llama_fn = "llama_sampler_init_adaptive_p")]
                SamplerSpec::AdaptiveP {
                    target,
                    decay,
                    seed,
                } => ffi!(sys::llama_sampler_init_adaptive_p(*target, *decay, *seed)),
                #[cfg(not(llama_fn = "llama_sampler_init_adaptive_p"))]
                SamplerSpec::AdaptiveP { .. } => unreachable!("refused by not_offered"),
            }
        };
        // SAFETY: `raw` was just returned by an init function and is owned by nobody else.
        unsafe { Sampler::from_raw(raw, self.n_vocab()) }
            .with_context(|| format!("llama.cpp returned no sampler for {self:?}"))
    }
}

/// A sampler the linked llama.cpp does not offer: reported as `not offered` on that build,
/// never as a failure of the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotOffered {
    pub what: &'static str,
}

impl std::fmt::Display for NotOffered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not offered by this build's C API", self.what)
    }
}

impl std::error::Error for NotOffered {}

/// `r` with a sampler the build does not offer (`Ok(Err(_))`) split from every other failure
/// (`Err`), told apart by the error's type: an audit records the first and goes on, while any
/// other error still ends the run.
pub fn offered<T>(r: Result<T>) -> Result<std::result::Result<T, NotOffered>> {
    match r {
        Ok(x) => Ok(Ok(x)),
        Err(e) => match e.downcast_ref::<NotOffered>() {
            Some(n) => Ok(Err(n.clone())),
            None => Err(e),
        },
    }
}

fn validate_stage(stage: &Stage, n_vocab: i32) -> Result<()> {
    match stage {
        Stage::Greedy | Stage::TopK { .. } | Stage::Dist { .. } => {}
        Stage::TopP { p, min_keep }
        | Stage::MinP { p, min_keep }
        | Stage::Typical { p, min_keep } => {
            finite("p", *p)?;
            keep(*min_keep)?;
        }
        Stage::Temp { t } => finite("temperature", *t)?,
        Stage::TempExt { t, delta, exponent } => {
            finite("temperature", *t)?;
            finite("delta", *delta)?;
            finite("exponent", *exponent)?;
        }
        Stage::Xtc {
            probability,
            threshold,
            min_keep,
        } => {
            finite("xtc probability", *probability)?;
            finite("xtc threshold", *threshold)?;
            keep(*min_keep)?;
        }
        Stage::TopNSigma { n } => finite("n", *n)?,
        Stage::Penalties { last_n, params } => {
            vocab(n_vocab)?;
            if last_n.0 > MAX_WINDOW as usize {
                bail!("penalty_last_n must be <= {MAX_WINDOW}, got {}", last_n.0);
            }
            finite("penalty_repeat", params.repeat)?;
            if params.repeat <= 0.0 {
                bail!("penalty_repeat must be > 0, got {}", params.repeat);
            }
            finite("penalty_freq", params.freq)?;
            finite("penalty_present", params.present)?;
        }
        Stage::LogitBias { biases } => {
            vocab(n_vocab)?;
            for (id, bias) in biases {
                if id.0 < 0 || id.0 >= n_vocab {
                    bail!("logit bias id {id} is outside the vocabulary of {n_vocab}");
                }
                finite("logit bias", *bias)?;
            }
        }
    }
    Ok(())
}

/// The one place a [`Stage`] becomes a C call.
///
/// # Safety
/// `stage` must have passed [`validate_stage`] with `n_vocab`.
unsafe fn init_stage(stage: &Stage, n_vocab: i32, seed: u32) -> Result<*mut sys::llama_sampler> {
    // SAFETY: every init function takes plain values (logit_bias: a pointer to a buffer
    // that outlives the call) and returns an owned sampler or NULL; the caller checked the
    // parameters against the inputs that make llama.cpp abort or throw.
    Ok(unsafe {
        match stage {
            Stage::Greedy => ffi!(sys::llama_sampler_init_greedy()),
            Stage::TopK { k } => ffi!(sys::llama_sampler_init_top_k(*k)),
            Stage::TopP { p, min_keep } => ffi!(sys::llama_sampler_init_top_p(*p, *min_keep)),
            Stage::MinP { p, min_keep } => ffi!(sys::llama_sampler_init_min_p(*p, *min_keep)),
            Stage::Typical { p, min_keep } => ffi!(sys::llama_sampler_init_typical(*p, *min_keep)),
            Stage::Temp { t } => ffi!(sys::llama_sampler_init_temp(*t)),
            Stage::TempExt { t, delta, exponent } => {
                ffi!(sys::llama_sampler_init_temp_ext(*t, *delta, *exponent))
            }
            Stage::Xtc {
                probability,
                threshold,
                min_keep,
            } => ffi!(sys::llama_sampler_init_xtc(
                *probability,
                *threshold,
                *min_keep,
                seed
            )),
            #[cfg(llama_fn = "llama_sampler_init_top_n_sigma")]
            Stage::TopNSigma { n } => ffi!(sys::llama_sampler_init_top_n_sigma(*n)),
            #[cfg(not(llama_fn = "llama_sampler_init_top_n_sigma"))]
            Stage::TopNSigma { .. } => unreachable!("refused by not_offered"),
            Stage::Penalties { last_n, params } => {
                let (n, r, f, p) = (last_n.0 as i32, params.repeat, params.freq, params.present);
                ffi!(sys::penalties(n_vocab, n, r, f, p))
            }
            Stage::LogitBias { biases } => {
                let raw: Vec<sys::llama_logit_bias> = biases
                    .iter()
                    .map(|(id, bias)| sys::llama_logit_bias {
                        token: id.0,
                        bias: *bias,
                    })
                    .collect();
                ffi!(sys::llama_sampler_init_logit_bias(
                    n_vocab,
                    raw.len() as i32,
                    raw.as_ptr()
                ))
            }
            Stage::Dist { seed } => ffi!(sys::llama_sampler_init_dist(*seed)),
        }
    })
}

// DRY is built without a vocabulary: with no sequence breakers llama.cpp never reads it.
// Releases b4524 to b10200 also take the training context (it resolves `last_n = -1`).
// One `return` per signature, each under its own cfg: only one survives in any build.
#[allow(clippy::needless_return)]
fn init_dry(d: &DryParams) -> *mut sys::llama_sampler {
    let (vocab, breakers): (*const sys::llama_vocab, *mut *const std::os::raw::c_char) =
        (std::ptr::null(), std::ptr::null_mut());
    let (m, b, len, n) = (d.multiplier, d.base, d.allowed_length, d.last_n);
    // SAFETY (both calls): no vocabulary and no breakers (NULL, 0): plain values in, an owned
    // sampler or NULL out.
    #[cfg(all(
        llama_param0 = "llama_sampler_init_dry:llama_vocab*",
        llama_arity = "llama_sampler_init_dry:7"
    ))]
    return unsafe {
        ffi!(sys::llama_sampler_init_dry(
            vocab, m, b, len, n, breakers, 0
        ))
    };
    #[cfg(llama_arity = "llama_sampler_init_dry:8")]
    return unsafe {
        ffi!(sys::llama_sampler_init_dry(
            vocab,
            d.n_ctx_train,
            m,
            b,
            len,
            n,
            breakers,
            0
        ))
    };
    // Before b4524 DRY takes a model and reads it: `not_offered` refuses it first.
    #[cfg(not(llama_param0 = "llama_sampler_init_dry:llama_vocab*"))]
    {
        let _ = (vocab, breakers, m, b, len, n, d);
        unreachable!("refused by not_offered")
    }
}
