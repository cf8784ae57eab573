//! Every built-in sampler the audits use, described as data and checked before it is built.
//!
//! Parameters are validated here because llama.cpp does not validate them: a negative or
//! huge window becomes a huge allocation (a C++ exception that must not cross into Rust),
//! and an out-of-range token id in a bias reaches an assert.

use crate::sampler::Sampler;
use anyhow::{bail, Context, Result};
use llama_cpp_sys_2 as sys;
use oracle::TokenId;

/// Windows and `min_keep` values above this are refused: nothing the audits do needs more,
/// and llama.cpp would allocate for them up front.
pub const MAX_WINDOW: i32 = 1 << 20;

/// DRY's parameters (no sequence breakers: those need a model's vocabulary).
#[derive(Debug, Clone, PartialEq)]
pub struct DryParams {
    pub multiplier: f32,
    pub base: f32,
    pub allowed_length: i32,
    pub last_n: i32,
    /// Only the 0.1.154 API takes this (it resolves `last_n = -1`); ignored otherwise.
    pub n_ctx_train: i32,
}

/// A built-in llama.cpp sampler and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplerSpec {
    Greedy,
    Dist {
        seed: u32,
    },
    TopK {
        k: i32,
    },
    TopP {
        p: f32,
        min_keep: usize,
    },
    MinP {
        p: f32,
        min_keep: usize,
    },
    Typical {
        p: f32,
        min_keep: usize,
    },
    Temp {
        t: f32,
    },
    TempExt {
        t: f32,
        delta: f32,
        exponent: f32,
    },
    Xtc {
        p: f32,
        t: f32,
        min_keep: usize,
        seed: u32,
    },
    TopNSigma {
        n: f32,
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
    Penalties {
        n_vocab: i32,
        last_n: i32,
        repeat: f32,
        freq: f32,
        present: f32,
    },
    Dry(DryParams),
    AdaptiveP {
        target: f32,
        decay: f32,
        seed: u32,
    },
    LogitBias {
        n_vocab: i32,
        biases: Vec<(TokenId, f32)>,
    },
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
            | SamplerSpec::Penalties { n_vocab, .. }
            | SamplerSpec::LogitBias { n_vocab, .. } => Some(*n_vocab),
            _ => None,
        }
    }

    /// Checks the parameters against what llama.cpp can take without aborting or throwing.
    pub fn validate(&self) -> Result<()> {
        match self {
            SamplerSpec::Greedy | SamplerSpec::Dist { .. } | SamplerSpec::TopK { .. } => {}
            SamplerSpec::TopP { p, min_keep }
            | SamplerSpec::MinP { p, min_keep }
            | SamplerSpec::Typical { p, min_keep } => {
                finite("p", *p)?;
                keep(*min_keep)?;
            }
            SamplerSpec::Temp { t } => finite("temperature", *t)?,
            SamplerSpec::TempExt { t, delta, exponent } => {
                finite("temperature", *t)?;
                finite("delta", *delta)?;
                finite("exponent", *exponent)?;
            }
            SamplerSpec::Xtc { p, t, min_keep, .. } => {
                finite("xtc probability", *p)?;
                finite("xtc threshold", *t)?;
                keep(*min_keep)?;
            }
            SamplerSpec::TopNSigma { n } => finite("n", *n)?,
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
            SamplerSpec::Penalties {
                n_vocab,
                last_n,
                repeat,
                freq,
                present,
            } => {
                vocab(*n_vocab)?;
                window("penalty_last_n", *last_n)?;
                finite("penalty_repeat", *repeat)?;
                if *repeat <= 0.0 {
                    bail!("penalty_repeat must be > 0, got {repeat}");
                }
                finite("penalty_freq", *freq)?;
                finite("penalty_present", *present)?;
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
            SamplerSpec::LogitBias { n_vocab, biases } => {
                vocab(*n_vocab)?;
                for (id, bias) in biases {
                    if id.0 < 0 || id.0 >= *n_vocab {
                        bail!("logit bias id {id} is outside the vocabulary of {n_vocab}");
                    }
                    finite("logit bias", *bias)?;
                }
            }
        }
        Ok(())
    }

    /// Validates, then asks llama.cpp for the sampler.
    pub fn build(&self) -> Result<Sampler> {
        self.validate()
            .with_context(|| format!("invalid parameters for {self:?}"))?;
        // SAFETY: every init function below takes plain values (or a pointer to a buffer
        // that outlives the call) and returns an owned sampler or NULL; the parameters
        // were checked above against the inputs that make llama.cpp abort or throw.
        let raw = unsafe {
            match self {
                SamplerSpec::Greedy => sys::llama_sampler_init_greedy(),
                SamplerSpec::Dist { seed } => sys::llama_sampler_init_dist(*seed),
                SamplerSpec::TopK { k } => sys::llama_sampler_init_top_k(*k),
                SamplerSpec::TopP { p, min_keep } => sys::llama_sampler_init_top_p(*p, *min_keep),
                SamplerSpec::MinP { p, min_keep } => sys::llama_sampler_init_min_p(*p, *min_keep),
                SamplerSpec::Typical { p, min_keep } => {
                    sys::llama_sampler_init_typical(*p, *min_keep)
                }
                SamplerSpec::Temp { t } => sys::llama_sampler_init_temp(*t),
                SamplerSpec::TempExt { t, delta, exponent } => {
                    sys::llama_sampler_init_temp_ext(*t, *delta, *exponent)
                }
                SamplerSpec::Xtc {
                    p,
                    t,
                    min_keep,
                    seed,
                } => sys::llama_sampler_init_xtc(*p, *t, *min_keep, *seed),
                SamplerSpec::TopNSigma { n } => sys::llama_sampler_init_top_n_sigma(*n),
                SamplerSpec::Mirostat {
                    n_vocab,
                    seed,
                    tau,
                    eta,
                    m,
                } => sys::llama_sampler_init_mirostat(*n_vocab, *seed, *tau, *eta, *m),
                SamplerSpec::MirostatV2 { seed, tau, eta } => {
                    sys::llama_sampler_init_mirostat_v2(*seed, *tau, *eta)
                }
                SamplerSpec::Penalties {
                    n_vocab,
                    last_n,
                    repeat,
                    freq,
                    present,
                } => init_penalties(*n_vocab, *last_n, *repeat, *freq, *present),
                SamplerSpec::Dry(d) => init_dry(d),
                SamplerSpec::AdaptiveP {
                    target,
                    decay,
                    seed,
                } => sys::llama_sampler_init_adaptive_p(*target, *decay, *seed),
                SamplerSpec::LogitBias { n_vocab, biases } => {
                    let raw: Vec<sys::llama_logit_bias> = biases
                        .iter()
                        .map(|(id, bias)| sys::llama_logit_bias {
                            token: id.0,
                            bias: *bias,
                        })
                        .collect();
                    sys::llama_sampler_init_logit_bias(*n_vocab, raw.len() as i32, raw.as_ptr())
                }
            }
        };
        // SAFETY: `raw` was just returned by an init function and is owned by nobody else.
        unsafe { Sampler::from_raw(raw, self.n_vocab()) }
            .with_context(|| format!("llama.cpp returned no sampler for {self:?}"))
    }
}

#[cfg(not(feature = "legacy-api"))]
unsafe fn init_penalties(
    n_vocab: i32,
    last_n: i32,
    repeat: f32,
    freq: f32,
    present: f32,
) -> *mut sys::llama_sampler {
    sys::llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present)
}

#[cfg(feature = "legacy-api")]
unsafe fn init_penalties(
    _n_vocab: i32,
    last_n: i32,
    repeat: f32,
    freq: f32,
    present: f32,
) -> *mut sys::llama_sampler {
    sys::llama_sampler_init_penalties(last_n, repeat, freq, present)
}

// DRY is built without a vocabulary: with no sequence breakers llama.cpp never reads it.
#[cfg(not(feature = "legacy-api"))]
unsafe fn init_dry(d: &DryParams) -> *mut sys::llama_sampler {
    sys::llama_sampler_init_dry(
        std::ptr::null(),
        d.multiplier,
        d.base,
        d.allowed_length,
        d.last_n,
        std::ptr::null_mut(),
        0,
    )
}

#[cfg(feature = "legacy-api")]
unsafe fn init_dry(d: &DryParams) -> *mut sys::llama_sampler {
    sys::llama_sampler_init_dry(
        std::ptr::null(),
        d.n_ctx_train,
        d.multiplier,
        d.base,
        d.allowed_length,
        d.last_n,
        std::ptr::null_mut(),
        0,
    )
}
