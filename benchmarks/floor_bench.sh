#!/usr/bin/env bash
# The request path against this machine's HTTP floor (issue 42), side by side
# in one run, each server pinned to the same CPU, `wrk -t1 -c40` on the other,
# the same V2 JSON POST body (one digits row) to every server:
#
#   nginx         nginx, one worker, `return 200` with a 100-byte JSON body
#                 (it reads and discards the request body): the floor
#   switchyard    target/release/switchyard on its built-in config (what
#                 `make run` serves), digits-cheap infer; with the access log
#                 on (the default) and off (`switchyard::access=off`)
#   fastapi       benchmarks/baseline/fastapi_server.py as lean as FastAPI
#                 gets: uvicorn with uvloop + httptools, `session.run` inline
#                 on the event loop, access log off, one worker
#
# Beside req/s, each row gives the server's system calls and context
# switches per request, counted by `perf stat` (raw_syscalls:sys_enter,
# context-switches) on the server's process over the measured window, and
# its CPU time per request (/proc utime + stime).
#
#   benchmarks/floor_bench.sh [DURATION_S] [ROUNDS]     default 10 s, 1 round
#
# With SY_BASE=/path/to/older/switchyard, that build is measured too (access
# log on), in the same rounds: the same-run A/B for a change to the path.
# SKIP_FASTAPI=1 leaves the FastAPI peer out (for quick A/Bs).
#
# Needs nginx, wrk and perf (Debian packages) and a release build
# (cargo build --release -p switchyard). Writes benchmarks/out/floor/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-10}"
ROUNDS="${2:-1}"
OUT=benchmarks/out/floor
mkdir -p "$OUT"
rm -f "$OUT"/*.txt
PY=.venv/bin/python
TAG=floor-bench
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh
WORK=$(mktemp -d)

for tool in nginx wrk perf; do command -v "$tool" >/dev/null || die "$tool missing (apt-get install nginx-light wrk linux-perf)"; done
[ -x target/release/switchyard ] || die "target/release/switchyard missing: cargo build --release -p switchyard"
[ -x target/release/pingora-floor ] || die "target/release/pingora-floor missing: cargo build --release -p switchyard-benchmarks"
[ -f models/digits-cheap.onnx ] || die "models/digits-cheap.onnx missing: scripts/setup.sh"

# One digits row as a V2 JSON body, and the wrk script that posts it.
digits_wrk_script "$WORK"

ANSWER='{"model_name":"digits-cheap","outputs":[{"name":"label","datatype":"INT64","shape":[1],"data":[7]}]}'
NGINX_PORT=$(free_port)
mkdir -p "$WORK/nginx/logs"
cat > "$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            default_type application/json;
            return 200 '$ANSWER';
        }
    }
}
EOF

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure NAME PID URL: wrk for DUR seconds while perf counts the server's
# system calls and context switches; appends a line to $OUT/rows.txt.
measure() {
    local name="$1" pid="$2" url="$3" before after
    "${CLIENT_CPU[@]}" wrk -t1 -c40 -d2s -s "$WORK/post.lua" "$url" > /dev/null  # warm-up
    before=$(cpu_ticks "$pid")
    perf stat -e raw_syscalls:sys_enter,context-switches -x, -o "$WORK/perf-$name.csv" -p "$pid" -- sleep "$DUR" &
    local perf_pid=$!
    "${CLIENT_CPU[@]}" wrk -t1 -c40 -d"${DUR}s" -s "$WORK/post.lua" "$url" > "$WORK/wrk-$name.txt"
    wait "$perf_pid"
    after=$(cpu_ticks "$pid")
    "$PY" - "$name" "$WORK/wrk-$name.txt" "$WORK/perf-$name.csv" "$((after - before))" "$(getconf CLK_TCK)" >> "$OUT/rows.txt" <<'PYEOF'
import re, sys
name, wrk, perf, ticks, hz = sys.argv[1:]
text = open(wrk).read()
requests = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
counts = {}
for line in open(perf):
    parts = line.strip().split(",")
    if len(parts) > 2 and parts[0].replace(".", "").isdigit():
        counts[parts[2]] = float(parts[0])
sys_per = counts.get("raw_syscalls:sys_enter", 0) / requests
cs_per = counts.get("context-switches", 0) / requests
cpu_us = int(ticks) / int(hz) * 1e6 / requests
print(f"{name}\t{rps:.0f}\t{sys_per:.2f}\t{cs_per:.3f}\t{cpu_us:.1f}\t{non2xx.group(1) if non2xx else 0}")
PYEOF
}

say "pinning: $PINNING; ${DUR} s per row, $ROUNDS round(s)"
"${SERVER_CPU[@]}" nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" > "$WORK/nginx.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$NGINX_PORT/"
NGINX_WORKER=$(pgrep -P "$(cat "$WORK/nginx/nginx.pid")" | head -1)

# Pingora's own floor (benchmarks/src/bin/pingora_floor.rs): the same fixed
# answer from a ProxyHttp app (as Switchyard's) and from a bare HttpServerApp.
start_probe() { # NAME MODE -> sets PROBE_PID, PROBE_URL
    local port
    port=$(free_port)
    "${SERVER_CPU[@]}" ./target/release/pingora-floor --listen "127.0.0.1:$port" --mode "$2" \
        > "$WORK/$1.log" 2>&1 &
    PROBE_PID=$!
    PIDS+=("$PROBE_PID")
    PROBE_URL="http://127.0.0.1:$port/v2/models/digits-cheap/infer"
    wait_http "$PROBE_URL"
}
start_probe pingora-proxy proxy
PP_PID=$PROBE_PID; PP_URL=$PROBE_URL
start_probe pingora-app app
PA_PID=$PROBE_PID; PA_URL=$PROBE_URL

start_switchyard() { # NAME RUST_LOG [BINARY] -> sets SY_PID, SY_URL
    local port admin bin="${3:-./target/release/switchyard}"
    port=$(free_port); admin=$(free_port)
    RUST_LOG="$2" "${SERVER_CPU[@]}" "$bin" serve \
        --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" > "$WORK/$1.log" 2>&1 &
    SY_PID=$!
    PIDS+=("$SY_PID")
    SY_URL="http://127.0.0.1:$port/v2/models/digits-cheap/infer"
    wait_http "http://127.0.0.1:$port/v2/health/ready"
}
start_switchyard sy-log "info,pingora=warn,ort=warn"
SY_LOG_PID=$SY_PID; SY_LOG_URL=$SY_URL
start_switchyard sy-nolog "$NO_ACCESS_LOG"
SY_NOLOG_PID=$SY_PID; SY_NOLOG_URL=$SY_URL
if [ -n "${SY_BASE:-}" ]; then
    start_switchyard sy-base "info,pingora=warn,ort=warn" "$SY_BASE"
    SY_BASE_PID=$SY_PID; SY_BASE_URL=$SY_URL
fi

if [ -z "${SKIP_FASTAPI:-}" ]; then
    FA_PORT=$(free_port)
    "${SERVER_CPU[@]}" "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --models digits-cheap \
        --host 127.0.0.1 --port "$FA_PORT" --workers 1 --intra-op-threads 1 --run-mode inline \
        > "$WORK/fastapi.log" 2>&1 &
    FA_PID=$!
    PIDS+=("$FA_PID")
    wait_http "http://127.0.0.1:$FA_PORT/v2/health/ready" 600
    FA_SERVER=$(pgrep -P "$FA_PID" | head -1 || true)
    FA_SERVER=${FA_SERVER:-$FA_PID}
fi

for round in $(seq 1 "$ROUNDS"); do
    say "round $round"
    measure nginx "$NGINX_WORKER" "http://127.0.0.1:$NGINX_PORT/v2/models/digits-cheap/infer"
    measure pingora-proxy "$PP_PID" "$PP_URL"
    measure pingora-app "$PA_PID" "$PA_URL"
    measure switchyard-log "$SY_LOG_PID" "$SY_LOG_URL"
    measure switchyard-nolog "$SY_NOLOG_PID" "$SY_NOLOG_URL"
    [ -z "${SY_BASE:-}" ] || measure switchyard-base "$SY_BASE_PID" "$SY_BASE_URL"
    [ -n "${SKIP_FASTAPI:-}" ] || measure fastapi-lean "$FA_SERVER" "http://127.0.0.1:$FA_PORT/v2/models/digits-cheap/infer"
done

"$PY" - "$OUT/rows.txt" <<'PYEOF' > "$OUT/summary.md"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
best = {}
for name, rps, sys_per, cs_per, cpu, bad in rows:
    if name not in best or float(rps) > float(best[name][0]):
        best[name] = (rps, sys_per, cs_per, cpu, bad)
print("| server (one CPU) | req/s | syscalls/req | context switches/req | CPU us/req | non-2xx |")
print("|---|---|---|---|---|---|")
for name in ["nginx", "pingora-proxy", "pingora-app", "switchyard-log", "switchyard-nolog", "switchyard-base", "fastapi-lean"]:
    if name in best:
        rps, s, c, cpu, bad = best[name]
        print(f"| {name} | {float(rps):,.0f} | {s} | {c} | {cpu} | {bad} |")
floor = float(best["nginx"][0])
fa = float(best["fastapi-lean"][0]) if "fastapi-lean" in best else None
for name in ["switchyard-log", "switchyard-nolog", "switchyard-base"]:
    if name not in best:
        continue
    r = float(best[name][0])
    versus = f", {r / fa:.1f}x the lean FastAPI" if fa else ""
    print(f"\n{name}: {r / floor:.1%} of nginx's return-200 rate{versus}")
if "switchyard-base" in best:
    print(f"\nswitchyard-log / switchyard-base (same run): {float(best['switchyard-log'][0]) / float(best['switchyard-base'][0]):.2f}x req/s")
PYEOF
cat "$OUT/summary.md"
