//! The planted case that checks F4's detector: a four-token source whose divergences are known,
//! run through the same runs ([`crate::free_running::GaugeRun`]), measures and verdict rules
//! ([`crate::rule`]) as the models. The operators' implementations it plants beside the real
//! ones are listed in [`crate::implementation`].

use crate::free_running::{self, Design, GaugeRun, ModelRuns, ValueCheck};
use crate::implementation::Implementation;
use anyhow::Result;
use harness::fork::{self, Scripted};
use oracle::gauge::Operator;
use oracle::TokenId;
use report::{Control, ControlKind, Verdict};
use Implementation::{
    LedgerNormalized, LedgerSign, LedgerSubtractive, PlantedNormalized, PlantedSubtractive,
};

/// The planted source: 4 ids; after a history `h` the logits are (1, 0.75 + n, -8, -8),
/// where n counts the 1s in `h` (a row that depends on the history, so a run handed another
/// sequence's row would choose differently). With id 0 seen at theta 1.3 the sign branch
/// keeps id 0 on top at c = 0 (1 / 1.3 > 0.75) for good; at c = +5 it hands the top to id 1
/// ((1 + 5) / 1.3 < 5.75), and at c = -5 too ((1 - 5) * 1.3 < -4.25), after which id 1 keeps
/// it ((1.75 + 5) / 1.3 > 6 / 1.3; (1.75 - 5) * 1.3 > -5.2). Every input and shift is exact
/// in f32 and every comparison is decided by far more than rounding, so a gauge-free operator
/// must never part from its c = 0 run here.
pub fn planted_row(history: &[TokenId]) -> Vec<f32> {
    let n = history.iter().filter(|t| t.0 == 1).count() as f32;
    vec![1.0, 0.75 + n, -8.0, -8.0]
}
pub const PLANTED_VOCAB: i32 = 4;
/// Four planted prompts (id 0 seen in each).
pub const PLANTED_PROMPTS: [&[TokenId]; 4] = [
    &[TokenId(0)],
    &[TokenId(0), TokenId(3)],
    &[TokenId(3), TokenId(0)],
    &[TokenId(0), TokenId(0), TokenId(3)],
];
pub const PLANTED_SHIFTS: [f32; 3] = [-5.0, 0.0, 5.0];
pub const PLANTED_THETAS: [f32; 2] = [1.0, 1.3];
const PLANTED_STEPS: usize = 8;

/// The planted design with the given implementations in the sign and subtractive slots.
pub fn planted_design(sign: Implementation, subtractive: Implementation) -> Design {
    planted_slots(vec![
        (Operator::Sign, sign),
        (Operator::Subtractive, subtractive),
    ])
}

/// The planted design with the given slots.
pub fn planted_slots(slots: Vec<(Operator, Implementation)>) -> Design {
    Design {
        slots,
        thetas: PLANTED_THETAS.to_vec(),
        shifts: PLANTED_SHIFTS.to_vec(),
        max_new: PLANTED_STEPS,
        threads: 1,
    }
}

/// The planted design through the same fork loop ([`harness::fork::run_on`], a scripted
/// decoder in place of the model), the same runs and the same cells as a model's.
pub fn planted_runs(design: &Design, label: &str) -> Result<ModelRuns> {
    let prompts = PLANTED_PROMPTS
        .iter()
        .map(|p| {
            let mut d = Scripted::new(design.cells().len(), planted_row, None);
            free_running::run_planted(&mut d, PLANTED_VOCAB, design, p)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ModelRuns {
        model_label: label.to_string(),
        model_desc: "planted source".into(),
        prompts,
        max_new: design.max_new,
    })
}

/// The planted case, in words.
const CASE: &str = "planted source (1, 0.75 + n, -8, -8), 4 prompts with id 0 seen, theta 1.3";

/// The controls that judge the detector and the value check on planted cases:
/// - our sign-branched sampler (`ledger-penalties` default mode, bit-identical to llama.cpp's)
///   in the sign slot: the whole verdict path must say `present`;
/// - the planted subtractive sampler in the sign slot: it must say `absent`;
/// - our sign-branched sampler in the gauge-free slots: the subject's rule must refuse to
///   decide and the fix's rule must say `present`;
/// - the planted normalized sampler in the normalized slot: the fix's rule must say `absent`
///   (the fix itself is never its own row's negative control: [`fix_on_planted_case`]);
/// - the value check must report mismatches for the planted subtractive sampler checked as
///   the sign branch, for the planted normalized sampler at theta 1.31 checked at 1.3, and for
///   `ledger-penalties`' subtractive mode at theta 1.31 checked at 1.3.
pub fn planted_controls() -> Result<Vec<Control>> {
    let describe = |m: &ModelRuns| -> Result<String> {
        let cells = m.cells()?;
        let strong = crate::rule::strongest(&cells).into_iter().map(|c| {
            let d = c.differing();
            format!(
                "c={:+}: differing share {:.2} [{:.2}, {:.2}], {} of {} prompts parted",
                c.shift,
                d.mean,
                d.lo,
                d.hi,
                c.diverged(),
                c.per_prompt.len()
            )
        });
        Ok(format!(" {}", strong.collect::<Vec<_>>().join("; ")))
    };
    let case = CASE;
    let (sign, subtractive, normalized) =
        (Operator::Sign, Operator::Subtractive, Operator::Normalized);
    let slots = |imps: &[(Operator, Implementation)], label: &str| {
        planted_runs(&planted_slots(imps.to_vec()), label)
    };
    let subject_rule = |m: ModelRuns| crate::rule::verdict_of(std::slice::from_ref(&m));
    let fix_rule = |m: ModelRuns| crate::rule::fix_verdict_of(std::slice::from_ref(&m));
    let signed = slots(
        &[(sign, LedgerSign), (subtractive, PlantedSubtractive)],
        "planted sign",
    )?;
    let clean = slots(
        &[
            (sign, PlantedSubtractive),
            (subtractive, PlantedSubtractive),
        ],
        "planted subtractive",
    )?;
    // A sign-branched sampler in a gauge-free slot: the subject's rule must refuse to decide,
    // and the fix's rule must say present.
    let broken = slots(
        &[
            (sign, LedgerSign),
            (subtractive, LedgerSign),
            (normalized, LedgerSign),
        ],
        "planted sign in the gauge-free slots",
    )?;
    // A gauge-free penalty of our own, written plainly, in the fix's slot.
    let plain = slots(
        &[(sign, LedgerSign), (normalized, PlantedNormalized)],
        "planted normalized",
    )?;
    let (signed_text, clean_text) = (describe(&signed)?, describe(&clean)?);
    // (kind, name, the verdict the rule gave, the verdict it must give, what the rule saw)
    let rules = [
        (
            ControlKind::Positive,
            "planted sign-branched sampler: the verdict path says present",
            subject_rule(signed)?,
            Verdict::Present,
            signed_text,
        ),
        (
            ControlKind::Negative,
            "planted subtractive sampler in the sign slot: the verdict path says absent",
            subject_rule(clean)?,
            Verdict::Absent,
            clean_text,
        ),
        (
            ControlKind::Positive,
            "planted sign-branched sampler in the gauge-free slots: the rule refuses to decide",
            subject_rule(broken.clone())?,
            Verdict::Undecided,
            String::new(),
        ),
        (
            ControlKind::Positive,
            "planted sign-branched sampler in the normalized slot: the fix's rule says present",
            fix_rule(broken)?,
            Verdict::Present,
            String::new(),
        ),
        (
            ControlKind::Negative,
            "planted normalized sampler (log-softmax penalty written plainly) in the normalized slot: the fix's rule says absent",
            fix_rule(plain)?,
            Verdict::Absent,
            String::new(),
        ),
    ];
    let mut controls: Vec<Control> = (rules.into_iter())
        .map(|(kind, name, got, want, saw)| {
            let detail = format!("{case}:{saw} -> {}", got.as_str());
            Control::new(kind, name, got == want, detail)
        })
        .collect();
    // The value check, told the wrong arithmetic: (what is wrong, the implementation in its
    // slot, its theta, what it is checked as).
    let wrong_cases = [
        (
            "the planted subtractive sampler checked as the sign branch",
            (subtractive, PlantedSubtractive),
            1.3,
            (sign, 1.3),
        ),
        // The normalized slot's check is told a wrong theta through our planted sampler, not
        // through the fix: the fix is the subject of its own row.
        (
            "the planted normalized sampler at theta 1.31 checked at 1.3",
            (normalized, PlantedNormalized),
            1.31,
            (normalized, 1.3),
        ),
        (
            "ledger-penalties subtractive at theta 1.31 checked at 1.3",
            (subtractive, LedgerSubtractive),
            1.31,
            (subtractive, 1.3),
        ),
    ];
    for (what, slot, theta, expect) in wrong_cases {
        let mut c = ValueCheck::default();
        for p in PLANTED_PROMPTS {
            let mut run =
                GaugeRun::new(slot, theta, 5.0, PLANTED_VOCAB, p, p.len() + PLANTED_STEPS)?;
            run.checked_as = expect;
            let mut runs = [run];
            fork::run_on(
                &mut Scripted::new(1, planted_row, None),
                p,
                &mut runs,
                PLANTED_STEPS,
            )?;
            c.merge(&runs[0].record.check);
        }
        controls.push(Control::positive(
            format!("value check catches {what}"),
            c.mismatches > 0,
            format!(
                "{case}, c = +5: {} of {} seen-id values differ",
                c.mismatches, c.compared
            ),
        ));
    }
    Ok(controls)
}

/// The fix (`ledger-penalties` normalized) in the normalized slot of the planted case, judged
/// by the fix's rule: what that rule reads, and the line that says so. Reported beside the
/// fix's row, never one of its controls: the fix is that row's subject.
pub fn fix_on_planted_case() -> Result<(Verdict, String)> {
    let fixed = planted_runs(
        &planted_slots(vec![
            (Operator::Sign, LedgerSign),
            (Operator::Normalized, LedgerNormalized),
        ]),
        "planted with the fix",
    )?;
    let got = crate::rule::fix_verdict_of(std::slice::from_ref(&fixed))?;
    let line = format!(
        "ledger-penalties normalized on the {CASE}, judged by the fix's rule: {} (reported beside the fix's row, not one of its controls: the fix is the row's subject)",
        got.as_str()
    );
    Ok((got, line))
}
