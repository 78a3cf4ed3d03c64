#!/usr/bin/env bash
# Prepares, on a machine with network, everything the GPU check needs on a
# GPU machine without network (benchmarks/gpu/README.md): the CUDA release
# builds, the onnxruntime-gpu library, MiniLM-L6 and its tokenizer, packed
# into parts of at most PART_MB megabytes under .gpu/ (ignored by git), so
# that each part can travel on its own. The synthetic models are generated
# there (models/generate.py, numpy only); CUDA's own libraries come from the
# GPU machine's PyTorch (nvidia-* wheels).
set -euo pipefail
cd "$(dirname "$0")/../.."
PART_MB=${PART_MB:-55}
ORT_GPU=${ORT_GPU:-1.31.1}
out=.gpu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
say() { printf '\033[1m[gpu-bundle]\033[0m %s\n' "$*"; }

say "building the CUDA release binaries"
cargo build --release -p switchyard --features cuda
cargo build --release -p switchyard-benchmarks --features cuda --bin device-bench --bin loadgen
spill=$(cargo test --release -p switchyard --features cuda --test spill_over --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "spill_over" and m.get("executable"):
        print(m["executable"])')
mkdir -p "$stage/bundle/bin" "$stage/bundle/ort" "$stage/bundle/models"
cp target/release/switchyard target/release/device-bench target/release/loadgen "$stage/bundle/bin/"
cp "$spill" "$stage/bundle/bin/spill_over"
strip "$stage"/bundle/bin/*

say "fetching onnxruntime-gpu $ORT_GPU (its CUDA 13 build)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$stage/whl" "onnxruntime-gpu==$ORT_GPU"
unzip -q -j "$stage"/whl/onnxruntime_gpu-*.whl 'onnxruntime/capi/libonnxruntime.so.*' \
    'onnxruntime/capi/libonnxruntime_providers_cuda.so' 'onnxruntime/capi/libonnxruntime_providers_shared.so' \
    -d "$stage/bundle/ort"
cp models/minilm-l6.onnx models/minilm-tokenizer.json "$stage/bundle/models/"

say "packing (xz) and splitting into ${PART_MB} MB parts"
tar -C "$stage/bundle" -cf - . | xz -6 -T0 > "$stage/bundle.tar.xz"
rm -rf "$out" && mkdir -p "$out"
split -b "${PART_MB}M" -d -a 1 "$stage/bundle.tar.xz" "$stage/part."
for p in "$stage"/part.*; do
    n=${p##*.}
    mkdir -p "$out/p$n" && mv "$p" "$out/p$n/bundle.tar.xz.$n"
done
(cd "$stage" && sha256sum bundle.tar.xz) | sed 's| .*||' > "$out/p0/bundle.sha256"
ls -la "$out"/p*
say "parts ready: carry .gpu/p0, .gpu/p1, ... one per run (benchmarks/gpu/README.md)"
