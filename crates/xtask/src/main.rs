//! The orchestrator's command line; the work is in the library.

fn main() {
    cmdline::one_line_panics();
    std::process::exit(xtask::main(std::env::args_os()));
}
