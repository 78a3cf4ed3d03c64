#!/usr/bin/env bash
# Reverse-proxy overhead benchmark (issue 5), in one run: the same V2 infer
# requests (JSON, digits-cheap, X FP32 [1,64]) sent
#   - directly to the FastAPI baseline,
#   - through a Switchyard prefix route (/fa/ -> FastAPI),
#   - through nginx as a plain reverse proxy (/fa/ -> FastAPI),
# each as an open loop at a fixed rate (latency at equal load) and a closed
# loop (throughput). The proxies' own CPU time per request is measured from
# /proc. Writes benchmarks/out/proxy-*.json and benchmarks/out/proxy-summary.md.
#
#   benchmarks/proxy_bench.sh          full: 10 s measured per run, each run twice
#   benchmarks/proxy_bench.sh quick    5 s per run, once
#
# Needs the release binaries (cargo build --release -p switchyard -p
# switchyard-benchmarks), .venv with the FastAPI baseline's packages, nginx
# and curl. Everything listens on 127.0.0.1; every process it starts is
# stopped on exit; every load run is bounded by `timeout`.
#
# Pinning (>= 2 cores): FastAPI, Switchyard and nginx on CPU 1, the load
# generator on CPU 0: each proxy shares the upstream's CPU, as a sidecar does.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE="${1:-full}"
case "$MODE" in
    full) DUR=10s; WARM=2s; REPEAT=2 ;;
    quick) DUR=5s; WARM=1s; REPEAT=1 ;;
    *) echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac
RATE=500
CONNS=16
CONC=16
OUT=benchmarks/out
PY=.venv/bin/python
SY=${SWITCHYARD_BIN:-./target/release/switchyard}  # another build for A/Bs
LG=./target/release/loadgen
LG_TIMEOUT=120
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.cache/onnxruntime/libonnxruntime.so.1.31.1}"

TAG=proxy-bench
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

for f in "$SY" "$LG" "$PY" benchmarks/nginx/plain-proxy.conf.template models/digits-cheap.onnx; do
    [ -e "$f" ] || die "missing $f (build: cargo build --release -p switchyard -p switchyard-benchmarks)"
done
for c in nginx curl taskset timeout; do
    command -v "$c" >/dev/null || die "missing command $c (apt-get install -y nginx curl)"
done

if [ ${#SERVER_CPU[@]} -gt 0 ]; then PINNING="servers (FastAPI, Switchyard, nginx) on CPU 1, load generator on CPU 0 (taskset)"; fi

mkdir -p "$OUT"
rm -f "$OUT"/proxy-*.json "$OUT"/proxy-*.log "$OUT"/proxy-commands.txt
WORK=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )/switchyard-proxy-bench.XXXXXX")

# ---------------------------------------------------------------- servers
FA_PORT=$(free_port); NG_PORT=$(free_port); NG_STATUS=$(free_port); SY_PORT=$(free_port); SY_ADMIN=$(free_port)
say "machine: $(nproc) CPUs, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"${SERVER_CPU[@]}" "$PY" benchmarks/baseline/fastapi_server.py --models-dir models --models digits-cheap \
    --host 127.0.0.1 --port "$FA_PORT" --workers 1 --intra-op-threads 1 > "$OUT/proxy-fastapi.log" 2>&1 &
PIDS+=($!)

sed -e "s#@WORK@#$WORK#g" -e "s#@LISTEN_PORT@#$NG_PORT#g" -e "s#@UPSTREAM_PORT@#$FA_PORT#g" \
    -e "s#@STATUS_PORT@#$NG_STATUS#g" benchmarks/nginx/plain-proxy.conf.template > "$WORK/nginx.conf"
chmod 755 "$WORK"
"${SERVER_CPU[@]}" nginx -p "$WORK" -c "$WORK/nginx.conf" > "$OUT/proxy-nginx.log" 2>&1 &
NG_PID=$!
PIDS+=($NG_PID)

{ sy_server_toml "$SY_PORT" "$SY_ADMIN"; cat <<EOF; } > "$WORK/switchyard.toml"
[[upstreams]]
name = "fastapi"
addrs = ["127.0.0.1:$FA_PORT"]
health = { path = "/v2/health/ready" }

[[prefix_routes]]
name = "fastapi"
prefix = "/fa/"
upstream = "fastapi"
EOF
cp "$WORK/switchyard.toml" "$OUT/proxy-switchyard.toml"
cp "$WORK/nginx.conf" "$OUT/proxy-nginx.conf"
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$SY" serve --config "$WORK/switchyard.toml" > "$OUT/proxy-switchyard.log" 2>&1 &
SY_PID=$!
PIDS+=($SY_PID)

wait_http "http://127.0.0.1:$FA_PORT/v2/health/ready" 600
wait_http "http://127.0.0.1:$NG_PORT/fa/v2/health/ready"
wait_http "http://127.0.0.1:$SY_PORT/fa/v2/health/ready"

DIRECT_URL="http://127.0.0.1:$FA_PORT/v2/models/digits-cheap/infer"
SY_URL="http://127.0.0.1:$SY_PORT/fa/v2/models/digits-cheap/infer"
NG_URL="http://127.0.0.1:$NG_PORT/fa/v2/models/digits-cheap/infer"
SHAPE=(--input-shape X:1,64 --datatype FP32 --distinct 64 --seed 42)

# The three paths must give the same answer bytes.
BODY='{"inputs":[{"name":"X","shape":[1,64],"datatype":"FP32","data":[0,0,5,13,9,1,0,0,0,0,13,15,10,15,5,0,0,3,15,2,0,11,8,0,0,4,12,0,0,8,8,0,0,5,8,0,0,9,8,0,0,4,11,0,1,12,7,0,0,2,14,5,10,12,0,0,0,0,6,13,10,0,0,0]}]}'
answer() { curl -sf --max-time 5 -H 'content-type: application/json' -d "$BODY" "$1"; }
direct=$(answer "$DIRECT_URL") || die "FastAPI did not answer"
[ "$(answer "$SY_URL")" = "$direct" ] || die "Switchyard's answer differs from FastAPI's"
[ "$(answer "$NG_URL")" = "$direct" ] || die "nginx's answer differs from FastAPI's"
say "all three paths give FastAPI's answer"

# ---------------------------------------------------------------- runs
CMDS="$OUT/proxy-commands.txt"
proxy_ticks() { # direct|switchyard|nginx -> CPU ticks of the proxy's processes
    local pids=""
    case $1 in
        switchyard) pids=$SY_PID ;;
        nginx) pids="$NG_PID $(pgrep -P "$NG_PID" | tr '\n' ' ')" ;;
        direct) echo 0; return ;;
    esac
    for p in $pids; do cat "/proc/$p/stat"; done | awk '{s += $14 + $15} END {print s + 0}'
}
CPU_PARTS=()
run() { # TARGET NAME LOADGEN-ARGS...
    local target=$1 name=$2; shift 2
    local url
    case $target in direct) url=$DIRECT_URL ;; switchyard) url=$SY_URL ;; nginx) url=$NG_URL ;; esac
    timeout "$LG_TIMEOUT" "${CLIENT_CPU[@]}" "$LG" --url "$url" "$@" --duration "$WARM" "${SHAPE[@]}" --quiet \
        > /dev/null || die "warm-up of $name failed"
    local cmd=("${CLIENT_CPU[@]}" "$LG" --url "$url" "$@" --duration "$DUR" "${SHAPE[@]}" \
        --label "$name" --json-out "$OUT/proxy-$name.json" --quiet)
    echo "${cmd[*]}" >> "$CMDS"
    local t0 t1
    t0=$(proxy_ticks "$target")
    timeout "$LG_TIMEOUT" "${cmd[@]}" > /dev/null || die "load run $name failed"
    t1=$(proxy_ticks "$target")
    CPU_PARTS+=("\"$name\": {\"ticks\": $((t1 - t0)), \"clk_tck\": $(getconf CLK_TCK)}")
}
for round in $(seq 1 "$REPEAT"); do
    for target in direct switchyard nginx; do
        say "round $round: $target, open loop $RATE req/s over $CONNS connections, $DUR"
        run "$target" "open-$target-r$round" --mode open --rate "$RATE" --connections "$CONNS"
    done
    for target in direct switchyard nginx; do
        say "round $round: $target, closed loop $CONC clients, $DUR"
        run "$target" "closed-$target-r$round" --mode closed --concurrency "$CONC"
    done
done
(IFS=,; echo "{${CPU_PARTS[*]}}") > "$OUT/proxy-cpu.json"

# ---------------------------------------------------------------- summary
CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
"$PY" - "$OUT" "$REPEAT" <<EOF > "$OUT/proxy-summary.md"
import json, os, subprocess, sys
from datetime import datetime, timezone
out, repeat = sys.argv[1], int(sys.argv[2])
cpu = json.load(open(os.path.join(out, "proxy-cpu.json")))
def load(name):
    return json.load(open(os.path.join(out, f"proxy-{name}.json")))
def commit():
    try:
        c = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "gateway", "runtime", "router-policies"]).returncode
        return c + (" (+ uncommitted changes)" if dirty else "")
    except Exception:
        return "unknown"
ms = lambda us: f"{us / 1000:.3f}"
print("## Reverse-proxy overhead: FastAPI direct vs Switchyard prefix route vs nginx (issue 5)")
print()
print(f"Generated by \`benchmarks/proxy_bench.sh $MODE\` ($DUR measured per run after $WARM warm-up, {repeat} round(s), targets interleaved).")
print()
print(f"- Machine: $(nproc) vCPU \"$CPU_MODEL\", $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), no GPU; load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)")
print(f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; commit {commit()}")
print("- Pinning: $PINNING")
print("- FastAPI baseline: 1 uvicorn worker, digits-cheap, 1 intra-op thread")
print("- Switchyard: release build, \`server.threads = 1\`, access log off, prefix route \`/fa/\` -> FastAPI (\`benchmarks/out/proxy-switchyard.toml\`)")
print("- nginx $(nginx -v 2>&1 | sed 's#.*/##'): 1 worker, upstream keepalive 64, access log off (\`benchmarks/nginx/plain-proxy.conf.template\`)")
print("- Requests: V2 JSON infer, X FP32 [1,64], 64 distinct bodies (\`loadgen --distinct 64 --seed 42\`); open loop latency counts from the scheduled send time")
print()
print("| run | target | answered/s | p50 ms | p99 ms | p99.9 ms | p50 over direct ms | p99 over direct ms | proxy CPU µs/request | ok | failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in range(1, repeat + 1):
    for kind in ("open", "closed"):
        base = load(f"{kind}-direct-r{r}")["latency_us"]
        for target in ("direct", "switchyard", "nginx"):
            name = f"{kind}-{target}-r{r}"
            rep = load(name)
            lat = rep["latency_us"]
            c = cpu[name]
            per = f"{c['ticks'] / c['clk_tck'] * 1e6 / rep['requests']:.1f}" if target != "direct" and rep["requests"] else "-"
            what = f"open {$RATE}/s, {$CONNS} conns" if kind == "open" else f"closed, {$CONC} clients"
            over50 = "-" if target == "direct" else f"{(lat['p50'] - base['p50']) / 1000:+.3f}"
            over99 = "-" if target == "direct" else f"{(lat['p99'] - base['p99']) / 1000:+.3f}"
            print(f"| {what} (round {r}) | {target} | {rep['rps']:,.0f} | {ms(lat['p50'])} | {ms(lat['p99'])} | "
                  f"{ms(lat['p999'])} | {over50} | {over99} | {per} | {rep['ok']:,} | {rep['requests'] - rep['ok']} |")
EOF
say "summary: $OUT/proxy-summary.md"
cat "$OUT/proxy-summary.md"
