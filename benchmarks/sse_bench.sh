#!/usr/bin/env bash
# Draft-then-final benchmark: time to draft and time to final of SSE
# streams (parallel and sequential routes), side by side with the cheap
# model (digits-cheap) and the heavy model (synth-heavy) called alone, at 1
# and 16 concurrent clients. Writes benchmarks/out/sse-*.json and prints
# Markdown tables for RESULTS.md.
#
#   benchmarks/sse_bench.sh [REQUESTS]     default 600 per phase and level
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-600}"
OUT=benchmarks/out
mkdir -p "$OUT"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
say() { printf '\033[1m[sse-bench]\033[0m %s\n' "$*" >&2; }

say "building release binaries"
cargo build --release -q -p switchyard -p switchyard-benchmarks

free_port() { .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
./target/release/switchyard serve --config benchmarks/sse_bench.toml --listen "127.0.0.1:$PORT" \
    --admin-listen "127.0.0.1:$(free_port)" > "$OUT/sse-switchyard.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null 2>&1 && break
    sleep 0.1
done

for route in draft draft-seq; do
    say "route $route ($REQUESTS calls per phase and level)"
    echo "### route \`$route\`"
    echo
    ./target/release/sse-bench --addr "127.0.0.1:$PORT" --route "$route" --cheap digits-cheap \
        --heavy synth-heavy --concurrency 1,16 --requests "$REQUESTS" --dataset models/digits-test.json \
        --json-out "$OUT/sse-$route.json"
    echo
done
