//! Planted memory defects for `make memcheck` (`xtask memcheck`): the orchestrator runs this
//! binary under valgrind memcheck exactly as it runs the repros, and it must report the
//! defect each mode plants (and nothing for `clean`), or the memcheck is not trusted.
//!
//! `memcheck-planted clean`: allocates and frees; memcheck must see nothing.
//! `memcheck-planted leak`: loses a box that owns another box, so memcheck must report
//! bytes definitely lost (the outer box) and indirectly lost (the inner one), and no error.
//! `memcheck-planted invalid-read`: reads one element past the end of a heap buffer, so
//! memcheck must report an invalid read, and no leak.
//! `memcheck-planted parent MODE`: runs itself as a child in MODE and exits 0 whatever the
//! child did, so only a memcheck that follows children (the edge probes' check) can see it:
//! `parent invalid-read` must fail that check, `parent clean` must pass it, and `parent
//! abort-leak` (a child that leaks, then aborts, as an edge probe that hits an assertion may)
//! must pass it too.
//!
//! Plain Rust, no C: whatever memcheck reports here comes from this file. It links nothing of
//! llama.cpp, so the suppressions in `scripts/memcheck.supp` cannot hide it.

use std::hint::black_box;

/// A heap block that owns another, so losing it loses both.
struct Outer {
    inner: Box<[u64; 8]>,
}

/// Loses the only pointer to an `Outer` box (8 bytes, definitely lost), which owns 64 bytes
/// that are then indirectly lost.
#[inline(never)]
fn leak() -> usize {
    let outer = Box::new(Outer {
        inner: Box::new([7; 8]),
    });
    let sum = outer.inner.iter().sum::<u64>() as usize;
    std::mem::forget(black_box(outer));
    sum
}

/// Reads the u32 just past the end of a 4-element heap buffer.
#[inline(never)]
fn invalid_read() -> u32 {
    let buf: Box<[u32]> = black_box(vec![1, 2, 3, 4].into_boxed_slice());
    // SAFETY: none; this is the planted defect. The read stays inside the allocator's
    // block padding, so it does not crash natively, but memcheck must flag it.
    unsafe { std::ptr::read_volatile(buf.as_ptr().add(buf.len())) }
}

/// Allocates, uses and frees: nothing for memcheck to report.
#[inline(never)]
fn clean() -> usize {
    let v: Vec<Box<u64>> = (0..64).map(Box::new).collect();
    black_box(v).iter().map(|b| **b as usize).sum()
}

/// Runs this binary as a child in `mode`; its outcome is not this process's.
fn parent(mode: &str) -> usize {
    let me = std::env::current_exe().expect("the path of this binary");
    let status = std::process::Command::new(me).arg(mode).status();
    usize::from(status.is_ok_and(|s| s.success()))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let value = match mode.as_str() {
        "clean" => clean(),
        "leak" => leak(),
        "invalid-read" => invalid_read() as usize,
        "abort-leak" => {
            black_box(leak());
            std::process::abort()
        }
        "parent" => parent(&args.next().unwrap_or_default()),
        _ => {
            eprintln!("usage: memcheck-planted clean|leak|invalid-read|abort-leak|parent MODE");
            std::process::exit(2);
        }
    };
    println!("memcheck-planted {mode}: {value}");
}
