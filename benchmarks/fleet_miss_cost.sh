#!/usr/bin/env bash
# What fleet-wide coalescing (routes[].cache.fleet_coalesce) costs on a
# miss, side by side in one run: one gateway (CPU 1) with a real
# redis-server as L2, two routes over digits-cheap that differ only in
# fleet_coalesce, distinct bodies so every request is a miss (L1, L2, then
# the model; the fleet route also sets and deletes its Redis marker). The
# load generator (CPU 0) measures the two routes in turns.
#
#   benchmarks/fleet_miss_cost.sh [BIN] [ROUNDS]   default target/release/switchyard, 3 rounds
#
# Prints a Markdown table: req/s, p50/p99 and server CPU per request.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${1:-target/release/switchyard}
ROUNDS=${2:-3}
DUR=5s; WARM=1s
OUT=benchmarks/out/fleet-miss
PY=.venv/bin/python
LG=./target/release/loadgen
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
TAG=fleet-miss
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh
for f in "$BIN" "$LG" "$PY" models/digits-cheap.onnx; do [ -e "$f" ] || die "missing $f"; done
command -v redis-server > /dev/null || die "redis-server is not installed (scripts/setup.sh test)"

mkdir -p "$OUT"
rm -f "$OUT"/*.json
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no > "$OUT/redis.log" 2>&1 &
PIDS+=($!)
PORT=$(free_port)
{
    sy_server_toml "$PORT" "$(free_port)"
    cat <<EOF
[repository]
path = "$ROOT/models"

[cache]
redis = { url = "redis://127.0.0.1:$REDIS_PORT" }

[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"
warmup = true
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]

[[routes]]
name = "plain"
models = ["digits-cheap"]
cache = { ttl_s = 60 }

[[routes]]
name = "fleet"
models = ["digits-cheap"]
cache = { ttl_s = 60, fleet_coalesce = true }
EOF
} > "$OUT/switchyard.toml"
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$BIN" serve --config "$OUT/switchyard.toml" > "$OUT/switchyard.log" 2>&1 &
PID=$!; PIDS+=($!)
wait_http "http://127.0.0.1:$PORT/v2/health/ready"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
CPU_LINES=()
seed=1
for round in $(seq 1 "$ROUNDS"); do
    for route in plain fleet; do
        name="$route-r$round"
        say "round $round: $route"
        url="http://127.0.0.1:$PORT/v2/models/$route/infer"
        # A new seed per run: every body is new to L1 and to Redis.
        timeout 60 "${CLIENT_CPU[@]}" "$LG" --url "$url" --concurrency 32 --duration "$WARM" \
            --input-shape X:1,64 --datatype FP32 --distinct 1000000 --seed $((seed++)) --quiet > /dev/null
        t0=$(ticks "$PID")
        timeout 60 "${CLIENT_CPU[@]}" "$LG" --url "$url" --concurrency 32 --duration "$DUR" \
            --input-shape X:1,64 --datatype FP32 --distinct 1000000 --seed $((seed++)) --label "$name" \
            --json-out "$OUT/$name.json" --quiet > /dev/null
        t1=$(ticks "$PID")
        CPU_LINES+=("\"$name\": $((t1 - t0))")
    done
done
(IFS=,; echo "{${CPU_LINES[*]}}") > "$OUT/cpu-ticks.json"

"$PY" - "$OUT" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
from pathlib import Path
out, tck = Path(sys.argv[1]), int(sys.argv[2])
ticks = json.loads((out / "cpu-ticks.json").read_text())
print("| round | plain req/s | fleet req/s | fleet / plain | plain p50 / p99 ms | fleet p50 / p99 ms | plain CPU µs/req | fleet CPU µs/req |")
print("|---|---|---|---|---|---|---|---|")
for path in sorted(out.glob("plain-r*.json")):
    r = path.stem.split("-")[1]
    p, f = json.loads(path.read_text()), json.loads((out / f"fleet-{r}.json").read_text())
    cp = ticks[f"plain-{r}"] / tck * 1e6 / max(p["requests"], 1)
    cf = ticks[f"fleet-{r}"] / tck * 1e6 / max(f["requests"], 1)
    lp, lf = p["latency_us"], f["latency_us"]
    print(f"| {r} | {p['rps']:,.0f} | {f['rps']:,.0f} | {f['rps'] / p['rps']:.2f}x | "
          f"{lp['p50'] / 1e3:.3f} / {lp['p99'] / 1e3:.3f} | {lf['p50'] / 1e3:.3f} / {lf['p99'] / 1e3:.3f} | "
          f"{cp:.1f} | {cf:.1f} |")
EOF
