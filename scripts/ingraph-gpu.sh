#!/usr/bin/env bash
# F8 (repro-ingraph) and F7's llama.cpp rows (repro-engines) on one NVIDIA GPU, where the
# in-graph samplers run as CUDA ops: builds the suite with llama.cpp's CUDA backend
# (subject's `cuda` feature, into target/cuda so the CPU builds stay as they are), runs both
# audits and writes their reports into OUTDIR.
#
#   scripts/ingraph-gpu.sh OUTDIR
#
# Without a CUDA toolkit or a GPU it stops in one line, before building anything. The runs
# themselves are bounded (10 min for F8, 5 min for F7); the first CUDA build of llama.cpp
# comes on top.
set -euo pipefail

usage="usage: scripts/ingraph-gpu.sh OUTDIR"
die() {
  echo "ingraph-gpu: $1" >&2
  exit "${2:-1}"
}

[ $# -eq 1 ] || die "expected one argument ($usage)" 2
case "$1" in
  -h | --help) echo "$usage"; exit 0 ;;
  -*) die "unknown option $1 ($usage)" 2 ;;
  "") die "OUTDIR is empty ($usage)" 2 ;;
esac
# Absolute, so the folder is the one named from where the script was started.
out=$(realpath -m -- "$1")
[ ! -e "$out" ] || [ -d "$out" ] || die "$out exists and is not a folder" 2

command -v nvcc > /dev/null 2>&1 || die "no CUDA toolkit: nvcc is not on PATH"
command -v nvidia-smi > /dev/null 2>&1 || die "no NVIDIA driver: nvidia-smi is not on PATH"
gpus=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null) \
  || die "nvidia-smi found no GPU (or gave no answer within 20 s)"
[ -n "$gpus" ] || die "nvidia-smi lists no GPU"

cd "$(dirname "$0")/.."
make -s deps models
cargo build --release --locked --target-dir target/cuda \
  -p repro-ingraph -p repro-engines --features subject/cuda >&2
mkdir -p "$out"
timeout 600 target/cuda/release/repro-ingraph --audit --results "$out" > /dev/null
timeout 300 target/cuda/release/repro-engines --audit --results "$out" > /dev/null
echo "ingraph-gpu: reports in $out (GPU: ${gpus//$'\n'/, })"
