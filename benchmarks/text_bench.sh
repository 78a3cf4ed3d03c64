#!/usr/bin/env bash
# Text-embedding benchmark: Switchyard (minilm-l3, minilm-l6, and the `minilm`
# route over both) vs the FastAPI + tokenizers + onnxruntime baseline, side by
# side in one run, closed loop at 4 and 40 clients, one real sentence per
# request (benchmarks/data/sentences.txt, 64 sentences, 7-28 tokens), JSON.
#
#   benchmarks/text_bench.sh quick   ~3 minutes
#   benchmarks/text_bench.sh full    longer runs
#
# Both servers run pinned to core 1 with one model thread each, the load
# generator on core 0 (as benchmarks/run.sh). No response cache on either side:
# the figures are model serving, not cache hits. Needs `scripts/setup.sh test`
# (text models, baseline packages). Writes benchmarks/out/text/*.json and
# benchmarks/out/text/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-quick}"
OUT=benchmarks/out/text
mkdir -p "$OUT"
rm -f "$OUT"/*.json
PY=.venv/bin/python
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
if [ "$MODE" = full ]; then DUR=20s; WARM=4s; else DUR=8s; WARM=3s; fi
# The route runs twice per concurrency, with these budgets in x-latency-budget-ms.
ROUTE_BUDGETS="${ROUTE_BUDGETS:-25 2000}"
TAG=text-bench
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

for f in models/minilm-l3.onnx models/minilm-l6.onnx models/minilm-tokenizer.json; do
    [ -f "$f" ] || { say "$f missing: run scripts/setup.sh test"; exit 1; }
done

say "building release binaries"
cargo build --release -q -p switchyard -p switchyard-benchmarks

CONFIG="$OUT/switchyard-text.toml"
{
    for m in minilm-l3:1 minilm-l6:2; do
        cat <<TOML
[[models]]
name = "${m%%:*}"
path = "$PWD/models/${m%%:*}.onnx"
tokenizer = { path = "$PWD/models/minilm-tokenizer.json", max_length = 128 }
batching = { max_batch_size = 32, max_queue_delay_us = 1000, queue_capacity = 1024 }
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]
quality = ${m##*:}
warmup = true

TOML
    done
    cat <<TOML
[[routes]]
name = "minilm"
models = ["minilm-l3", "minilm-l6"]
budget_ms = { default = 100, max = 5000 }
policy = { type = "latency_budget" }
TOML
} > "$CONFIG"

SY_PORT=$(free_port); SY_ADMIN=$(free_port); FA_PORT=$(free_port)
"${SERVER_CPU[@]}" ./target/release/switchyard serve --config "$CONFIG" --listen "127.0.0.1:$SY_PORT" \
    --admin-listen "127.0.0.1:$SY_ADMIN" > "$OUT/switchyard.log" 2>&1 &
PIDS+=($!)
"${SERVER_CPU[@]}" "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --models minilm-l3,minilm-l6 \
    --host 127.0.0.1 --port "$FA_PORT" --workers 1 --intra-op-threads 1 > "$OUT/fastapi.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$SY_PORT/v2/health/ready"; wait_http "http://127.0.0.1:$FA_PORT/v2/health/ready" 600

load() { # name port model conc [budget ms]
    local label="$1/$3/c$4" extra=()
    if [ -n "${5:-}" ]; then label="$1/$3@$5/c$4"; extra=(--header "x-latency-budget-ms: $5"); fi
    say "$label"
    "${CLIENT_CPU[@]}" ./target/release/loadgen --url "http://127.0.0.1:$2/v2/models/$3/infer" \
        --mode closed --concurrency "$4" --duration "$DUR" --warmup "$WARM" \
        --text-file benchmarks/data/sentences.txt --label "$label" "${extra[@]}" \
        --json-out "$OUT/${label//\//_}.json" --quiet > /dev/null
}

for conc in 4 40; do
    for model in minilm-l3 minilm-l6; do
        load switchyard "$SY_PORT" "$model" "$conc"
        load fastapi "$FA_PORT" "$model" "$conc"
    done
    for budget in $ROUTE_BUDGETS; do
        curl -sf "http://127.0.0.1:$SY_ADMIN/admin/stats" > "$OUT/stats-before-minilm@$budget-c$conc.json"
        load switchyard "$SY_PORT" minilm "$conc" "$budget"
        curl -sf "http://127.0.0.1:$SY_ADMIN/admin/stats" > "$OUT/stats-after-minilm@$budget-c$conc.json"
    done
done
curl -sf "http://127.0.0.1:$SY_ADMIN/admin/stats" > "$OUT/stats-final.json"

"$PY" benchmarks/text_summary.py "$OUT" > "$OUT/summary.md"
say "summary written to $OUT/summary.md"
cat "$OUT/summary.md"
