#!/usr/bin/env bash
# Draft-then-final benchmark: time to draft and time to final of SSE
# streams (parallel and sequential routes), side by side with the cheap
# model (digits-cheap) and the heavy model (synth-heavy) called alone, at 1
# and 16 concurrent clients. Writes benchmarks/out/sse-*.json and prints
# Markdown tables for RESULTS.md.
#
#   benchmarks/sse_bench.sh [REQUESTS]     default 600 per phase and level
#   SWITCHYARD_BIN=path/to/switchyard benchmarks/sse_bench.sh   another build, for A/Bs
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-600}"
OUT=benchmarks/out
mkdir -p "$OUT"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
PY=.venv/bin/python
TAG=sse-bench
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

say "building release binaries"
cargo build --release -q -p switchyard -p switchyard-benchmarks

PORT=$(free_port)
"${SWITCHYARD_BIN:-./target/release/switchyard}" serve --config benchmarks/sse_bench.toml --listen "127.0.0.1:$PORT" \
    --admin-listen "127.0.0.1:$(free_port)" > "$OUT/sse-switchyard.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$PORT/v2/health/ready"

for route in draft draft-seq; do
    say "route $route ($REQUESTS calls per phase and level)"
    echo "### route \`$route\`"
    echo
    ./target/release/sse-bench --addr "127.0.0.1:$PORT" --route "$route" --cheap digits-cheap \
        --heavy synth-heavy --concurrency 1,16 --requests "$REQUESTS" --dataset models/digits-test.json \
        --json-out "$OUT/sse-$route.json"
    echo
done
