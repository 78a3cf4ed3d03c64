#!/usr/bin/env bash
# Paired A/B of two Switchyard builds on the request path (issue 42): both
# servers run at the same time, pinned to the same CPU, each loaded by its
# own `wrk -t1 -c40` (both on the other CPU) with the floor's V2 JSON body
# (one digits row to digits-cheap, built-in config). The scheduler shares
# the server CPU between the two at a millisecond grain, so whatever slows
# the machine during a round slows both; on a noisy VM, where alternating
# windows of one build differ by +-30%, the ratios below still resolve a
# few percent.
#
# Per round: requests each server answered, and each server's CPU time per
# request (/proc utime + stime over the round). The CPU per request ratio
# B/A is the figure to judge a change by (lower is better); the request
# ratio B/A follows it when both servers are CPU-bound.
#
#   benchmarks/paired_ab.sh A_BIN B_BIN [ROUNDS] [DURATION_S]   default 6 rounds of 10 s
#
# B (or A) may be the word `fastapi`: floor_bench.sh's lean FastAPI peer
# instead of a build, so that issue 42's multiple of it is read as a ratio
# of CPU per request taken at the same moment (the two are not at the same
# rate then: each gets about half the CPU). AB_LOG=off runs Switchyard with
# the access log off (default: on, as users run it). A_BIN against itself measures the method's own spread (about +-0.6%
# on the 2-vCPU VM of benchmarks/NOTES.md). Needs wrk; writes
# benchmarks/out/paired-ab/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${1:?usage: $0 A_BIN B_BIN [ROUNDS] [DURATION_S]}
B_BIN=${2:?usage: $0 A_BIN B_BIN [ROUNDS] [DURATION_S]}
ROUNDS=${3:-6}
DUR=${4:-10}
OUT=benchmarks/out/paired-ab
PY=.venv/bin/python
TAG=paired-ab
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh
command -v wrk >/dev/null || die "wrk missing (apt-get install wrk)"
for f in "$A_BIN" "$B_BIN" "$PY" models/digits-cheap.onnx; do [ "$f" = fastapi ] || [ -e "$f" ] || die "missing $f"; done
LOG_SPEC="info,pingora=warn,ort=warn"
[ "${AB_LOG:-on}" = off ] && LOG_SPEC="$NO_ACCESS_LOG"

mkdir -p "$OUT"
WORK=$(mktemp -d)
digits_wrk_script "$WORK"

start() { # NAME BINARY -> sets SERVER_PID, SERVER_URL
    local port admin
    port=$(free_port); admin=$(free_port)
    if [ "$2" = fastapi ]; then
        # floor_bench.sh's lean FastAPI peer, measured by its serving process
        "${SERVER_CPU[@]}" "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --models digits-cheap \
            --host 127.0.0.1 --port "$port" --workers 1 --intra-op-threads 1 --run-mode inline \
            > "$WORK/$1.log" 2>&1 &
        PIDS+=($!)
        wait_http "http://127.0.0.1:$port/v2/health/ready" 600
        SERVER_PID=$(pgrep -P "${PIDS[-1]}" | head -1 || true)
        SERVER_PID=${SERVER_PID:-${PIDS[-1]}}
    else
        RUST_LOG="$LOG_SPEC" "${SERVER_CPU[@]}" "$2" serve \
            --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" > "$WORK/$1.log" 2>&1 &
        SERVER_PID=$!
        PIDS+=("$SERVER_PID")
        wait_http "http://127.0.0.1:$port/v2/health/ready"
    fi
    SERVER_URL="http://127.0.0.1:$port/v2/models/digits-cheap/infer"
}
start a "$A_BIN"; A_PID=$SERVER_PID; A_URL=$SERVER_URL
start b "$B_BIN"; B_PID=$SERVER_PID; B_URL=$SERVER_URL

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# both SECONDS: loads both servers at once; wrk's reports in $WORK/wrk-{a,b}.txt
both() {
    local wrk_a
    "${CLIENT_CPU[@]}" wrk -t1 -c40 -d"$1s" -s "$WORK/post.lua" "$A_URL" > "$WORK/wrk-a.txt" &
    wrk_a=$!
    "${CLIENT_CPU[@]}" wrk -t1 -c40 -d"$1s" -s "$WORK/post.lua" "$B_URL" > "$WORK/wrk-b.txt"
    wait "$wrk_a"
}

say "pinning: $PINNING; both servers at once, $ROUNDS round(s) of ${DUR} s, access log ${AB_LOG:-on}"
both 2 # warm-up
: > "$WORK/rounds.txt"
for round in $(seq 1 "$ROUNDS"); do
    a0=$(cpu_ticks "$A_PID"); b0=$(cpu_ticks "$B_PID")
    both "$DUR"
    a1=$(cpu_ticks "$A_PID"); b1=$(cpu_ticks "$B_PID")
    echo "$round $((a1 - a0)) $((b1 - b0))" >> "$WORK/rounds.txt"
    cp "$WORK/wrk-a.txt" "$WORK/wrk-a-$round.txt"; cp "$WORK/wrk-b.txt" "$WORK/wrk-b-$round.txt"
done

"$PY" - "$WORK" "$(getconf CLK_TCK)" "$A_BIN" "$B_BIN" <<'PYEOF' > "$OUT/summary.md"
import re, statistics, sys
work, hz, a_bin, b_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def answered(path):
    text = open(path).read()
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return requests, int(bad.group(1)) if bad else 0

print(f"A = `{a_bin}`, B = `{b_bin}`\n")
print("| round | A requests | A CPU us/req | B requests | B CPU us/req | B/A requests | B/A CPU per request | non-2xx A/B |")
print("|---|---|---|---|---|---|---|---|")
cpu_ratios, request_ratios = [], []
for line in open(f"{work}/rounds.txt"):
    round_, a_ticks, b_ticks = line.split()
    (na, bad_a), (nb, bad_b) = answered(f"{work}/wrk-a-{round_}.txt"), answered(f"{work}/wrk-b-{round_}.txt")
    ua, ub = int(a_ticks) / hz * 1e6 / na, int(b_ticks) / hz * 1e6 / nb
    cpu_ratios.append(ub / ua)
    request_ratios.append(nb / na)
    print(f"| {round_} | {na} | {ua:.1f} | {nb} | {ub:.1f} | {nb / na:.3f} | {ub / ua:.3f} | {bad_a}/{bad_b} |")
print(f"\nB/A CPU per request: median {statistics.median(cpu_ratios):.3f} "
      f"(min {min(cpu_ratios):.3f}, max {max(cpu_ratios):.3f}); "
      f"B/A requests: median {statistics.median(request_ratios):.3f}")
PYEOF
cat "$OUT/summary.md"
