#!/usr/bin/env bash
# A/B of two Switchyard builds, side by side in one run: the same config
# (digits-cheap behind two routes, one HTTP thread), both servers pinned to
# CPU 1 (started together, measured in turns), the load generator on CPU 0.
# Two paths per round:
# - `hit`: route `cheap` with the L1 cache on and one identical body, so
#   every measured request is a cache hit (the request path without a model);
# - `run`: route `cheap-run` with no cache and 4,096 distinct bodies, so
#   every request decodes, routes, runs the model and encodes.
# Per run: requests/s, p50/p99 and the server's own CPU time per request
# (from /proc). Used for exact-repeat replay, and for the layering refactor,
# against the build before each.
#
#   benchmarks/replay_ab.sh A_BIN B_BIN [ROUNDS]    default 3 rounds, 5 s per run
#
# e.g. build the older commit in a worktree (cargo build --release -p
# switchyard), then: benchmarks/replay_ab.sh /path/to/old/switchyard
# target/release/switchyard. Writes benchmarks/out/replay-ab/ and prints a
# Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
A_BIN=${1:?usage: $0 A_BIN B_BIN [ROUNDS]}
B_BIN=${2:?usage: $0 A_BIN B_BIN [ROUNDS]}
ROUNDS=${3:-3}
DUR=5s; WARM=1s
OUT=benchmarks/out/replay-ab
PY=.venv/bin/python
LG=./target/release/loadgen
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
TAG=replay-ab
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh
for f in "$A_BIN" "$B_BIN" "$LG" "$PY" models/digits-cheap.onnx; do [ -e "$f" ] || die "missing $f"; done

mkdir -p "$OUT"
rm -f "$OUT"/*.json
config() { # PORT ADMIN
    sy_server_toml "$1" "$2"
    cat <<EOF
[repository]
path = "$ROOT/models"

[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"
warmup = true
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]

[[routes]]
name = "cheap"
models = ["digits-cheap"]
cache = { enabled = true, ttl_s = 300 }

[[routes]]
name = "cheap-run"
models = ["digits-cheap"]
cache = { enabled = false }
EOF
}
declare -A PORT PID
for side in a b; do
    PORT[$side]=$(free_port)
    config "${PORT[$side]}" "$(free_port)" > "$OUT/$side.toml"
done
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$A_BIN" serve --config "$OUT/a.toml" > "$OUT/a.log" 2>&1 &
PID[a]=$!; PIDS+=($!)
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$B_BIN" serve --config "$OUT/b.toml" > "$OUT/b.log" 2>&1 &
PID[b]=$!; PIDS+=($!)
for side in a b; do wait_http "http://127.0.0.1:${PORT[$side]}/v2/health/ready"; done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
CPU_LINES=()
for round in $(seq 1 "$ROUNDS"); do
    for path in hit run; do
        case $path in
            hit) route=cheap; distinct=1 ;;
            run) route=cheap-run; distinct=4096 ;;
        esac
        for side in a b; do
            url="http://127.0.0.1:${PORT[$side]}/v2/models/$route/infer"
            for mode in "closed --concurrency 32" "open --rate 10000 --connections 32"; do
                kind=${mode%% *}
                name="$path-$kind-$side-r$round"
                say "round $round: ${side^^} $path $kind"
                # shellcheck disable=SC2086
                timeout 60 "${CLIENT_CPU[@]}" "$LG" --url "$url" --mode $mode --duration "$WARM" \
                    --input-shape X:1,64 --datatype FP32 --distinct "$distinct" --seed 42 --quiet > /dev/null
                t0=$(ticks "${PID[$side]}")
                # shellcheck disable=SC2086
                timeout 60 "${CLIENT_CPU[@]}" "$LG" --url "$url" --mode $mode --duration "$DUR" \
                    --input-shape X:1,64 --datatype FP32 --distinct "$distinct" --seed 42 --label "$name" \
                    --json-out "$OUT/$name.json" --quiet > /dev/null
                t1=$(ticks "${PID[$side]}")
                CPU_LINES+=("\"$name\": $((t1 - t0))")
            done
        done
    done
done
(IFS=,; echo "{${CPU_LINES[*]}}") > "$OUT/cpu-ticks.json"

"$PY" - "$OUT" "$(getconf CLK_TCK)" "$A_BIN" "$B_BIN" <<'EOF'
import json, sys
from pathlib import Path
out, tck, a_bin, b_bin = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ticks = json.loads((out / "cpu-ticks.json").read_text())
print(f"A = `{a_bin}`, B = `{b_bin}`\n")
print("| run | A req/s | B req/s | B / A | A p50 / p99 ms | B p50 / p99 ms | A CPU µs/req | B CPU µs/req | B / A CPU |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sorted(out.glob("*-a-r*.json")):
    name = path.stem
    b = out / f"{name.replace('-a-', '-b-')}.json"
    ra, rb = json.loads(path.read_text()), json.loads(b.read_text())
    ca = ticks[name] / tck * 1e6 / max(ra["requests"], 1)
    cb = ticks[b.stem] / tck * 1e6 / max(rb["requests"], 1)
    la, lb = ra["latency_us"], rb["latency_us"]
    print(f"| {name.replace('-a-', ' ')} | {ra['rps']:,.0f} | {rb['rps']:,.0f} | {rb['rps'] / ra['rps']:.2f}x | "
          f"{la['p50'] / 1e3:.3f} / {la['p99'] / 1e3:.3f} | {lb['p50'] / 1e3:.3f} / {lb['p99'] / 1e3:.3f} | "
          f"{ca:.1f} | {cb:.1f} | {cb / ca:.2f}x |")
EOF
