//! Teacher-forced flips at scale, with an exact predictor and the model's natural gauge.
//!
//! A fixed text (see [`models::TEACHER_TEXT_SOURCE`]) is cut into chunks; each chunk (BOS and
//! `chunk` text tokens) is decoded in one batch that keeps every position's logits. At every
//! position, with the chunk's tokens so far as the seen ids, each operator at each theta
//! chooses greedily from `z + c` (f32) through its llama.cpp chain, at every shift; a flip is
//! a choice at c that differs from the choice at 0 on the same prefix.
//!
//! The chain sees a reduced array for the sign and subtractive operators: every seen id, and
//! every unseen id within four ulps of the best unseen logit. Both operators act on each
//! entry alone and leave unseen ids as they are, and f32 addition is monotone, so no unseen
//! id outside the set can be the first maximum after the shift: the greedy choice is the full
//! array's. The normalized operator needs the whole array (its log-sum-exp), which costs a
//! pass over the vocabulary per shift; it runs at every `stride`-th position, with `stride =
//! ceil(n_vocab / 8192)` (6 for SmolLM2, 32 for Gemma3), stated in the report.
//!
//! The predictor decides each choice from the raw logits alone, in f64 real arithmetic: the
//! best of the seen ids' penalized values and the best unseen value. For the sign branch it is
//! the paper's threshold (a seen top token with positive shifted logit `v` loses to an unseen
//! runner-up `u` when `v - u < v (1 - 1/theta)`), generalized to every seen candidate and to
//! the multiply branch. It and the chain can disagree only where f32 rounding decides, so each
//! disagreement is reported with whether the chain's margin there was within rounding.

use crate::free_running::{self, first_max, first_max_of, is_knife_edge, ulp, Seen};
use crate::implementation::{short, Implementation};
use anyhow::{ensure, Context as _, Result};
use harness::fork::LogitsRow;
use harness::LoadedModel;
use oracle::gauge::Operator;
use oracle::TokenId;
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use subject::{Append, Candidates, MultiContext, Sampler, SeqId};

/// Text tokens per chunk (after BOS).
pub const CHUNK: usize = 512;

/// The normalized operator runs at every `ceil(n_vocab / NORMALIZED_SPAN)`-th position: each
/// of its shifted cells costs a pass over the whole vocabulary.
pub const NORMALIZED_SPAN: usize = 8192;

/// One cell of the teacher-forced table.
#[derive(Debug, Clone, PartialEq)]
pub struct TfCell {
    pub imp: Implementation,
    pub theta: f32,
    pub shift: f32,
    pub positions: usize,
    pub flips: usize,
    pub predicted_flips: usize,
    /// Positions where the predictor's choice at c is the chain's.
    pub agree: usize,
    /// Disagreements where the chain's top-2 margin at c was within rounding.
    pub knife_edge_disagreements: usize,
    /// Flips where the chain's margin at c or at 0 was within rounding.
    pub knife_edge_flips: usize,
}

impl TfCell {
    fn new(imp: Implementation, theta: f32, shift: f32) -> TfCell {
        TfCell {
            imp,
            theta,
            shift,
            positions: 0,
            flips: 0,
            predicted_flips: 0,
            agree: 0,
            knife_edge_disagreements: 0,
            knife_edge_flips: 0,
        }
    }
    fn add(&mut self, o: &TfCell) {
        (self.positions, self.flips) = (self.positions + o.positions, self.flips + o.flips);
        self.predicted_flips += o.predicted_flips;
        self.agree += o.agree;
        self.knife_edge_disagreements += o.knife_edge_disagreements;
        self.knife_edge_flips += o.knife_edge_flips;
    }
    pub fn operator(&self) -> Operator {
        self.imp.operator()
    }
    pub fn flip_rate(&self) -> f64 {
        self.flips as f64 / self.positions.max(1) as f64
    }
    pub fn agreement(&self) -> f64 {
        self.agree as f64 / self.positions.max(1) as f64
    }
}

/// The model's own gauge over the teacher-forced positions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NaturalGauge {
    /// (position, seen id) pairs with a positive raw logit, of all pairs.
    pub seen_positive: (usize, usize),
    pub top1: Vec<f32>,
    /// Positions where the sign branch at `centred_theta` chooses differently on the raw
    /// logits and on the logits minus their mean, of all positions.
    pub centred_differing: (usize, usize),
    pub centred_theta: f32,
}

impl NaturalGauge {
    pub fn positive_share(&self) -> f64 {
        self.seen_positive.0 as f64 / self.seen_positive.1.max(1) as f64
    }
    pub fn top1_mean(&self) -> f64 {
        self.top1.iter().map(|&x| x as f64).sum::<f64>() / self.top1.len().max(1) as f64
    }
    pub fn top1_median(&self) -> f64 {
        let mut v = self.top1.clone();
        v.sort_by(f32::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2] as f64,
            n => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
        }
    }
    pub fn centred_share(&self) -> f64 {
        self.centred_differing.0 as f64 / self.centred_differing.1.max(1) as f64
    }
    fn merge(&mut self, o: NaturalGauge) {
        self.seen_positive.0 += o.seen_positive.0;
        self.seen_positive.1 += o.seen_positive.1;
        self.top1.extend(o.top1);
        self.centred_differing.0 += o.centred_differing.0;
        self.centred_differing.1 += o.centred_differing.1;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeacherForcedReport {
    #[serde(rename = "model")]
    pub model_label: String,
    pub positions: usize,
    /// Where the teacher text comes from ([`models::TEACHER_TEXT_SOURCE`]).
    pub text: &'static str,
    pub chunk: usize,
    pub normalized_stride: usize,
    #[serde(rename = "natural_gauge")]
    pub gauge: NaturalGauge,
    #[serde(rename = "rows")]
    pub cells: Vec<TfCell>,
}

/// The predictor: the operator's choice in f64 real arithmetic over the candidates
/// `(id, z, seen)`. For the normalized operator `z` must be the log-probability `z - lse(z)`:
/// a seen id's value is then `theta z` and an unseen id's `z`, whatever the shift (the shift
/// cancels exactly in real arithmetic), so `c` is not used.
fn predict(op: Operator, theta: f32, c: f32, cand: &[(i32, f32, bool)]) -> TokenId {
    let t = theta as f64;
    let c = if op == Operator::Normalized {
        0.0
    } else {
        c as f64
    };
    let mut best = (-1i32, f64::NEG_INFINITY);
    for &(id, z, seen) in cand {
        let v = z as f64 + c;
        let y = if !seen || theta == 1.0 {
            v
        } else {
            match op {
                Operator::Sign if v <= 0.0 => v * t,
                Operator::Sign => v / t,
                Operator::Subtractive => v - t.ln(),
                Operator::Normalized => v * t,
            }
        };
        if y > best.1 {
            best = (id, y);
        }
    }
    TokenId(best.0)
}

/// `text`'s tokens on this model, refused unless they fill the chunks of `positions` positions.
fn text_ids(m: &LoadedModel, text: &str, positions: usize) -> Result<Vec<TokenId>> {
    let ids = m.model.tokenize(text, false, false)?;
    let (n, need) = (ids.len(), positions.div_ceil(CHUNK) * CHUNK);
    ensure!(
        n >= need,
        "the teacher text has {n} tokens on {}; {positions} positions need {need}",
        m.choice.label
    );
    Ok(ids)
}

/// Whether `text` holds enough tokens on this model for `positions` positions.
pub fn check_text(m: &LoadedModel, text: &str, positions: usize) -> Result<()> {
    text_ids(m, text, positions).map(drop)
}

/// Every (operator, theta) slot, in table order: theta, then operator.
fn slots(thetas: &[f32]) -> impl Iterator<Item = (Operator, f32)> + '_ {
    (thetas.iter()).flat_map(|&theta| Operator::ALL.map(|op| (op, theta)))
}

/// The teacher-forced table on one model.
pub fn run(
    m: &LoadedModel,
    text: &str,
    positions: usize,
    thetas: &[f32],
    shifts: &[f32],
    threads: i32,
) -> Result<TeacherForcedReport> {
    ensure!(positions >= 1, "need at least one position");
    ensure!(
        shifts.contains(&0.0),
        "the shifts must include 0 (the reference)"
    );
    let model = &m.model;
    let n_vocab = model.n_vocab();
    let bos = model.tokenize("", true, false)?;
    let ids = text_ids(m, text, positions)?;
    let stride = (n_vocab as usize).div_ceil(NORMALIZED_SPAN);
    let cells_of = || -> Vec<TfCell> {
        let per_slot = |(op, theta)| {
            let cell = move |&c| TfCell::new(Implementation::of(op), theta, c);
            shifts.iter().map(cell)
        };
        slots(thetas).flat_map(per_slot).collect()
    };
    let mut cells = cells_of();
    let mut gauge = NaturalGauge {
        centred_theta: thetas.iter().copied().fold(1.0, f32::max),
        ..NaturalGauge::default()
    };
    let mut left = positions;
    let mut progress = cmdline::Progress::new(
        format!("F4 teacher-forced positions on {}", m.choice.label),
        positions as u64,
    );
    for k in 0..positions.div_ceil(CHUNK) {
        let mut tokens = bos.clone();
        tokens.extend_from_slice(&ids[k * CHUNK..(k + 1) * CHUNK]);
        let first = bos.len(); // positions after BOS only
        let take = left.min(tokens.len() - first);
        left -= take;
        let mut ctx = MultiContext::new(
            model,
            tokens.len() as u32 + 8,
            1,
            tokens.len() as u32,
            threads,
        )?;
        let append = |&token| Append {
            seq: SeqId(0),
            token,
            logits: true,
        };
        let items: Vec<Append> = tokens.iter().map(append).collect();
        ctx.decode(&items)
            .with_context(|| format!("decoding teacher-forced chunk {k}"))?;
        let rows: Vec<&[f32]> = (first..first + take)
            .map(|p| ctx.logits(p))
            .collect::<Result<_>>()?;
        // Two halves of the chunk on two threads, each with its own samplers.
        let per = rows.len().div_ceil(threads.max(1) as usize).max(1);
        let theta_c = gauge.centred_theta;
        let work = |lo: usize, rows: &[&[f32]]| -> Result<(Vec<TfCell>, NaturalGauge)> {
            let (mut mine, mut g) = (cells_of(), NaturalGauge::default());
            let mut span = Span::new(n_vocab, thetas, tokens.len())?;
            // Accept what precedes this worker's first position.
            for &t in &tokens[..lo] {
                span.accept(t)?;
            }
            for (p, row) in (lo..).zip(rows) {
                span.accept(tokens[p])?;
                let full = p.is_multiple_of(stride);
                span.position(row, full, shifts, &mut mine, theta_c, &mut g)?;
            }
            Ok((mine, g))
        };
        let results: Vec<Result<_>> = std::thread::scope(|s| {
            let work = &work;
            let handles: Vec<_> = (rows.chunks(per).enumerate())
                .map(|(w, rows)| s.spawn(move || work(first + w * per, rows)))
                .collect();
            let joined = |h: std::thread::ScopedJoinHandle<'_, _>| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            };
            handles.into_iter().map(joined).collect()
        });
        for r in results {
            let (mine, g) = r?;
            cells.iter_mut().zip(&mine).for_each(|(a, b)| a.add(b));
            gauge.merge(g);
        }
        progress.inc(take as u64);
    }
    progress.finish();
    Ok(TeacherForcedReport {
        model_label: m.choice.label.clone(),
        positions,
        text: models::TEACHER_TEXT_SOURCE,
        chunk: CHUNK,
        normalized_stride: stride,
        gauge,
        cells,
    })
}

/// One worker's samplers (one chain per operator and theta) and seen ids.
struct Span {
    samplers: Vec<(Operator, f32, Sampler)>,
    seen: Seen,
}

impl Span {
    fn new(n_vocab: i32, thetas: &[f32], window: usize) -> Result<Span> {
        let sampler = |(op, theta)| {
            let imp = Implementation::of(op);
            Ok((
                op,
                theta,
                free_running::sampler_for(imp, theta, n_vocab, window)?,
            ))
        };
        Ok(Span {
            samplers: slots(thetas).map(sampler).collect::<Result<_>>()?,
            seen: Seen::new(n_vocab),
        })
    }

    fn accept(&mut self, t: TokenId) -> Result<()> {
        for (_, _, s) in &mut self.samplers {
            s.accept(t)?;
        }
        self.seen.insert(t);
        Ok(())
    }

    /// Every cell at one position.
    fn position(
        &mut self,
        row: &[f32],
        full: bool,
        shifts: &[f32],
        cells: &mut [TfCell],
        centred_theta: f32,
        g: &mut NaturalGauge,
    ) -> Result<()> {
        // The reduced array: seen ids, and unseen ids within four ulps of the best unseen
        // logit at the largest shift's magnitude (see the module comment).
        let best_unseen = row
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.seen.mask[*i])
            .fold(f32::NEG_INFINITY, |m, (_, &z)| m.max(z));
        let reach = shifts.iter().fold(0.0f32, |m, c| m.max(c.abs()));
        let mean = row.iter().map(|&z| z as f64).sum::<f64>() / row.len() as f64;
        let centre = -(mean as f32);
        let delta = 4.0 * ulp(best_unseen.abs() + reach.max(centre.abs()));
        let cand: Vec<(i32, f32, bool)> = row
            .iter()
            .enumerate()
            .filter(|(i, &z)| self.seen.mask[*i] || z >= best_unseen - delta)
            .map(|(i, &z)| (i as i32, z, self.seen.mask[i]))
            .collect();
        // The natural gauge.
        let seen = &self.seen.ids;
        g.seen_positive.0 += seen.iter().filter(|&&i| row[i] > 0.0).count();
        g.seen_positive.1 += seen.len();
        g.top1
            .push(row.iter().fold(f32::NEG_INFINITY, |m, &z| m.max(z)));
        // The normalized predictor works relative to the log-sum-exp (needed only where the
        // normalized operator runs).
        let lse = if full {
            LogitsRow::new(row).log_sum_exp()
        } else {
            0.0
        };
        let cand_rel: Vec<(i32, f32, bool)> = cand
            .iter()
            .map(|&(i, z, s)| (i, (z as f64 - lse) as f32, s))
            .collect();
        // (The log-probabilities are rounded to f32 for the predictor; that rounding is far
        // below the normalized operator's tolerance, which marks its knife edges.)
        let mut k = 0;
        for (op, theta, sampler) in &mut self.samplers {
            let needs_full = *op == Operator::Normalized && *theta != 1.0;
            let group = &mut cells[k..k + shifts.len()];
            k += shifts.len();
            if needs_full && !full {
                continue;
            }
            let mut choose = |c: f32| -> Result<(TokenId, f32, f32)> {
                if needs_full {
                    let x: Vec<f32> = row.iter().map(|&z| z + c).collect();
                    Ok(first_max_of(&sampler.apply_in_id_order(&x)?))
                } else {
                    let mut arr =
                        Candidates::new(cand.iter().map(|&(i, z, _)| (TokenId(i), z + c)));
                    sampler.apply(&mut arr)?;
                    Ok(first_max(arr.entries.iter().map(|e| (e.id.0, e.logit))))
                }
            };
            let (op, theta) = (*op, *theta);
            let (c0, m0, top0) = choose(0.0)?;
            let edge0 = is_knife_edge(op, theta, m0, top0);
            let pred_cand = if op == Operator::Normalized {
                &cand_rel
            } else {
                &cand
            };
            let p0 = predict(op, theta, 0.0, pred_cand);
            for cell in group.iter_mut() {
                let (ch, mc, topc) = if cell.shift == 0.0 {
                    (c0, m0, top0)
                } else {
                    choose(cell.shift)?
                };
                let edge = is_knife_edge(op, theta, mc, topc);
                let pc = predict(op, theta, cell.shift, pred_cand);
                let flip = ch != c0;
                cell.positions += 1;
                cell.flips += usize::from(flip);
                cell.knife_edge_flips += usize::from(flip && (edge || edge0));
                cell.predicted_flips += usize::from(pc != p0);
                if pc == ch {
                    cell.agree += 1;
                } else if edge {
                    cell.knife_edge_disagreements += 1;
                }
            }
            // Raw against mean-centred: the sign branch at the largest theta.
            if op == Operator::Sign && theta == centred_theta {
                let (cc, _, _) = choose(centre)?;
                g.centred_differing.0 += usize::from(cc != c0);
                g.centred_differing.1 += 1;
            }
        }
        Ok(())
    }
}

impl Serialize for NaturalGauge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("NaturalGauge", 5)?;
        m.serialize_field("seen_positive_share", &self.positive_share())?;
        m.serialize_field("top1_mean", &self.top1_mean())?;
        m.serialize_field("top1_median", &self.top1_median())?;
        m.serialize_field("raw_vs_centred_differing_share", &self.centred_share())?;
        m.serialize_field("raw_vs_centred_theta", &short(self.centred_theta))?;
        m.end()
    }
}

impl Serialize for TfCell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("TfCell", 11)?;
        m.serialize_field("operator", self.operator().as_str())?;
        m.serialize_field("implementation", self.imp.label())?;
        m.serialize_field("theta", &short(self.theta))?;
        m.serialize_field("shift", &short(self.shift))?;
        m.serialize_field("positions", &self.positions)?;
        m.serialize_field("flips", &self.flips)?;
        m.serialize_field("flip_rate", &self.flip_rate())?;
        m.serialize_field("predicted_flips", &self.predicted_flips)?;
        m.serialize_field("predictor_agreement", &self.agreement())?;
        m.serialize_field("knife_edge_disagreements", &self.knife_edge_disagreements)?;
        m.serialize_field("knife_edge_flips", &self.knife_edge_flips)?;
        m.end()
    }
}

impl TeacherForcedReport {
    /// At theta 1: `(flips, position-cells, flips at knife edges)`. Theta 1 is the identity, so
    /// every flip should sit at a knife edge.
    pub fn no_op(&self) -> (usize, usize, usize) {
        let one = || self.cells.iter().filter(|c| c.theta == 1.0);
        (
            one().map(|c| c.flips).sum(),
            one().map(|c| c.positions).sum(),
            one().map(|c| c.knife_edge_flips).sum(),
        )
    }

    /// The table in one line: flips per operator over the shifted cells with theta > 1, the
    /// predictor's agreement, and the natural gauge.
    pub fn summary(&self) -> String {
        let shifted = || (self.cells.iter()).filter(|c| c.theta != 1.0 && c.shift != 0.0);
        let by_op: Vec<String> = (Operator::ALL.iter())
            .map(|&op| {
                let of_op = || shifted().filter(move |c| c.operator() == op);
                let f: usize = of_op().map(|c| c.flips).sum();
                let p: usize = of_op().map(|c| c.positions).sum();
                format!("{} {f}/{p}", op.as_str())
            })
            .collect();
        let agree: usize = shifted().map(|c| c.agree).sum();
        let n: usize = shifted().map(|c| c.positions).sum();
        let knife: usize = shifted().map(|c| c.knife_edge_disagreements).sum();
        format!(
            "{} teacher-forced at {} positions: flips over every shifted cell with theta > 1: {}; the predictor's choice is the chain's in {agree} of {n} shifted position-cells with theta > 1 ({} disagreements, {knife} at knife edges); natural gauge: {:.2} of seen logits > 0, raw vs mean-centred choices differ at {:.2} of positions",
            self.model_label,
            self.positions,
            by_op.join(", "),
            n - agree,
            self.gauge.positive_share(),
            self.gauge.centred_share()
        )
    }

    pub fn to_text(&self) -> String {
        let g = &self.gauge;
        let mut out = format!(
            "{}: teacher-forced at {} positions ({}-token chunks of the teacher text; normalized rows every {} position(s))\n  natural gauge: {:.3} of seen logits > 0; top-1 logit mean {:.2}, median {:.2}; raw vs mean-centred logits choose differently at {:.3} of positions (sign, theta {})\n  operator     theta  shift  flips / positions    flip rate  predicted  predictor agreement  knife-edge disagreements\n",
            self.model_label,
            self.positions,
            self.chunk,
            self.normalized_stride,
            g.positive_share(),
            g.top1_mean(),
            g.top1_median(),
            g.centred_share(),
            g.centred_theta
        );
        for c in &self.cells {
            out.push_str(&format!(
                "  {:<12} {:>5} {:>6}  {:>6} / {:<8}  {:>9.4}  {:>9}  {:>19.5}  {:>5}\n",
                c.operator().as_str(),
                c.theta,
                c.shift,
                c.flips,
                c.positions,
                c.flip_rate(),
                c.predicted_flips,
                c.agreement(),
                c.knife_edge_disagreements
            ));
        }
        out
    }
}
