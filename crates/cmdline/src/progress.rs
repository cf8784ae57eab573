//! Progress of a long run, on stderr (stdout and results stay byte-identical): what it is
//! doing, done out of total, elapsed time and an estimate of what remains. With stderr on a
//! terminal it is an indicatif bar; otherwise a plain line, the first once the run has taken
//! [`QUIET_FOR`], then at most every [`EVERY`], so logs stay readable and short runs silent.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A run shorter than this prints nothing.
pub const QUIET_FOR: Duration = Duration::from_secs(10);
/// Plain lines come at most this often.
pub const EVERY: Duration = Duration::from_secs(30);

/// One long task's progress.
pub struct Progress {
    what: String,
    total: u64,
    done: u64,
    start: Instant,
    last: Option<Instant>,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// `total` units of `what` (a short phrase: "F7 draws on published top_k=3").
    pub fn new(what: impl Into<String>, total: u64) -> Progress {
        let what = what.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{msg} {bar:30} {pos}/{len} {elapsed_precise}, about {eta} left",
                )
                .expect("a valid template"),
            );
            b.set_message(what.clone());
            // Like the plain lines, nothing for a short run.
            b.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            b
        });
        Progress {
            what,
            total,
            done: 0,
            start: Instant::now(),
            last: None,
            bar,
        }
    }

    /// `n` more units done.
    pub fn inc(&mut self, n: u64) {
        self.done = (self.done + n).min(self.total);
        let elapsed = self.start.elapsed();
        if elapsed < QUIET_FOR {
            return;
        }
        match &self.bar {
            Some(b) => {
                if self.last.is_none() {
                    b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    self.last = Some(Instant::now());
                }
                b.set_position(self.done);
            }
            None => {
                if self.last.is_none_or(|t| t.elapsed() >= EVERY) {
                    eprintln!("{}", self.line());
                    self.last = Some(Instant::now());
                }
            }
        }
    }

    /// The plain line: `what: done/total (pct), elapsed, about remaining left`.
    pub fn line(&self) -> String {
        let elapsed = self.start.elapsed();
        let left = (self.done > 0).then(|| {
            let per = elapsed.as_secs_f64() / self.done as f64;
            Duration::from_secs_f64(per * (self.total - self.done) as f64)
        });
        format!(
            "{}: {}/{} ({:.0}%), {} elapsed{}",
            self.what,
            self.done,
            self.total,
            100.0 * self.done as f64 / self.total.max(1) as f64,
            clock(elapsed),
            left.map_or(String::new(), |l| format!(", about {} left", clock(l)))
        )
    }

    /// Ends the task; a run that showed progress says it finished.
    pub fn finish(self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if self.last.is_some() {
            eprintln!("{}: done in {}", self.what, clock(self.start.elapsed()));
        }
    }
}

/// `1m05s`, `42s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_how_far_and_how_long() {
        let mut p = Progress::new("draws", 200);
        p.bar = None;
        p.done = 50;
        let l = p.line();
        assert!(l.starts_with("draws: 50/200 (25%), "), "{l}");
        assert!(l.contains("elapsed") && l.contains("left"), "{l}");
        assert_eq!(clock(Duration::from_secs(65)), "1m05s");
        assert_eq!(clock(Duration::from_secs(7)), "7s");
    }

    #[test]
    fn a_short_run_prints_nothing() {
        let mut p = Progress::new("short", 10);
        p.inc(10);
        assert!(p.last.is_none());
        p.finish();
    }
}
