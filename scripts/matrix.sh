#!/usr/bin/env bash
# make matrix: every distinct llama.cpp revision of the release table (crates/builds/releases.tsv)
# built through buildgen, and on each the findings that need no model: F1 (repro-clone --audit:
# the readout, the exhaustive sweep, clone equivalence of every stateful sampler the release
# offers), F2 (repro-sortpoison --audit), F6 (repro-edges --audit), F7's llama.cpp rows
# (repro-engines --audit), F9 (repro-copy --audit) and F8 (repro-ingraph --audit on SmolLM2,
# the one finding here that decodes a model; `make models` first), each with its controls;
# then every standalone reproducer of upstream/llama.cpp/ (`upstream record`, into upstream/).
# Reports go to results/matrix/ under the revision's name; then crates/matrix turns them into
# the affected-range table, the plot and the quoted source changes.
#
#   scripts/matrix.sh                 build what is missing, run every revision, write the table
#   SHARD=i/N scripts/matrix.sh       only revisions i, i+N, ... (llama.cpp order, from 1); the
#                                     table is written from whatever reports the folder holds
#   REVISIONS="b4240 b10200" scripts/matrix.sh   only the revisions named
#   scripts/matrix.sh --build-only    build (or check the cache of) every revision, run nothing
#   scripts/matrix.sh --table-only    only the table, from the reports and status lines the folder
#                                     holds (after copying the results/matrix/ of several shards
#                                     into one)
#
# A revision that buildgen refuses or that does not compile gets a status line with the first
# error line, and the matrix goes on. Builds are cached under target/builds/<crate version>/, so
# a rerun only compiles what changed. JOBS (default 2) revisions run their findings at once.
#
# Runs are cached too. Every finding is deterministic (the same binary with the same arguments
# writes the same bytes), so a finding whose binary and arguments hash as they did at its last
# run, and whose reports are still there with the bytes that run wrote, is not run again:
# $STATUS/<revision>.<finding>.key holds the input hash (binary, arguments, valgrind's version)
# and each report's sha256. FORCE=1 runs every finding again regardless.

set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${RESULTS:-results}/matrix
STATUS=$OUT/status
# Seconds per build and per run, one file per revision (git-ignored: they depend on the machine
# and its load, and the reports must not).
TIMING=$OUT/timing
LOGS=target/matrix
JOBS=${JOBS:-2}
BUILDGEN=target/release/buildgen
BINS=(repro-clone repro-sortpoison repro-edges repro-engines repro-copy repro-ingraph)
# Arguments beyond --audit, per finding, as the matrix runs it on every revision (PREREG, the
# release-matrix addenda, state each one's power): F1's sweep over alphabets 2 to 4 with
# a^L <= 2^14 (455,527 sequences; the audit's is 3,740,518), F2's fuzzer with a tenth of the
# audit's chains, F8's draw row at 300 draws (the audit's is 4,000).
extra_args() {
  case $1 in
    repro-clone) echo "--sweep-bits 14 --sweep-max-alphabet 4" ;;
    repro-sortpoison) echo "--fuzz-chains 10000" ;;
    repro-ingraph) echo "--draws 300" ;;
  esac
}

mkdir -p "$OUT" "$STATUS" "$TIMING" "$LOGS"
cargo build --release --locked --quiet -p buildgen >&2

# changes.txt quotes each revision's vendored sampler file from cargo's registry; a revision
# built on another machine (a shard) or in an earlier session may not be unpacked here, so the
# crates of every revision with a build status of ok are fetched (downloads, nothing compiled)
# before the table is written.
fetch_sources() {
  local name ws
  for name in $(cut -f1,3 "$STATUS"/*.build.tsv 2>/dev/null | awk '$2 == "ok" {print $1}'); do
    ws=$("$BUILDGEN" workspace "$name" 2> /dev/null) || continue
    cargo fetch --locked --quiet --manifest-path "$ws/Cargo.toml" >&2 || echo "matrix: could not fetch the sources of $name" >&2
  done
}

table() {
  cargo build --release --locked --quiet -p matrix >&2
  fetch_sources
  cat "$STATUS"/*.build.tsv 2>/dev/null | sort > "$OUT/builds.tsv" || true
  cat "$STATUS"/*.runs.tsv 2>/dev/null | sort > "$OUT/runs-failed.tsv" || true
  target/release/matrix "$OUT"
}

if [ "${1:-}" = --table-only ]; then
  table
  exit 0
fi

# REVISIONS="b4240 b10200 ..." runs only those (each still resolved and checked by buildgen).
names=${REVISIONS:-$("$BUILDGEN" names ${SHARD:+--shard "$SHARD"})}

first_error() {
  grep -m1 -E '^error' "$1" || tail -n1 "$1" || true
}

# Phase 1, one revision at a time (cargo already uses both cores): build, or find the cache.
built=()
for name in $names; do
  log=$LOGS/build.$name.log
  if ! ws=$("$BUILDGEN" workspace "$name" 2> "$log"); then
    printf '%s\t\trefused\t%s\n' "$name" "$(first_error "$log")" > "$STATUS/$name.build.tsv"
    echo "matrix: $name refused: $(first_error "$log")" >&2
    continue
  fi
  crate=$(basename "$ws")
  # The root workspace is the release its lockfile pins.
  [ "$ws" = "$PWD" ] && crate=$(grep -A1 '^name = "llama-cpp-sys-2"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
  args=()
  for b in "${BINS[@]}"; do args+=(--bin "$b"); done
  echo "matrix: building $name ($ws)" >&2
  started=$SECONDS
  if ! cargo build --release --locked --manifest-path "$ws/Cargo.toml" "${args[@]}" > "$log" 2>&1; then
    printf '%s\t%s\tbuild-failed\t%s\n' "$name" "$crate" "$(first_error "$log")" > "$STATUS/$name.build.tsv"
    echo "matrix: $name does not build: $(first_error "$log")" >&2
    continue
  fi
  printf '%s\t%s\tok\t\n' "$name" "$crate" > "$STATUS/$name.build.tsv"
  printf 'build\t%s\n' $((SECONDS - started)) > "$TIMING/$name.tsv"
  built+=("$name=$ws/target/release")
done

if [ "${1:-}" = --build-only ]; then
  echo "matrix: ${#built[@]} revisions built in $SECONDS s (seconds per build: $TIMING/)" >&2
  exit 0
fi

# Phase 2: the findings, JOBS revisions at a time. A finding that exits non-zero is recorded
# in the revision's status line; its report is then missing and the table says so.
# The reports each finding writes, by stem: <stem>.<revision>.{json,txt}.
stems_of() {
  case $1 in
    repro-clone) echo "clone clone-stateful" ;;
    repro-sortpoison) echo "sortpoison sortpoison-guard" ;;
    repro-edges) echo "edges" ;;
    repro-engines) echo "engines" ;;
    repro-copy) echo "copy" ;;
    repro-ingraph) echo "ingraph" ;;
  esac
}

# The files of `stems_of $1` for revision $2 that exist, relative to $OUT.
reports_of() {
  local stem ext
  for stem in $(stems_of "$1"); do
    for ext in json txt; do
      [ -f "$OUT/$stem.$2.$ext" ] && echo "$stem.$2.$ext"
    done
  done
  return 0
}

run_revision() {
  local name=${1%%=*} bin=${1#*=} b
  local status_dir
  status_dir=$(realpath -m "$STATUS")
  rm -f "$STATUS/$name.runs.tsv"
  sed -i '/^run\t/d' "$TIMING/$name.tsv" 2>/dev/null || true
  for b in $BINS_LIST; do
    local started=$SECONDS key=$status_dir/$name.$b.key input
    # What the reports depend on: the binary, its arguments, and valgrind (F1's memcheck
    # probe reports differently where valgrind is missing).
    input=$( { sha256sum < "$bin/$b"; extra_args "$b"; valgrind --version 2>/dev/null || echo "no valgrind"; } \
      | sha256sum | cut -d' ' -f1)
    if [ "${FORCE:-0}" = 0 ] && [ -f "$key" ] && [ "$(head -n1 "$key")" = "input $input" ] \
       && [ "$(tail -n +2 "$key" | wc -l)" -gt 0 ] \
       && (cd "$OUT" && tail -n +2 "$key" | sha256sum --check --status); then
      printf 'run\t%s\tcached\n' "$b" >> "$TIMING/$name.tsv"
      continue
    fi
    # A report is its last run's or absent: this finding's reports go before it runs again.
    rm -f "$key"
    reports_of "$b" "$name" | (cd "$OUT" && xargs -r rm -f)
    # A finding that decodes a model holds the decode lock while it runs: llama.cpp's CPU
    # threads spin while they wait for each other, so two decoding runs on 2 cores slow each
    # other down many times over; the other findings of the other revision go on meanwhile.
    local lock=()
    [ "$b" = repro-ingraph ] && lock=(flock "$LOGS/decode.lock")
    # shellcheck disable=SC2046
    if "${lock[@]}" "$bin/$b" --audit --results "$OUT" $(extra_args "$b") > "$LOGS/run.$name.$b.out" 2> "$LOGS/run.$name.$b.err"; then
      if [ -n "$(reports_of "$b" "$name")" ]; then
        { echo "input $input"; reports_of "$b" "$name" | (cd "$OUT" && xargs sha256sum); } > "$key"
      else
        echo "matrix: $b on $name wrote no report under its name" >&2
        printf '%s\t%s\t%s\n' "$name" "$b" "exit 0 but no report named $name" >> "$STATUS/$name.runs.tsv"
      fi
    else
      echo "matrix: $b failed on $name: $(first_error "$LOGS/run.$name.$b.err")" >&2
      printf '%s\t%s\t%s\n' "$name" "$b" "$(first_error "$LOGS/run.$name.$b.err")" >> "$STATUS/$name.runs.tsv"
      # A failed run's partial reports are no data.
      reports_of "$b" "$name" | (cd "$OUT" && xargs -r rm -f)
    fi
    printf 'run\t%s\t%s\n' "$b" $((SECONDS - started)) >> "$TIMING/$name.tsv"
  done
  # The standalone C reproducers of upstream/llama.cpp/ need no Rust controls: they decide the
  # cells where the suite's controls cannot run (before llama_sampler_init, b4718).
  local started=$SECONDS
  if ! target/release/upstream record --into "$OUT/upstream" "$name" > "$LOGS/run.$name.upstream.out" 2>&1; then
    echo "matrix: the reproducers failed on $name: $(first_error "$LOGS/run.$name.upstream.out")" >&2
    printf '%s\t%s\t%s\n' "$name" upstream "$(first_error "$LOGS/run.$name.upstream.out")" >> "$STATUS/$name.runs.tsv"
  fi
  printf 'run\tupstream\t%s\n' $((SECONDS - started)) >> "$TIMING/$name.tsv"
  echo "matrix: ran $name" >&2
}
cargo build --release --locked --quiet -p upstream >&2
export -f run_revision first_error extra_args stems_of reports_of
export OUT LOGS STATUS TIMING
export BINS_LIST="${BINS[*]}"
printf '%s\n' "${built[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_revision "$1"' _ {}

# Phase 3: the table, from every status line and report the folder holds.
table
echo "matrix: ${#built[@]} revisions built and run in $SECONDS s (seconds per step: $TIMING/)" >&2
