//! The release matrix's command line; the work is in the library.

fn main() {
    cmdline::one_line_panics();
    std::process::exit(cmdline::run_checked(
        std::env::args_os(),
        matrix::check,
        |(dir, m)| cmdline::fail(matrix::write(&dir, &m, &matrix::registry_source)),
    ));
}
