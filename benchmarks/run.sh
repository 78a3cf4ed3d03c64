#!/usr/bin/env bash
# Runs the benchmark suite side by side and writes benchmarks/out/*.json
# plus a summary (benchmarks/out/summary.md) to paste into RESULTS.md.
#
#   benchmarks/run.sh quick   ~5 minutes: short runs
#   benchmarks/run.sh full    longer runs
#
# Pinning: on a machine with >= 2 cores each server runs on core 1 and the
# load generator on core 0, so both servers get the same single core.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-quick}"
OUT=benchmarks/out
mkdir -p "$OUT"
PY=.venv/bin/python
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
if [ "$MODE" = full ]; then DUR=20s; WARM=3s; else DUR=6s; WARM=2s; fi
say() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }

SERVER_CPU="taskset -c 1"; CLIENT_CPU="taskset -c 0"
if [ "$(nproc)" -lt 2 ]; then SERVER_CPU=""; CLIENT_CPU=""; fi

say "building release binaries"
cargo build --release -q -p switchyard -p switchyard-benchmarks

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() {
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$1/v2/health/ready" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    say "server on port $1 did not become ready"; return 1
}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Unpinned: the pool's one worker thread has a core for the model, as the
# direct Session::run loop does; the callers run on the other core.
say "runtime benchmark (batching gain, overhead vs Session::run, cold start)"
./target/release/runtime-bench --models-dir models --mode "$MODE" --json-out "$OUT/runtime.json"

SY_PORT=$(free_port); FA_PORT=$(free_port)
$SERVER_CPU ./target/release/switchyard serve --listen "127.0.0.1:$SY_PORT" --admin-listen "127.0.0.1:$(free_port)" \
    > "$OUT/switchyard.log" 2>&1 &
PIDS+=($!)
$SERVER_CPU "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --host 127.0.0.1 --port "$FA_PORT" \
    --workers 1 --intra-op-threads 1 > "$OUT/fastapi.log" 2>&1 &
PIDS+=($!)
wait_ready "$SY_PORT"; wait_ready "$FA_PORT"

for model in digits-cheap synth-heavy; do
    for conc in 4 40; do
        for server in switchyard:$SY_PORT fastapi:$FA_PORT; do
            name=${server%%:*}; port=${server##*:}
            say "$name $model concurrency $conc"
            $CLIENT_CPU ./target/release/loadgen --url "http://127.0.0.1:$port/v2/models/$model/infer" \
                --mode closed --concurrency "$conc" --duration "$DUR" --warmup "$WARM" \
                --input-shape X:1,64 --datatype FP32 --distinct 64 --label "$name/$model/c$conc" \
                --json-out "$OUT/gateway-$name-$model-c$conc.json" --quiet > /dev/null
        done
    done
done

"$PY" benchmarks/summarize.py "$OUT" > "$OUT/summary.md"
say "summary written to $OUT/summary.md"
cat "$OUT/summary.md"
