#!/usr/bin/env bash
# Exact-match cache benchmark (issue 4), in one run:
#   - cache-hit latency (open loop, 10k req/s) and hit throughput (closed loop,
#     32 clients) of Switchyard's L1 versus nginx as a POST-body-keyed proxy
#     cache in front of the FastAPI baseline, same request body;
#   - L2 (Redis) hit latency: a second Switchyard instance with a cold L1
#     reads answers that the first instance wrote to the shared Redis.
# Writes benchmarks/out/cache-*.json and benchmarks/RESULTS-cache.md.
#
#   benchmarks/cache_bench.sh          full: 10 s measured per run (~3 min)
#   benchmarks/cache_bench.sh quick    6 s per run, smaller L2 sets (~2 min)
#   SWITCHYARD_BIN=path/to/switchyard benchmarks/cache_bench.sh   another build, for A/Bs
#
# The benchmark suite (benchmarks/stages/40-cache.py) runs it with
# CACHE_OUT (folder of the JSON reports, default benchmarks/out),
# CACHE_RESULTS (the markdown summary, default benchmarks/RESULTS-cache.md)
# and CACHE_DUR / CACHE_WARM (measured window and warm-up of each run).
#
# Needs the release binaries (cargo build --release -p switchyard -p
# switchyard-benchmarks), .venv with the FastAPI baseline's packages, nginx,
# redis-server and curl. Everything listens on 127.0.0.1 only; every process
# it starts is stopped on exit; every load run is bounded by `timeout`.
#
# Pinning (>= 2 cores): every server (Switchyard, nginx + FastAPI, Redis) runs
# on CPU 1 and the load generator on CPU 0, so Switchyard and nginx get the
# same single CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE="${1:-full}"
case "$MODE" in
    full) DUR=10s; WARM=2s; L2_N=5000 ;;
    quick) DUR=6s; WARM=2s; L2_N=2000 ;;
    *) echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac
DUR=${CACHE_DUR:-$DUR}; WARM=${CACHE_WARM:-$WARM}
RATE=10000
CONNS=32
OUT=${CACHE_OUT:-benchmarks/out}
RESULTS=${CACHE_RESULTS:-benchmarks/RESULTS-cache.md}
PY=.venv/bin/python
SY=${SWITCHYARD_BIN:-./target/release/switchyard}  # another build for A/Bs
LG=./target/release/loadgen
LG_TIMEOUT=120 # seconds; hard bound of any single load run
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.cache/onnxruntime/libonnxruntime.so.1.31.1}"

TAG=cache-bench
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

for f in "$SY" "$LG" "$PY" "$ORT_DYLIB_PATH" benchmarks/nginx/proxy-cache.conf.template models/digits-cheap.onnx; do
    [ -e "$f" ] || die "missing $f (build: cargo build --release -p switchyard -p switchyard-benchmarks)"
done
for c in nginx redis-server redis-cli curl taskset timeout; do
    command -v "$c" >/dev/null || die "missing command $c (apt-get install -y nginx redis-server curl)"
done

if [ ${#SERVER_CPU[@]} -gt 0 ]; then PINNING="servers (Switchyard, nginx, FastAPI, redis-server) on CPU 1, load generator on CPU 0 (taskset)"; fi

mkdir -p "$OUT"
rm -f "$OUT"/cache-*.json "$OUT"/cache-*.log "$OUT"/cache-commands.txt
# nginx's cache files and the generated configs live on tmpfs when there is one.
WORK=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )/switchyard-cache-bench.XXXXXX")

# Value of response header $2 for POSTing body file $3 to URL $1.
post_header() {
    curl -s --max-time 5 -o /dev/null -D - -H 'content-type: application/json' --data-binary "@$3" "$1" |
        tr -d '\r' | awk -v h="$(echo "$2" | tr 'A-Z' 'a-z')" -F': ' 'tolower($1)==h {print $2}'
}
# The cache block of a Switchyard instance's /admin/stats, as JSON.
cache_stats() {
    curl -sf --max-time 5 "http://127.0.0.1:$1/admin/stats" |
        "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["cache"]))'
}
stat_field() { echo "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

CMDS="$OUT/cache-commands.txt"
# loadgen NAME ARGS...: one bounded load run, client pinned, report in $OUT/cache-NAME.json.
loadgen() {
    local name=$1; shift
    local cmd=("${CLIENT_CPU[@]}" "$LG" "$@" --label "$name" --json-out "$OUT/cache-$name.json" --quiet)
    echo "${cmd[*]}" >> "$CMDS"
    timeout "$LG_TIMEOUT" "${cmd[@]}" > /dev/null || die "loadgen run $name failed (rc $?)"
}

# ---------------------------------------------------------------- servers
REDIS_PORT=$(free_port); FA_PORT=$(free_port); NG_PORT=$(free_port)
A_PORT=$(free_port); A_ADMIN=$(free_port); B_PORT=$(free_port); B_ADMIN=$(free_port)
CAP_PORT=$(free_port); CAL_PORT=$(free_port); NG_STATUS=$(free_port); NG_LOG_PORT=$(free_port)

say "machine: $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
say "starting redis-server :$REDIS_PORT, FastAPI :$FA_PORT, nginx :$NG_PORT, Switchyard A :$A_PORT"
"${SERVER_CPU[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    > "$OUT/cache-redis.log" 2>&1 &
PIDS+=($!)
"${SERVER_CPU[@]}" "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --host 127.0.0.1 \
    --port "$FA_PORT" --workers 1 --intra-op-threads 1 > "$OUT/cache-fastapi.log" 2>&1 &
PIDS+=($!)

sed -e "s#@WORK@#$WORK#g" -e "s#@LISTEN_PORT@#$NG_PORT#g" -e "s#@UPSTREAM_PORT@#$FA_PORT#g" -e "s#@STATUS_PORT@#$NG_STATUS#g" -e "s#@LOG_PORT@#$NG_LOG_PORT#g" \
    benchmarks/nginx/proxy-cache.conf.template > "$WORK/nginx.conf"
# nginx's worker runs as nobody: it must reach the folder (nginx creates and
# chowns the cache and temp folders itself).
chmod 755 "$WORK"
"${SERVER_CPU[@]}" nginx -p "$WORK" -c "$WORK/nginx.conf" > "$OUT/cache-nginx.log" 2>&1 &
NG_PID=$!
PIDS+=($NG_PID)

# Switchyard config: one route over digits-cheap, L1 + Redis L2, one HTTP thread.
sy_config() { # PORT ADMIN_PORT
    sy_server_toml "$1" "$2"
    cat <<EOF
[repository]
path = "$ROOT/models"

[cache]
l1_max_bytes = "256MiB"
redis = { url = "redis://127.0.0.1:$REDIS_PORT", timeout_ms = 5 }

[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"
warmup = true
batching = { max_batch_size = 64, max_queue_delay_us = 200, queue_capacity = 2048 }
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]

[[routes]]
name = "cheap"
models = ["digits-cheap"]
cache = { enabled = true, ttl_s = 300 }
EOF
}
sy_config "$A_PORT" "$A_ADMIN" > "$WORK/switchyard-a.toml"
sy_config "$B_PORT" "$B_ADMIN" > "$WORK/switchyard-b.toml"
cp "$WORK/switchyard-a.toml" "$OUT/cache-switchyard-a.toml"
cp "$WORK/nginx.conf" "$OUT/cache-nginx.conf"
# Instance A: no access log (as nginx's main port). Instance B: the default
# logging, one access-log line per request (to tmpfs, as nginx's log port).
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$SY" serve --config "$WORK/switchyard-a.toml" \
    > "$OUT/cache-switchyard-a.log" 2>&1 &
A_PID=$!
PIDS+=($A_PID)
env -u RUST_LOG "${SERVER_CPU[@]}" "$SY" serve --config "$WORK/switchyard-b.toml" > "$WORK/switchyard-b.log" 2>&1 &
B_PID=$!
PIDS+=($B_PID)

for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping | grep -q PONG || die "redis-server did not start"
wait_http "http://127.0.0.1:$FA_PORT/v2/health/ready" 600
wait_http "http://127.0.0.1:$NG_PORT/v2/health/ready"
wait_http "http://127.0.0.1:$A_PORT/v2/health/ready"
wait_http "http://127.0.0.1:$B_PORT/v2/health/ready"

SY_URL="http://127.0.0.1:$A_PORT/v2/models/cheap/infer"
NG_URL="http://127.0.0.1:$NG_PORT/v2/models/digits-cheap/infer"
B_URL="http://127.0.0.1:$B_PORT/v2/models/cheap/infer"
NG_LOG_URL="http://127.0.0.1:$NG_LOG_PORT/v2/models/digits-cheap/infer"
SHAPE=(--input-shape X:1,64 --datatype FP32)

# ---------------------------------------------------------------- the exact bodies loadgen sends
# A throw-away HTTP server records what loadgen sends, so curl can send the same bytes.
mkdir -p "$WORK/bodies"
"$PY" - "$CAP_PORT" "$WORK/bodies" > /dev/null 2>&1 <<'EOF' &
import http.server, os, sys
port, folder = int(sys.argv[1]), sys.argv[2]
seen = {}
class Capture(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        name = self.path.strip("/")
        n = seen.get(name, 0)
        seen[name] = n + 1
        with open(os.path.join(folder, f"{name}-{n}.json"), "wb") as f:
            f.write(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Capture).serve_forever()
EOF
CAP_PID=$!
PIDS+=($CAP_PID)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$CAP_PORT") 2>/dev/null && break; sleep 0.1; done
timeout 30 "$LG" --url "http://127.0.0.1:$CAP_PORT/hit" --requests 1 --duration 10s "${SHAPE[@]}" \
    --distinct 1 --seed 42 --quiet > /dev/null
timeout 30 "$LG" --url "http://127.0.0.1:$CAP_PORT/check" --requests 3 --duration 10s "${SHAPE[@]}" \
    --distinct 3 --seed 99 --quiet > /dev/null
kill "$CAP_PID" 2>/dev/null || true
HIT_BODY="$WORK/bodies/hit-0.json"
[ -s "$HIT_BODY" ] || die "could not capture loadgen's request body"
BODY_BYTES=$(wc -c < "$HIT_BODY")

# ---------------------------------------------------------------- warm and verify hits
say "warming both caches with loadgen's body ($BODY_BYTES bytes) and checking that hits are hits"
first=$(post_header "$SY_URL" x-cache "$HIT_BODY")
second=$(post_header "$SY_URL" x-cache "$HIT_BODY")
[ "$second" = hit-l1 ] || die "Switchyard: second identical request answered x-cache '$second' (first '$first'), expected hit-l1"
say "  Switchyard: first x-cache=$first, second x-cache=$second"
first=$(post_header "$NG_URL" X-Cache-Status "$HIT_BODY")
second=$(post_header "$NG_URL" X-Cache-Status "$HIT_BODY")
[ "$second" = HIT ] || die "nginx: second identical request answered X-Cache-Status '$second' (first '$first'), expected HIT"
say "  nginx: first X-Cache-Status=$first, second X-Cache-Status=$second"
# The access-log variants: B gets the body from Redis, then from its L1.
first=$(post_header "$B_URL" x-cache "$HIT_BODY")
second=$(post_header "$B_URL" x-cache "$HIT_BODY")
[ "$first $second" = "hit-l2 hit-l1" ] || die "Switchyard B: answered x-cache '$first' then '$second', expected hit-l2 then hit-l1"
[ "$(post_header "$NG_LOG_URL" X-Cache-Status "$HIT_BODY")" = HIT ] || die "nginx's access-log port does not answer HIT"
# A different body must not hit nginx (the key really includes the body).
other=$(post_header "$NG_URL" X-Cache-Status "$WORK/bodies/check-0.json")
[ "$other" = MISS ] || die "nginx: a different body answered X-Cache-Status '$other', expected MISS (key does not include the body?)"
cmp -s <(curl -s --max-time 5 -H 'content-type: application/json' --data-binary "@$HIT_BODY" "$NG_URL") \
    <(curl -s --max-time 5 -H 'content-type: application/json' --data-binary "@$HIT_BODY" "http://127.0.0.1:$FA_PORT/v2/models/digits-cheap/infer") ||
    die "nginx's cached answer differs from FastAPI's"

# ---------------------------------------------------------------- generator ceiling
say "generator ceiling: loadgen against its own trivial server on CPU 1"
"${SERVER_CPU[@]}" "$LG" --serve "127.0.0.1:$CAL_PORT" --duration 90s > /dev/null 2>&1 &
CAL_PID=$!
PIDS+=($CAL_PID)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$CAL_PORT") 2>/dev/null && break; sleep 0.1; done
loadgen calibrate-closed-c32 --url "http://127.0.0.1:$CAL_PORT/v2/models/x/infer" --mode closed --concurrency 32 \
    --duration "$DUR" --warmup "$WARM" "${SHAPE[@]}" --distinct 1 --seed 42
loadgen calibrate-open --url "http://127.0.0.1:$CAL_PORT/v2/models/x/infer" --mode open --rate "$RATE" \
    --connections "$CONNS" --duration "$DUR" --warmup "$WARM" "${SHAPE[@]}" --distinct 1 --seed 42
kill "$CAL_PID" 2>/dev/null || true

# ---------------------------------------------------------------- hit benchmarks
# Server CPU per request: CPU time (user + system, all threads and, for nginx,
# master + worker) over the whole loadgen run, divided by the requests the
# server counted in that time (Switchyard: L1 hits + misses from /admin/stats;
# nginx: stub_status). Independent of the generator's own limits.
server_ticks() { # switchyard|switchyard-log|nginx|nginx-log
    local pids=$A_PID
    [ "$1" = switchyard-log ] && pids=$B_PID
    [ "${1%-log}" = nginx ] && pids="$NG_PID $(pgrep -P "$NG_PID" | tr '\n' ' ')"
    for p in $pids; do cat "/proc/$p/stat"; done | awk '{s += $14 + $15} END {print s}'
}
server_requests() { # switchyard|switchyard-log|nginx|nginx-log
    if [ "${1%-log}" = nginx ]; then
        curl -sf --max-time 5 "http://127.0.0.1:$NG_STATUS/status" | awk 'NR == 3 {print $3}'
    else
        local s; s=$(cache_stats "$([ "$1" = switchyard ] && echo "$A_ADMIN" || echo "$B_ADMIN")")
        echo $(( $(stat_field "$s" l1_hits) + $(stat_field "$s" l1_misses) ))
    fi
}
CPU_PARTS=()
hit_run() { # switchyard|nginx NAME LOADGEN-ARGS...
    local target=$1 name=$2; shift 2
    local url
    case $target in
        switchyard) url=$SY_URL ;; nginx) url=$NG_URL ;; switchyard-log) url=$B_URL ;; nginx-log) url=$NG_LOG_URL ;;
    esac
    sleep 1
    local t0 n0 t1 n1
    t0=$(server_ticks "$target"); n0=$(server_requests "$target")
    loadgen "$name" --url "$url" "$@" "${SHAPE[@]}" --distinct 1 --seed 42
    t1=$(server_ticks "$target"); n1=$(server_requests "$target")
    CPU_PARTS+=("\"$name\": {\"cpu_ticks\": $((t1 - t0)), \"clk_tck\": $(getconf CLK_TCK), \"server_requests\": $((n1 - n0))}")
}
A_STATS0=$(cache_stats "$A_ADMIN")
for target in switchyard nginx; do
    say "$target: cache hits, open loop $RATE req/s over $CONNS connections, $DUR"
    hit_run "$target" "hit-open-$target" --mode open --rate "$RATE" --connections "$CONNS" --duration "$DUR" --warmup "$WARM"
done
for target in switchyard nginx; do
    say "$target: cache hits, closed loop, 32 clients, $DUR"
    hit_run "$target" "hit-closed-c32-$target" --mode closed --concurrency 32 --duration "$DUR" --warmup "$WARM"
done
for target in switchyard-log nginx-log; do
    say "$target: cache hits with an access log, closed loop, 32 clients, $DUR"
    hit_run "$target" "hit-closed-c32-$target" --mode closed --concurrency 32 --duration "$DUR" --warmup "$WARM"
done
A_STATS1=$(cache_stats "$A_ADMIN")
(IFS=,; echo "{${CPU_PARTS[*]}}") > "$OUT/cache-server-cpu.json"
[ "$(post_header "$NG_URL" X-Cache-Status "$HIT_BODY")" = HIT ] || die "nginx no longer answers HIT after the runs"
[ "$(post_header "$SY_URL" x-cache "$HIT_BODY")" = hit-l1 ] || die "Switchyard no longer answers hit-l1 after the runs"

# ---------------------------------------------------------------- L2 hits
# Instance A computes L2_N+64 distinct bodies (misses, written to Redis in the
# background); instance B, same Redis and config, cold L1, then requests the
# first L2_N of them exactly once each, so every answer is an L2 hit.
FILL=$((L2_N + 64))
say "L2: filling Redis through instance A ($FILL distinct bodies x 2 seeds)"
for seed in 7 8; do
    loadgen "l2-fill-seed$seed" --url "$SY_URL" --mode closed --concurrency 32 --duration 60s \
        --requests "$FILL" "${SHAPE[@]}" --distinct "$FILL" --seed "$seed"
done
for b in "$WORK"/bodies/check-*.json; do
    x=$(post_header "$SY_URL" x-cache "$b")
    [ "$x" = miss ] || die "instance A: a new body answered x-cache '$x', expected miss"
done
want=$((2 * FILL + 3))
for _ in $(seq 1 300); do
    [ "$(redis-cli -p "$REDIS_PORT" dbsize)" -ge "$want" ] && break; sleep 0.1
done
keys=$(redis-cli -p "$REDIS_PORT" dbsize)
[ "$keys" -ge "$want" ] || die "Redis holds $keys keys after the fill, expected >= $want (L2 writes dropped?)"
A_STATS2=$(cache_stats "$A_ADMIN")

# B has only seen the hit body so far: its L1 is cold for every body below.
for b in "$WORK"/bodies/check-*.json; do
    x=$(post_header "$B_URL" x-cache "$b")
    [ "$x" = hit-l2 ] || die "instance B: a body computed by A answered x-cache '$x', expected hit-l2"
done
say "  instance B answered hit-l2 for the 3 bodies instance A computed"

B_STATS0=$(cache_stats "$B_ADMIN")
loadgen l2-hit-closed-c1 --url "$B_URL" --mode closed --concurrency 1 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 7
B_STATS1=$(cache_stats "$B_ADMIN")
loadgen l2-hit-closed-c8 --url "$B_URL" --mode closed --concurrency 8 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 8
B_STATS2=$(cache_stats "$B_ADMIN")
# The same bodies again: now in B's L1 (reference at the same concurrency).
loadgen l1-hit-closed-c1 --url "$B_URL" --mode closed --concurrency 1 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 7
loadgen l1-hit-closed-c8 --url "$B_URL" --mode closed --concurrency 8 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 8
B_STATS3=$(cache_stats "$B_ADMIN")
# Misses (model runs) at the same concurrency, for reference: new bodies.
loadgen miss-closed-c1 --url "$B_URL" --mode closed --concurrency 1 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 11
loadgen miss-closed-c8 --url "$B_URL" --mode closed --concurrency 8 --duration 60s \
    --requests "$L2_N" "${SHAPE[@]}" --distinct "$FILL" --seed 12
B_STATS4=$(cache_stats "$B_ADMIN")
tail -n 100 "$WORK/switchyard-b.log" > "$OUT/cache-switchyard-b.log"

"$PY" - "$OUT/cache-stats.json" <<EOF
import json, sys
j = json.loads
snap = {
    "a_before_hits": j('$A_STATS0'), "a_after_hits": j('$A_STATS1'), "a_after_fill": j('$A_STATS2'),
    "b_start": j('$B_STATS0'), "b_after_l2_c1": j('$B_STATS1'), "b_after_l2_c8": j('$B_STATS2'),
    "b_after_l1": j('$B_STATS3'), "b_after_miss": j('$B_STATS4'),
    "redis_keys_after_fill": $keys,
}
json.dump(snap, open(sys.argv[1], "w"), indent=2)
EOF

# ---------------------------------------------------------------- summary
say "writing $RESULTS"
CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
"$PY" - "$OUT" "$RESULTS" <<EOF
import json, os, subprocess, sys
from datetime import datetime, timezone
out, results = sys.argv[1], sys.argv[2]
def load(name):
    with open(os.path.join(out, f"cache-{name}.json")) as f:
        return json.load(f)
def commit():
    try:
        c = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "gateway", "runtime", "router-policies"]).returncode
        return c + (" (+ uncommitted changes)" if dirty else "")
    except Exception:
        return "unknown"
def ms(us):
    return f"{us / 1000:.3f}"
cpu = json.load(open(os.path.join(out, "cache-server-cpu.json")))
def row(name, r, what):
    lat = r["latency_us"]
    rate = r["schedule"]["achieved_rate"] if r.get("schedule") else r["rps"]
    lag = ms(r["schedule"]["send_lag_us"]["p99"]) if r.get("schedule") else "-"
    failed = r["requests"] - r["ok"]
    c = cpu.get(name)
    per = f"{c['cpu_ticks'] / c['clk_tck'] * 1e6 / c['server_requests']:.1f}" if c and c["server_requests"] else "-"
    return (f"| {what} | {rate:,.0f} | {r['rps']:,.0f} | {ms(lat['p50'])} | {ms(lat['p99'])} | "
            f"{ms(lat['p999'])} | {ms(lat['max'])} | {lag} | {per} | {r['ok']:,} | {failed} |")
st = json.load(open(os.path.join(out, "cache-stats.json")))
def delta(a, b, k):
    return st[b][k] - st[a][k]
mode = "$MODE"
L = []
L.append("# Exact-match cache benchmark (issue 4)")
L.append("")
L.append("Generated by \`benchmarks/cache_bench.sh $MODE\` (measured window $DUR per run, $WARM warm-up).")
L.append("")
L.append(f"- Machine: $(nproc) vCPU \"$CPU_MODEL\", $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"), no GPU")
L.append(f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; commit {commit()}; load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)")
L.append("- Pinning: $PINNING")
L.append("- Switchyard: release build, \`server.threads = 1\`, access log off (\`RUST_LOG=$NO_ACCESS_LOG\`) except where noted, route \`cheap\` over digits-cheap, \`[cache] l1_max_bytes = \"256MiB\"\`, Redis L2 (\`timeout_ms = 5\`); config in \`benchmarks/out/cache-switchyard-a.toml\`")
L.append("- nginx $(nginx -v 2>&1 | sed 's#.*/##'): \`worker_processes 1\`, \`proxy_cache_methods POST\`, \`proxy_cache_key \"\$request_uri|\$request_body\"\`, cache files on tmpfs, upstream keepalive, access log off (\`benchmarks/nginx/proxy-cache.conf.template\`), in front of the FastAPI baseline (1 uvicorn worker)")
L.append("- redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), same CPU as the gateways")
L.append(f"- Requests: V2 JSON infer, input X FP32 [1,64], {load('hit-open-switchyard')['body_bytes']} bytes, loadgen \`--seed 42 --distinct 1\` (one identical body: every measured request is a cache hit)")
L.append("- Latency: open loop counts from each request's scheduled send time (no coordinated omission); closed loop from the actual send")
L.append("")
L.append("## Cache hits: Switchyard L1 vs nginx proxy cache")
L.append("")
L.append("| run | sent/s | answered/s | p50 ms | p99 ms | p99.9 ms | max ms | generator send lag p99 ms | server CPU µs/request | ok | failed |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|")
for t, n in (("switchyard", "Switchyard L1 hit"), ("nginx", "nginx HIT")):
    L.append(row(f"hit-open-{t}", load(f"hit-open-{t}"), f"{n}, open loop $RATE/s, $CONNS conns"))
for t, n in (("switchyard", "Switchyard L1 hit"), ("nginx", "nginx HIT")):
    L.append(row(f"hit-closed-c32-{t}", load(f"hit-closed-c32-{t}"), f"{n}, closed loop, 32 clients"))
for t, n in (("switchyard-log", "Switchyard L1 hit, access log on"), ("nginx-log", "nginx HIT, access log on")):
    L.append(row(f"hit-closed-c32-{t}", load(f"hit-closed-c32-{t}"), f"{n}, closed loop, 32 clients"))
L.append(row("calibrate-open", load("calibrate-open"), f"generator alone: loadgen's trivial server, open loop $RATE/s, $CONNS conns"))
L.append(row("calibrate-closed-c32", load("calibrate-closed-c32"), "generator ceiling: loadgen's trivial server, closed, 32 clients"))
L.append("")
L.append("Access logs: off on both sides except in the two \"access log on\" rows (Switchyard's default, one line per request "
         "through tracing to stderr; nginx \`access_log ... combined\`; both files on tmpfs). The log-on Switchyard row is instance B, "
         "same config as A.")
L.append("")
L.append("Server CPU µs/request: user + system CPU time of the server process(es) over the whole run (warm-up included) "
         "divided by the requests the server counted in that time (Switchyard /admin/stats, nginx stub_status); "
         "1,000,000 / this is the hit throughput one CPU could sustain if the generator were not the limit.")
L.append("")
sy, ng = load("hit-closed-c32-switchyard"), load("hit-closed-c32-nginx")
so = load("hit-open-switchyard")
cal = load("calibrate-closed-c32")["rps"]
def per(name):
    c = cpu[name]
    return c["cpu_ticks"] / c["clk_tck"] * 1e6 / max(c["server_requests"], 1)
L.append(f"- Hit throughput (closed loop, 32 clients): Switchyard {sy['rps']:,.0f}/s vs nginx {ng['rps']:,.0f}/s "
         f"= {sy['rps'] / ng['rps']:.2f}x; goal (>= nginx): **{'met' if sy['rps'] >= ng['rps'] else 'not met'}**"
         f"{' (both within 10% of the generator ceiling: the generator, not the servers, limits this row)' if min(sy['rps'], ng['rps']) > 0.9 * cal else ''}.")
L.append(f"- With access logs on: Switchyard {load('hit-closed-c32-switchyard-log')['rps']:,.0f}/s vs nginx {load('hit-closed-c32-nginx-log')['rps']:,.0f}/s "
         f"({per('hit-closed-c32-switchyard-log'):.1f} vs {per('hit-closed-c32-nginx-log'):.1f} CPU µs per hit).")
L.append(f"- Server CPU per hit (closed loop): Switchyard {per('hit-closed-c32-switchyard'):.1f} µs vs nginx {per('hit-closed-c32-nginx'):.1f} µs "
         f"(capacity of one CPU: {1e6 / per('hit-closed-c32-switchyard'):,.0f} vs {1e6 / per('hit-closed-c32-nginx'):,.0f} hits/s).")
L.append(f"- Open loop at $RATE/s: Switchyard p99 {ms(so['latency_us']['p99'])} ms; goal (p99 < 1 ms): "
         f"**{'met' if so['latency_us']['p99'] < 1000 and not so['schedule']['behind'] else 'not met'}**"
         f"{' (generator fell behind the schedule)' if so['schedule']['behind'] else ''}.")
hits = delta("a_before_hits", "a_after_hits", "l1_hits")
sent = sum(load(n)["requests"] for n in ("hit-open-switchyard", "hit-closed-c32-switchyard"))
L.append(f"- Switchyard /admin/stats over the hit runs: l1_hits +{hits:,}, l1_misses +{delta('a_before_hits', 'a_after_hits', 'l1_misses')}, "
         f"stores +{delta('a_before_hits', 'a_after_hits', 'stores')} (measured requests: {sent:,}; warm-up requests are hits too). "
         f"nginx answered \`X-Cache-Status: HIT\` to curl before and after the runs.")
L.append("")
L.append("## L2 (Redis) hits: instance B with a cold L1")
L.append("")
L.append(f"Instance A computed {$FILL:,} distinct bodies per seed (misses; the answers went to Redis in the background; "
         f"Redis then held {st['redis_keys_after_fill']:,} keys). Instance B (same config, same Redis, started afterwards) then "
         f"requested $L2_N of them once each, closed loop: every answer is an L2 hit. The same bodies again are L1 hits "
         f"in B, and new bodies are misses (one digits-cheap run each), shown for reference at the same concurrency.")
L.append("")
L.append("| run | answered/s | p50 ms | p99 ms | p99.9 ms | max ms | ok | failed |")
L.append("|---|---|---|---|---|---|---|---|")
def row2(r, what):
    lat = r["latency_us"]
    return (f"| {what} | {r['rps']:,.0f} | {ms(lat['p50'])} | {ms(lat['p99'])} | {ms(lat['p999'])} | "
            f"{ms(lat['max'])} | {r['ok']:,} | {r['requests'] - r['ok']} |")
for c in (1, 8):
    L.append(row2(load(f"l2-hit-closed-c{c}"), f"B: L2 hit (Redis), {c} client{'s' if c > 1 else ''}"))
    L.append(row2(load(f"l1-hit-closed-c{c}"), f"B: L1 hit, {c} client{'s' if c > 1 else ''}"))
    L.append(row2(load(f"miss-closed-c{c}"), f"B: miss (model run), {c} client{'s' if c > 1 else ''}"))
L.append("")
for c, a, b in ((1, "b_start", "b_after_l2_c1"), (8, "b_after_l2_c1", "b_after_l2_c8")):
    n = load(f"l2-hit-closed-c{c}")["requests"]
    L.append(f"- B's /admin/stats over the L2 run with {c} client{'s' if c > 1 else ''} ({n:,} requests): "
             f"l2_hits +{delta(a, b, 'l2_hits')}, l2_misses +{delta(a, b, 'l2_misses')}, l1_hits +{delta(a, b, 'l1_hits')}, "
             f"l2_errors +{delta(a, b, 'l2_errors')}, l2_skipped +{delta(a, b, 'l2_skipped')}; breaker {st[b]['l2_breaker']}.")
L.append(f"- A's background L2 writes: {st['a_after_fill']['l2_writes']:,} written, {st['a_after_fill']['l2_writes_dropped']} dropped.")
L.append("")
# Hand-written notes between the markers survive a re-run (numbers in them may then be stale).
notes = ""
if os.path.exists(results):
    old = open(results).read()
    a, b = old.find("<!-- notes:begin -->"), old.find("<!-- notes:end -->")
    if a >= 0 and b > a:
        notes = old[a:b + len("<!-- notes:end -->")]
L.append(notes or "<!-- notes:begin -->\n<!-- notes:end -->")
L.append("")
L.append("## Commands")
L.append("")
L.append("Servers (ports are free ports picked per run):")
L.append("")
L.append("\`\`\`")
L.append("$(printf '%s ' "${SERVER_CPU[@]}")redis-server --port REDIS --bind 127.0.0.1 --save '' --appendonly no")
L.append("$(printf '%s ' "${SERVER_CPU[@]}").venv/bin/python benchmarks/baseline/fastapi_server.py --models-dir models --host 127.0.0.1 --port FASTAPI --workers 1 --intra-op-threads 1")
L.append("$(printf '%s ' "${SERVER_CPU[@]}")nginx -p WORK -c WORK/nginx.conf   # benchmarks/nginx/proxy-cache.conf.template, filled in")
L.append("RUST_LOG=$NO_ACCESS_LOG $(printf '%s ' "${SERVER_CPU[@]}")target/release/switchyard serve --config WORK/switchyard-a.toml")
L.append("$(printf '%s ' "${SERVER_CPU[@]}")target/release/switchyard serve --config WORK/switchyard-b.toml   # same, other ports, default logging")
L.append("\`\`\`")
L.append("")
L.append("Load runs, in order (reports: \`benchmarks/out/cache-<label>.json\`):")
L.append("")
L.append("\`\`\`")
L.extend(l.rstrip() for l in open(os.path.join(out, "cache-commands.txt")))
L.append("\`\`\`")
L.append("")
open(results, "w").write("\n".join(L))
print("\n".join(L))
EOF
say "done: $RESULTS and $OUT/cache-*.json"
