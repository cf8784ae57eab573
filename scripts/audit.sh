#!/usr/bin/env bash
# make audit / make audit-fixes: every finding on every build named, as numbered steps, two at
# a time (JOBS), each step's wall time in results/timing/steps.<builds>.tsv (git-ignored).
#
#   scripts/audit.sh [--results DIR] [--candle] [--upstream] BUILD...
#
# Each step is one repro run (`repro-<finding> --audit --results DIR ...`) on one build; its
# reports land in DIR and its stdout is dropped (it repeats the text report). --candle adds
# candle's runs (on the first build named); --upstream adds, after every step, the standalone
# reproducers against each build (recorded under results/upstream/) and the ISSUE.md files.
# Progress goes to stderr: a line when a step starts and ends, and every 30 s the steps still
# running with their elapsed time, so no step is silent for long. A failed step stops the
# audit with its last stderr line, after the steps already running finish.
#
# The builds must be built (make build) and the models fetched (make models); the Makefile
# does both first.

set -euo pipefail
cd "$(dirname "$0")/.."

RESULTS=results
CANDLE=0
UPSTREAM=0
BUILDS=()
while [ $# -gt 0 ]; do
  case $1 in
    --results) RESULTS=$2; shift 2 ;;
    --candle) CANDLE=1; shift ;;
    --upstream) UPSTREAM=1; shift ;;
    -*) echo "audit: unknown flag $1" >&2; exit 2 ;;
    *) BUILDS+=("$1"); shift ;;
  esac
done
[ ${#BUILDS[@]} -gt 0 ] || { echo "audit: name at least one build" >&2; exit 2; }

JOBS=${JOBS:-2}
BUILDGEN=target/release/buildgen
LOGS=target/audit
TIMING=results/timing
mkdir -p "$RESULTS" "$LOGS" "$TIMING"

# F4's arguments beyond `--audit --results DIR` on a build: GAUGE_ARGS_<tag> from the Makefile
# (a patched build runs its release's), where PREREG's F4 addenda give each budget.
gauge_args() {
  local var="GAUGE_ARGS_${1%%+*}"
  echo "${!var:-}"
}
# Longest first, so the two slots stay busy to the end.
FINDINGS=(gauge scope sortpoison ingraph engines clone edges copy)
# Steps that decode a model run alone: llama.cpp's CPU threads wait for each other by spinning,
# so two decoding steps (or one beside any other busy step) on 2 cores each leave a thread
# spinning for one that is not scheduled, and both crawl. The other steps run JOBS at a time.
decodes() {
  case $1 in
    *repro-gauge*|*repro-scope*|*repro-ingraph*) return 0 ;;
    *) return 1 ;;
  esac
}

# One step per line: label, then the command (binary path and arguments), tab-separated.
STEPS=$(mktemp)
trap 'rm -f "$STEPS"' EXIT
for b in "${BUILDS[@]}"; do
  bin="$("$BUILDGEN" workspace "$b")/target/release"
  for f in "${FINDINGS[@]}"; do
    extra=""
    [ "$f" = gauge ] && extra=$(gauge_args "$b")
    printf 'repro-%s on %s\t%s/repro-%s --audit --results %s %s\n' "$f" "$b" "$bin" "$f" "$RESULTS" "$extra" >> "$STEPS"
  done
  printf 'repro-clone with ledger-penalties on %s\t%s/repro-clone --sampler ledger --audit --results %s\n' "$b" "$bin" "$RESULTS" >> "$STEPS"
  printf 'repro-ingraph on gemma3 on %s\t%s/repro-ingraph --model gemma3 --draws 0 --audit --results %s\n' "$b" "$bin" "$RESULTS" >> "$STEPS"
done
if [ "$CANDLE" = 1 ]; then
  bin="$("$BUILDGEN" workspace "${BUILDS[0]}")/target/release"
  printf 'repro-engines with candle\t%s/repro-engines --engine candle --audit --results %s\n' "$bin" "$RESULTS" >> "$STEPS"
  for m in smollm2 gemma3; do
    printf 'repro-scope with candle on %s\t%s/repro-scope --engine candle --model %s --audit --results %s\n' "$m" "$bin" "$m" "$RESULTS" >> "$STEPS"
  done
  printf 'repro-gauge with candle\t%s/repro-gauge --engine candle --audit %s --results %s\n' "$bin" "${CANDLE_GAUGE_ARGS:-}" "$RESULTS" >> "$STEPS"
fi
# The decoding steps first (each alone), then the rest two at a time.
ORDERED=$(mktemp)
trap 'rm -f "$STEPS" "$ORDERED"' EXIT
for pass in decoding other; do
  while IFS=$'\t' read -r label cmd; do
    if decodes "$cmd"; then d=decoding; else d=other; fi
    if [ "$d" = "$pass" ]; then printf '%s\t%s\n' "$label" "$cmd"; fi
  done < "$STEPS"
done > "$ORDERED"
mv "$ORDERED" "$STEPS"
TOTAL=$(wc -l < "$STEPS")
TAG=$(IFS=-; echo "${BUILDS[*]}")
TIMES="$TIMING/steps.$TAG.tsv"
: > "$TIMES"

# run_step K LABEL CMD: one step, its output in target/audit/, its time in $TIMES.
run_step() {
  local k=$1 label=$2 cmd=$3 log
  log="$LOGS/$(printf %02d "$k")-$(echo "$label" | tr ' /' '__').err"
  echo "[$k/$TOTAL] $label" >&2
  local t0=$SECONDS
  # shellcheck disable=SC2086
  if ! $cmd < /dev/null > /dev/null 2> "$log"; then
    echo "[$k/$TOTAL] $label FAILED after $((SECONDS - t0)) s: $(tail -n1 "$log")" >&2
    return 1
  fi
  printf '%s\t%s\n' "$label" $((SECONDS - t0)) >> "$TIMES"
  echo "[$k/$TOTAL] $label done in $((SECONDS - t0)) s" >&2
}

# The pool: up to JOBS steps at once, a heartbeat every 30 s.
declare -A RUNNING=()
FAILED=0
k=0
last_beat=$SECONDS
reap() {
  local pid
  for pid in "${!RUNNING[@]}"; do
    if ! kill -0 "$pid" 2> /dev/null; then
      wait "$pid" || FAILED=1
      unset "RUNNING[$pid]"
    fi
  done
}
heartbeat() {
  if [ $((SECONDS - last_beat)) -ge 30 ] && [ ${#RUNNING[@]} -gt 0 ]; then
    local pid what=()
    for pid in "${!RUNNING[@]}"; do what+=("${RUNNING[$pid]}"); done
    echo "       still running ($((SECONDS / 60))m$((SECONDS % 60))s in): $(IFS=';'; echo "${what[*]}")" >&2
    last_beat=$SECONDS
  fi
}
# A decoding step waits for every running step and holds both slots while it runs.
ALONE=""
while IFS=$'\t' read -r label cmd; do
  k=$((k + 1))
  limit=$JOBS
  if decodes "$cmd"; then limit=1; fi
  while [ ${#RUNNING[@]} -ge "$limit" ] || { [ -n "$ALONE" ] && [ ${#RUNNING[@]} -gt 0 ]; }; do
    sleep 1
    reap
    heartbeat
    [ ${#RUNNING[@]} -gt 0 ] || ALONE=""
  done
  [ "$FAILED" = 0 ] || break
  run_step "$k" "$label" "$cmd" < /dev/null &
  RUNNING[$!]="$label"
  ALONE=""
  if decodes "$cmd"; then ALONE=$!; fi
done < "$STEPS"
while [ ${#RUNNING[@]} -gt 0 ]; do
  sleep 1
  reap
  heartbeat
done
[ "$FAILED" = 0 ] || { echo "audit: a step failed (logs in $LOGS/)" >&2; exit 1; }

if [ "$UPSTREAM" = 1 ]; then
  echo "[upstream] the standalone reproducers against ${BUILDS[*]}" >&2
  target/release/upstream check --results "$RESULTS" --record results/upstream "${BUILDS[@]}" >&2
fi
echo "audit: $TOTAL steps in $((SECONDS / 60)) min $((SECONDS % 60)) s (per step: $TIMES)" >&2
