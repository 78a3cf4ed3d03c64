#!/usr/bin/env bash
# Live latency while a candidate is mirrored (issue 43): one Switchyard
# process, one route (`digits`, live model digits-cheap), the same load in
# every phase, the candidate switched in the same run through the admin API:
#
#   off     no candidate (DELETE /admin/rollouts/digits)
#   5%      candidate digits-heavy, share 0.05 (POST /admin/rollouts/digits)
#   100%    candidate digits-heavy, share 1.0: every call drawn
#   100%c1  the same with cpu_ceiling = 1.0: mirrors wait for an idle pool
#           but (nearly) never for spare CPU, as before the CPU ceiling
#
# The server is pinned to CPU 1 and `wrk -t1 -cCONNS --latency` to CPU 0
# (benchmarks/common.sh), one digits row per call; the phases follow each
# other in every round, in a rotated order, so drift hits them alike. Per phase: the median
# over rounds of wrk's p50 and p99, req/s, non-2xx answers, and from
# /admin/rollouts the calls mirrored and skipped (candidate busy, CPU at
# the ceiling). Mirrors only use an idle candidate pool and, below the
# candidate's cpu_ceiling (default 0.85), spare CPU; they run on the
# server's one CPU: what they cost live traffic there is what this measures.
#
#   benchmarks/rollout_bench.sh [DURATION_S] [ROUNDS] [CONNS]   default 10 s, 3 rounds, 8 connections
#
# Needs wrk and a release build (cargo build --release -p switchyard; or
# SY_BIN=path). Writes benchmarks/out/rollout/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-10}"
ROUNDS="${2:-3}"
CONNS="${3:-8}"
OUT=benchmarks/out/rollout
mkdir -p "$OUT"
rm -f "$OUT"/rows.txt
PY=.venv/bin/python
TAG=rollout-bench
SY_BIN="${SY_BIN:-target/release/switchyard}"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh
WORK=$(mktemp -d)

command -v wrk >/dev/null || die "wrk missing (apt-get install wrk)"
[ -x "$SY_BIN" ] || die "$SY_BIN missing: cargo build --release -p switchyard"
[ -f models/digits-heavy.onnx ] || die "models/digits-heavy.onnx missing: scripts/setup.sh"

"$PY" - "$WORK/post.lua" <<'PYEOF'
import json, sys
row = json.load(open("models/digits-test.json"))["X"][0]
body = json.dumps({"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row}]},
                  separators=(",", ":"))
open(sys.argv[1], "w").write('wrk.method = "POST"\n' f"wrk.body = {json.dumps(body)}\n"
                             'wrk.headers["Content-Type"] = "application/json"\n')
PYEOF

PORT=$(free_port); ADMIN=$(free_port)
{
    sy_server_toml "$PORT" "$ADMIN"
    cat <<EOF
[[models]]
name = "digits-cheap"
path = "$PWD/models/digits-cheap.onnx"
warmup = true

[[models]]
name = "digits-heavy"
path = "$PWD/models/digits-heavy.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
EOF
} > "$WORK/rollout.toml"
RUST_LOG="$NO_ACCESS_LOG" "${SERVER_CPU[@]}" "$SY_BIN" serve --config "$WORK/rollout.toml" > "$WORK/sy.log" 2>&1 &
SY_PID=$!
PIDS+=("$SY_PID")
wait_http "http://127.0.0.1:$PORT/v2/health/ready"
URL="http://127.0.0.1:$PORT/v2/models/digits/infer"
ROLLOUT="http://127.0.0.1:$ADMIN/admin/rollouts/digits"

candidate() { # off | SHARE[:CEILING]
    if [ "$1" = off ]; then
        curl -s -o /dev/null -X DELETE "$ROLLOUT" || true
    else
        local share="${1%%:*}" ceiling=""
        [ "$share" != "$1" ] && ceiling=", \"cpu_ceiling\": ${1#*:}"
        curl -sf -o /dev/null -X POST -H 'content-type: application/json' \
            -d "{\"model\": \"digits-heavy\", \"share\": $share$ceiling}" "$ROLLOUT" || die "posting the candidate failed"
    fi
}

# phase NAME SHARE: wrk for DUR seconds; appends a line to rows.txt.
phase() {
    local name="$1"
    candidate "$2"
    "${CLIENT_CPU[@]}" wrk -t1 -c"$CONNS" -d2s -s "$WORK/post.lua" "$URL" > /dev/null  # warm-up
    candidate "$2"   # a fresh comparison for the measured window
    "${CLIENT_CPU[@]}" wrk -t1 -c"$CONNS" -d"${DUR}s" --latency -s "$WORK/post.lua" "$URL" > "$WORK/wrk-$name.txt"
    curl -s "http://127.0.0.1:$ADMIN/admin/rollouts" > "$WORK/rollouts-$name.json"
    "$PY" - "$name" "$WORK/wrk-$name.txt" "$WORK/rollouts-$name.json" >> "$OUT/rows.txt" <<'PYEOF'
import json, re, sys
name, wrk, rollouts = sys.argv[1:]
text = open(wrk).read()
def ms(label):
    v, unit = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
c = json.load(open(rollouts)).get("digits", {}).get("comparison", {})
print(f"{name}\t{ms(50):.3f}\t{ms(99):.3f}\t{rps:.0f}\t{bad.group(1) if bad else 0}\t"
      f"{c.get('live_calls', 0)}\t{c.get('candidate_calls', 0)}\t{c.get('skipped_busy', 0)}\t{c.get('skipped_cpu', 0)}")
PYEOF
}

say "pinning: $PINNING; ${DUR} s per phase, $ROUNDS round(s), $CONNS connections; $SY_BIN"
# The phases in turn, the order rotated each round (off 5% 100% 100%c1,
# 5% 100% 100%c1 off, ...) so that no phase always follows the same one.
NAMES=(off 5% 100% 100%c1); SHARES=(off 0.05 1.0 1.0:1.0)
for round in $(seq 1 "$ROUNDS"); do
    say "round $round"
    for k in 0 1 2 3; do
        i=$(( (round - 1 + k) % 4 ))
        phase "${NAMES[$i]}" "${SHARES[$i]}"
    done
done
candidate off

"$PY" - "$OUT/rows.txt" "$ROUNDS" "$CONNS" <<'PYEOF' > "$OUT/summary.md"
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, p50, p99, rps, bad, live, mirrored, skipped, skipped_cpu in rows:
    by.setdefault(name, []).append((float(p50), float(p99), float(rps), int(bad), int(live), int(mirrored),
                                    int(skipped), int(skipped_cpu)))
med = lambda name, i: statistics.median(r[i] for r in by[name])
names = ["off", "5%", "100%", "100%c1"]
print("| candidate | p50 ms | p99 ms | req/s | non-2xx | mirrored / drawn (skipped busy, CPU) | p99 vs off | req/s vs off |")
print("|---|---|---|---|---|---|---|---|")
for name in names:
    mirrored = sum(r[5] for r in by[name]); busy = sum(r[6] for r in by[name]); cpu = sum(r[7] for r in by[name])
    drawn = f"{mirrored} / {mirrored + busy + cpu} ({busy}, {cpu})" if name != "off" else "-"
    print(f"| {name} | {med(name, 0):.2f} | {med(name, 1):.2f} | {med(name, 2):,.0f} | "
          f"{sum(r[3] for r in by[name])} | {drawn} | {med(name, 1) / med('off', 1):.2f}x | "
          f"{med(name, 2) / med('off', 2):.2f}x |")
spread = lambda name: f"{min(r[1] for r in by[name]):.2f}-{max(r[1] for r in by[name]):.2f}"
print(f"\nmedians over {sys.argv[2]} rounds, {sys.argv[3]} connections; every round ran the four phases in turn"
      f" (order rotated); 100%c1 = share 1.0 with cpu_ceiling 1.0; p99 range over rounds: "
      + ", ".join(f"{n} {spread(n)}" for n in names) + " ms")
PYEOF
cat "$OUT/summary.md"
