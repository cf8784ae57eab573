//! F4, `penalty-gauge-dependence`: the sign-branched repetition penalty (`z > 0 ? z / theta :
//! z * theta`, shipped by llama.cpp, transformers, vLLM and candle) changes what it does when
//! every logit moves by the same constant, which softmax ignores; the subtractive penalty
//! (`z - ln theta`) and the sign branch on log-probabilities do not. Its cut, z(1 - 1/theta)
//! above 0 and |z|(theta - 1) at or below, depends on where the model's zero point sits.
//!
//! The design is the paper's A1 (PREREG F4 addendum 2026-11-30), in `free_running`; the
//! report and its controls are in `audit`, its verdict rules in `rule`. `--json` prints the
//! report (header, then `model`, `rows`, `value_checks`); `--audit` runs the design on
//! SmolLM2 and Gemma3 and writes `results/gauge.<build>.*`, `results/gauge-ledger.<build>.*`
//! (the fix's verdict from the same runs) and the plots; `--tables` runs the reported-only
//! tables (`tables`) into `results/tables/`.

fn main() {
    cmdline::one_line_panics();
    // A model file the user names is loaded first in a child of this binary.
    if let Some(code) = contain::serve(&[subject::LOAD_TASK]) {
        std::process::exit(code);
    }
    std::process::exit(repro_gauge::cli::main(std::env::args_os()));
}
