#!/usr/bin/env bash
# make memcheck: valgrind memcheck over each repro's non-model paths and a short decode of each
# model, on both pinned builds. A run passes when memcheck reports no memory error, no byte
# definitely or indirectly lost (after the suppressions in scripts/memcheck.supp), and the
# program exits 0. Before the real runs, the planted controls (crates/memcheck-planted) go
# through the same function and the same parser: a planted leak and a planted invalid read
# must be caught and a clean run must pass, or the check is not trusted and the script fails.
#
#   scripts/memcheck.sh               the controls, then every run on both builds; exit 1 if any fails
#   scripts/memcheck.sh CMD [ARG...]  one command through the same check; exit 1 if it fails
#
# Expects the binaries of both builds (`make build`) and the models (`make models`).
# Valgrind's log of each run, and the program's stdout and stderr beside it, go to
# target/memcheck/. The summary (one line per run) goes to stdout.

set -euo pipefail
cd "$(dirname "$0")/.."

SUPP=scripts/memcheck.supp
LOGS=target/memcheck
MODELS=${MODELS_CACHE:-models-cache}

# --errors-for-leak-kinds=definite,indirect makes such a leak an error, so valgrind exits 99
# on a leak as on an invalid access; the parser below splits the two for the summary.
# --trace-children=no is valgrind's default, stated because repro-clone --stateful starts
# probe children under their own valgrind: this memcheck checks the parent, not them.
VALGRIND=(valgrind --tool=memcheck --leak-check=full
  --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
  --error-exitcode=99 --trace-children=no --num-callers=40 --suppressions="$SUPP")

# F2: one chain with every deterministic stage llama.cpp has, plus the sorted_guard fix, each
# left several candidates (the published chain's bias would leave one after typical).
EVERY_STAGE=(--logits 2,1.5,1,0.5,0,-0.5,-1,-1.5 --history 0,0,1
  --stage penalties=4:1.3:0.1:0.1 --stage top_k=7 --stage logit_bias=3:+1 --stage sorted_guard
  --stage temp_ext=1.2:0.2:1 --stage typical=0.99 --stage top_p=0.99 --stage min_p=0.02
  --stage xtc=1:0.15 --stage top_n_sigma=3 --stage temp=0.8 --stage greedy)

# F3 decoding, as short as repro-scope goes: the prompt through the chat template, the `all`
# scope with its llama.cpp twins, the two planted scopes and the single-vector table, each a
# fresh prefill plus one generated token (about 44 positions in all). The verdict is not the
# point here (one token cannot diverge, so it reads inconclusive); the memory is.
DECODE=(--prompt Hi --max-new 1 --scopes all --vector-at 0 --threads 1)

mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.log.[0-9]* "$LOGS"/*.log.stdout "$LOGS"/*.log.stderr "$LOGS"/*.line "$LOGS"/*.counts "$LOGS"/*.cmd
N=0
SUMMARY=()
FAILED=0
PASSED=0
FAILURES=0

# measure BUILD CMD [ARG...]: runs CMD under memcheck and sets ERRORS (memory errors, leaks not
# counted), DEF and IND (bytes definitely and indirectly lost), SECS, STATUS (valgrind's exit
# code), NOTE (why the log cannot be trusted, or empty) and SHOWN (the command as printed).
measure() {
  local build=$1
  shift
  N=$((N + 1))
  local log
  log="$LOGS/$(printf %02d "$N")-${build/#-/control}-$(basename "$1").log"
  SHOWN="$(basename "$1")${2:+ ${*:2}}"
  echo "memcheck $build: $SHOWN" >&2
  local t0 t1
  t0=$(date +%s.%N)
  STATUS=0
  LAST_LOG=$log
  if [ "${measure_tree:-0}" = 1 ]; then
    # One log per process; the parent's is renamed to the usual name below.
    "${VALGRIND[@]}" --log-file="$log.%p" "$@" >"$log.stdout" 2>"$log.stderr" &
    local pid=$!
    wait "$pid" || STATUS=$?
    [ -f "$log.$pid" ] && mv "$log.$pid" "$log"
  else
    "${VALGRIND[@]}" --log-file="$log" "$@" >"$log.stdout" 2>"$log.stderr" || STATUS=$?
  fi
  t1=$(date +%s.%N)
  # Valgrind writes no log when it cannot start the program (a missing binary, say).
  [ -f "$log" ] || : >"$log"
  SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  # One pass over the log: every count valgrind printed, commas dropped. A leak shown as a
  # loss record is one of the "errors" of the ERROR SUMMARY line; those are taken out again.
  local parsed total records unhandled
  parsed=$(awk '
    { gsub(",", "") }
    /ERROR SUMMARY:/ { for (i = 1; i <= NF; i++) if ($i == "SUMMARY:") total = $(i + 1); seen = 1 }
    /definitely lost:/ { for (i = 1; i <= NF; i++) if ($i == "lost:") def = $(i + 1) }
    /indirectly lost:/ { for (i = 1; i <= NF; i++) if ($i == "lost:") ind = $(i + 1) }
    / are (definitely|indirectly) lost in loss record / { records++ }
    /unhandled instruction bytes/ { unhandled++ }
    END { printf "%s %d %d %d %d\n", (seen ? total : "none"), def, ind, records, unhandled }
  ' "$log")
  read -r total DEF IND records unhandled <<<"$parsed"
  NOTE=""
  if [ "$unhandled" -gt 0 ]; then
    NOTE="valgrind cannot run an instruction (unhandled instruction bytes; see $log)"
  fi
  if [ "$total" = none ]; then
    NOTE="${NOTE:-no memcheck summary (valgrind or the program did not run to the end; see $log and $log.stderr)}"
    ERRORS=0
  else
    ERRORS=$((total - records))
  fi
}

# One summary line. RESULT is ok, FAILED, caught or MISSED.
line() {
  case $2 in
    ok | caught) PASSED=$((PASSED + 1)) ;;
    *) FAILURES=$((FAILURES + 1)) ;;
  esac
  SUMMARY+=("$(printf '%-8s %6s %12s %12s %8s  %-7s %s' "$1" "$ERRORS" "$DEF" "$IND" "${SECS}s" "$2" "$SHOWN${NOTE:+ [$NOTE]}")")
}

# check BUILD CMD [ARG...]: one real run; it must be clean.
check() {
  measure "$@"
  local why=""
  if [ -n "$NOTE" ]; then
    why=untrusted
  elif [ "$ERRORS" -gt 0 ] || [ "$DEF" -gt 0 ] || [ "$IND" -gt 0 ]; then
    why=memcheck
  elif [ "$STATUS" -ne 0 ]; then
    why="exit $STATUS"
    NOTE="the program exited $STATUS; see $LOGS"
  fi
  if [ -n "$why" ]; then
    FAILED=1
    line "$1" FAILED
  else
    line "$1" ok
  fi
}

# check_tree BUILD CMD [ARG...]: `check` with valgrind following every child the program
# starts (--trace-children=yes, one log per process): the parent must be clean as in `check`,
# and each child must have no memory error and, unless a signal ended it (an abort is what
# some probes measure, and an aborted process leaks what it held), no lost byte. A child that
# fails adds one line naming the build and its command (the probe's sampler and input).
check_tree() {
  local build=$1
  local saved=("${VALGRIND[@]}")
  VALGRIND=("${VALGRIND[@]/--trace-children=no/--trace-children=yes}")
  measure_tree=1 check "$@"
  VALGRIND=("${saved[@]}")
  local log=$LAST_LOG child cmd parsed total def ind records signalled errors
  for child in "$log".[0-9]*; do
    [ -e "$child" ] || continue
    cmd=$(sed -n 's/^==[0-9]*== Command: //p' "$child" | head -n1)
    parsed=$(awk '
      { gsub(",", "") }
      /ERROR SUMMARY:/ { for (i = 1; i <= NF; i++) if ($i == "SUMMARY:") total = $(i + 1); seen = 1 }
      /definitely lost:/ { for (i = 1; i <= NF; i++) if ($i == "lost:") def = $(i + 1) }
      /indirectly lost:/ { for (i = 1; i <= NF; i++) if ($i == "lost:") ind = $(i + 1) }
      / are (definitely|indirectly) lost in loss record / { records++ }
      /Process terminating with default action of signal/ { signalled = 1 }
      END { printf "%s %d %d %d %d\n", (seen ? total : "none"), def, ind, records, signalled }
    ' "$child")
    read -r total def ind records signalled <<<"$parsed"
    # A child killed at its deadline leaves no summary: nothing to judge.
    [ "$total" = none ] && continue
    errors=$((total - records))
    if [ "$errors" -gt 0 ] || { [ "$signalled" = 0 ] && [ $((def + ind)) -gt 0 ]; }; then
      FAILED=1
      FAILURES=$((FAILURES + 1))
      SUMMARY+=("$(printf '%-8s %6s %12s %12s %8s  %-7s %s' "$build" "$errors" "$def" "$ind" "-" FAILED "child of $(basename "$2"): $(basename "${cmd%% *}") ${cmd#* } [$child]")")
    fi
  done
}

# control MODE: the planted binary through the same measure; what it must show per mode.
control() {
  local mode=$1
  measure - target/release/memcheck-planted "$mode"
  local caught
  case $mode in
    clean) [ -z "$NOTE" ] && [ "$STATUS" -eq 0 ] && [ "$ERRORS" -eq 0 ] && [ "$DEF" -eq 0 ] && [ "$IND" -eq 0 ] && caught=1 ;;
    leak) [ -z "$NOTE" ] && [ "$STATUS" -eq 99 ] && [ "$ERRORS" -eq 0 ] && [ "$DEF" -gt 0 ] && [ "$IND" -gt 0 ] && caught=1 ;;
    invalid-read) [ -z "$NOTE" ] && [ "$STATUS" -eq 99 ] && [ "$ERRORS" -gt 0 ] && [ "$DEF" -eq 0 ] && [ "$IND" -eq 0 ] && caught=1 ;;
  esac
  SHOWN="$SHOWN (control: must $([ "$mode" = clean ] && echo pass || echo fail))"
  if [ -n "${caught:-}" ]; then
    line - "$([ "$mode" = clean ] && echo ok || echo caught)"
  else
    FAILED=1
    line - "$([ "$mode" = clean ] && echo FAILED || echo MISSED)"
  fi
}

# tree_control MODE pass|fail: the planted binary as a parent of a child in MODE, through
# check_tree; a child's defect must fail the run, a clean or aborted child must not.
tree_control() {
  local mode=$1 want=$2
  local saved_summary=("${SUMMARY[@]}") saved_failed=$FAILED saved_passed=$PASSED saved_failures=$FAILURES
  FAILED=0
  check_tree - target/release/memcheck-planted parent "$mode"
  local got=pass
  [ "$FAILED" = 1 ] && got=fail
  # The runs' own lines give way to one that says whether the check behaved.
  SUMMARY=("${saved_summary[@]}") FAILED=$saved_failed PASSED=$saved_passed FAILURES=$saved_failures
  SHOWN="memcheck-planted parent $mode (control of the child check: must $want)"
  ERRORS=- DEF=- IND=- NOTE=""
  if [ "$got" = "$want" ]; then
    line - "$([ "$want" = pass ] && echo ok || echo caught)"
  else
    FAILED=1
    line - "$([ "$want" = pass ] && echo FAILED || echo MISSED)"
  fi
}

print_summary() {
  local start=$1
  echo "memcheck ($(valgrind --version), suppressions $SUPP; logs in $LOGS/)"
  printf '%-8s %6s %12s %12s %8s  %-7s %s\n' build errors "definitely" "indirectly" time result command
  printf '%-8s %6s %12s %12s %8s  %-7s %s\n' "" "" "lost bytes" "lost bytes" "" "" ""
  printf '%s\n' "${SUMMARY[@]}"
  echo "total $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s; $([ "$FAILED" -eq 0 ] && echo "memcheck clean" || echo "memcheck FAILED")"
  # The closing line in the form CI reads as a count (a caught control counts as passed).
  echo "memcheck: $PASSED passed, $FAILURES failed"
}

START=$(date +%s.%N)
if ! command -v valgrind >/dev/null; then
  echo "error: valgrind not found; \`make deps\` installs it" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  check adhoc "$@"
  print_summary "$START"
  exit "$FAILED"
fi

# The builds to check, `name=bin-folder` per line, the default build first (the Makefile
# passes them from buildgen).
BUILD_BINS=${MEMCHECK_BUILDS:-b11429=target/release}
DEFAULT_BUILD=${BUILD_BINS%%=*}

for bin in target/release/memcheck-planted $(for b in $BUILD_BINS; do echo "${b#*=}/repro-clone"; done); do
  if [ ! -x "$bin" ]; then
    echo "error: $bin is missing; run \`make build\` first" >&2
    exit 2
  fi
done

control clean
control leak
control invalid-read
tree_control clean pass
tree_control abort-leak pass
tree_control invalid-read fail

# The real runs go two at a time (valgrind runs a program's threads on one core, so one run
# leaves the second core idle). Each runs `check` in a subshell that writes its summary line
# and counts to files named by its number; they are read back in that order, so the summary
# is the same whichever finished first.
JOBS=${MEMCHECK_JOBS:-2}
QUEUED=()
queue() {
  # Wait while JOBS runs are still going (counted afresh: `wait -n` may return for a run
  # that ended before it was called).
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
    wait -n || true
  done
  N=$((N + 1))
  local n=$N tag
  tag="$LOGS/$(printf %02d "$n")"
  QUEUED+=("$tag")
  echo "$1: $(basename "$2")${3:+ ${*:3}}" >"$tag.cmd"
  local how=check
  [ "${TREE:-0}" = 1 ] && how=check_tree
  (
    N=$((n - 1)) SUMMARY=() FAILED=0 PASSED=0 FAILURES=0
    "$how" "$@"
    printf '%s\n' "${SUMMARY[@]}" >"$tag.line"
    echo "$FAILED $PASSED $FAILURES" >"$tag.counts"
  ) &
}

# queue_tree: `queue`, with the run checked by check_tree.
queue_tree() {
  TREE=1 queue "$@"
}

# F6 first, on every build: the edge probes, parent and children, are the longest runs (about
# 5 minutes each under valgrind), so they start at once and the short runs fill the other slot.
# Valgrind follows every probe child into llama.cpp's sampler calls (check_tree), with the
# deadline raised for valgrind's pace.
for entry in $BUILD_BINS; do
  queue_tree "${entry%%=*}" "${entry#*=}/repro-edges" --sampler top_k,typical,greedy,dist --input plain,empty,equal,some-neg-inf --timeout 120
done

for entry in $BUILD_BINS; do
  build=${entry%%=*}
  bin=${entry#*=}
  # F1: the minimal case with llama.cpp's penalties and with ledger-penalties, then
  # clone-then-continue of every stateful sampler. --stateful's own memcheck probes run as
  # children under their own valgrind (their findings, such as adaptive_p's invalid read on
  # b11429, are the report's rows); this memcheck sees the parent only.
  queue "$build" "$bin/repro-clone"
  queue "$build" "$bin/repro-clone" --sampler ledger
  queue "$build" "$bin/repro-clone" --stateful
  # F2: the published chain, then every stage in one chain; each with the oracle gate on its
  # stages and the planted chains.
  queue "$build" "$bin/repro-sortpoison"
  queue "$build" "$bin/repro-sortpoison" "${EVERY_STAGE[@]}"
  # F2 with dist at the end: the stale flag's overflow (p NaN) and 10,000 draws through
  # llama.cpp's dist, beside the planted dists.
  queue "$build" "$bin/repro-sortpoison" --stage top_k=4 --stage logit_bias=3:+100 --stage dist=1
  # F7: llama.cpp's chain ending in dist, applied again and again (and the controls' Rust
  # samplers beside it).
  queue "$build" "$bin/repro-engines" --sampling top_k=3,top_p=0.9,temp=0.5 --draws 200
  # F3 on each model. SmolLM2 by its file path: the same load and decode, without the default
  # system turn (10 prompt tokens instead of 31, a third of the decoding under valgrind) and
  # without the sha256 check, which gemma3's run (by name) does. gemma3's file carries no chat
  # template, so it runs by name only, and on the default build only: it takes 90 s under
  # valgrind, and the other builds' wrapper and decode path are the ones SmolLM2 covers.
  queue "$build" "$bin/repro-scope" --model "$MODELS/smollm2.gguf" "${DECODE[@]}"
  if [ "$build" = "$DEFAULT_BUILD" ]; then
    queue "$build" "$bin/repro-scope" --model gemma3 "${DECODE[@]}"
  fi
done

wait
for tag in "${QUEUED[@]}"; do
  f="" p="" x=""
  if [ -s "$tag.counts" ]; then read -r f p x <"$tag.counts" || true; fi
  if [ -z "$x" ]; then
    FAILED=1 FAILURES=$((FAILURES + 1))
    SUMMARY+=("run ${tag##*/} ($(cat "$tag.cmd")) left no summary: its subshell did not finish")
    continue
  fi
  SUMMARY+=("$(cat "$tag.line")")
  FAILED=$((FAILED | f)) PASSED=$((PASSED + p)) FAILURES=$((FAILURES + x))
done

print_summary "$START"
exit "$FAILED"
