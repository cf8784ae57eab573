//! The verdict table's command line. The work is in the library, so that the argv test can put
//! generated vectors through `check` in process.

use verdicts::{check, run};

fn main() {
    cmdline::one_line_panics();
    std::process::exit(cmdline::run_checked(std::env::args_os(), check, |c| {
        cmdline::fail(run(&c))
    }));
}
