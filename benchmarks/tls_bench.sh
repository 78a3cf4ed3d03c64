#!/usr/bin/env bash
# TLS and HTTP/2 benchmark (issue 40), Switchyard and nginx side by side in
# one run, each terminating TLS with the same ECDSA P-256 certificate, TLS
# 1.3 with the cipher suite pinned by the clients (TLS_AES_128_GCM_SHA256,
# X25519), one server thread / one nginx worker on one pinned CPU:
#
#   a. full TLS handshakes: `openssl s_time -new` (a new connection and a
#      full handshake per request, no resumption; 8 clients at once), on
#      Switchyard's /v2/health/ready and nginx's `return 200`;
#   b. kept-alive HTTPS on the same endpoints: `h2load --h1` over 16
#      connections, and HTTP/2 (`h2load`, 1 connection, 40 streams);
#   c. Switchyard only, digits-cheap V2 JSON infer over TLS: HTTP/2 with 40
#      streams on one connection vs HTTP/1.1 over 40 connections.
#
# For each run: requests (or handshakes) per second and the server's CPU
# time per request, from /proc/<pid>/stat (utime + stime) before and after
# the run. Writes benchmarks/out/tls-*.txt and benchmarks/out/tls-summary.md.
#
#   benchmarks/tls_bench.sh          full: 10 s per run
#   benchmarks/tls_bench.sh quick    4 s per run
#
# Needs the release binary (cargo build --release -p switchyard; another
# build with SWITCHYARD_BIN), nginx (with http_v2 and ssl), h2load
# (Debian nghttp2-client), openssl, curl, taskset. Everything listens on
# 127.0.0.1; every process it starts is stopped on exit; every run is
# bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE="${1:-full}"
case "$MODE" in
    full) DUR=10 ;;
    quick) DUR=4 ;;
    *) echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac
OUT=benchmarks/out
PY=.venv/bin/python
SY=${SWITCHYARD_BIN:-./target/release/switchyard}
SUITE=TLS_AES_128_GCM_SHA256
HS_CLIENTS=${HS_CLIENTS:-8}  # openssl s_time processes at once (each makes one connection at a time)
RUN_TIMEOUT=$((DUR * 3 + 30))
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.cache/onnxruntime/libonnxruntime.so.1.31.1}"

TAG=tls-bench
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

for f in "$SY" "$PY" benchmarks/nginx/tls-static.conf.template models/digits-cheap.onnx; do
    [ -e "$f" ] || die "missing $f (build: cargo build --release -p switchyard)"
done
for c in nginx h2load openssl curl taskset timeout; do
    command -v "$c" >/dev/null || die "missing command $c (apt-get install -y nginx-light nghttp2-client openssl curl)"
done
if [ ${#SERVER_CPU[@]} -gt 0 ]; then PINNING="servers (Switchyard, nginx) on CPU 1, clients (openssl, h2load) on CPU 0 (taskset)"; fi

mkdir -p "$OUT"
rm -f "$OUT"/tls-*.txt "$OUT"/tls-cpu.json
WORK=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )/switchyard-tls-bench.XXXXXX")
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- certificate
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null || die "openssl could not make the certificate"

# ---------------------------------------------------------------- servers
NG_PORT=$(free_port); SY_PORT=$(free_port); SY_ADMIN=$(free_port)
say "machine: $(nproc) CPUs, load average: $LOAD_BEFORE"
sed -e "s#@WORK@#$WORK#g" -e "s#@LISTEN_PORT@#$NG_PORT#g" -e "s#@CERT@#$WORK/cert.pem#g" \
    -e "s#@KEY@#$WORK/key.pem#g" benchmarks/nginx/tls-static.conf.template > "$WORK/nginx.conf"
chmod 755 "$WORK"
"${SERVER_CPU[@]}" nginx -p "$WORK" -c "$WORK/nginx.conf" > "$OUT/tls-nginx.log" 2>&1 &
NG_PID=$!
PIDS+=($NG_PID)

{ sy_server_toml "$SY_PORT" "$SY_ADMIN"; cat <<EOF; } > "$WORK/switchyard.toml"
tls = { cert = "$WORK/cert.pem", key = "$WORK/key.pem" }

[[models]]
name = "digits-cheap"
path = "$ROOT/models/digits-cheap.onnx"
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]
EOF
cp "$WORK/switchyard.toml" "$OUT/tls-switchyard.toml"
cp "$WORK/nginx.conf" "$OUT/tls-nginx.conf"
RUST_LOG=$NO_ACCESS_LOG "${SERVER_CPU[@]}" "$SY" serve --config "$WORK/switchyard.toml" > "$OUT/tls-switchyard.log" 2>&1 &
SY_PID=$!
PIDS+=($SY_PID)

CURL_TLS=(--cacert "$WORK/cert.pem")
wait_https() { # URL
    for _ in $(seq 1 600); do
        curl -sf --max-time 1 "${CURL_TLS[@]}" "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "$1 did not answer"
}
SY_STATIC="https://127.0.0.1:$SY_PORT/v2/health/ready"
NG_STATIC="https://127.0.0.1:$NG_PORT/"
SY_INFER="https://127.0.0.1:$SY_PORT/v2/models/digits-cheap/infer"
wait_https "$SY_STATIC"
wait_https "$NG_STATIC"

# Same protocol, suite and group on both (recorded in the summary).
negotiated() { # PORT
    echo | timeout 10 openssl s_client -connect "127.0.0.1:$1" -ciphersuites "$SUITE" -brief 2>&1 \
        | awk -F': ' '/Protocol version|Ciphersuite|Negotiated TLS1.3 group|Server Temp Key|Peer signature type/ {printf "%s%s", sep, $2; sep=", "}'
}
SY_TLS=$(negotiated "$SY_PORT"); NG_TLS=$(negotiated "$NG_PORT")
say "switchyard: $SY_TLS"
say "nginx: $NG_TLS"

BODY='{"inputs":[{"name":"X","shape":[1,64],"datatype":"FP32","data":[0,0,5,13,9,1,0,0,0,0,13,15,10,15,5,0,0,3,15,2,0,11,8,0,0,4,12,0,0,8,8,0,0,5,8,0,0,9,8,0,0,4,11,0,1,12,7,0,0,2,14,5,10,12,0,0,0,0,6,13,10,0,0,0]}]}'
printf '%s' "$BODY" > "$WORK/body.json"
curl -sf --max-time 5 "${CURL_TLS[@]}" -H 'content-type: application/json' --data-binary @"$WORK/body.json" "$SY_INFER" \
    | grep -q '"outputs"' || die "Switchyard's infer over TLS did not answer"
for v in --http1.1 --http2; do
    for u in "$SY_STATIC" "$NG_STATIC"; do
        got=$(curl -s -o /dev/null -w '%{http_version} %{http_code}' --max-time 5 "${CURL_TLS[@]}" $v "$u")
        case "$got" in "1.1 200"|"2 200") ;; *) die "$u $v: $got" ;; esac
    done
done

# ---------------------------------------------------------------- runs
server_ticks() { # switchyard|nginx -> CPU ticks of the server's processes
    local pids=$SY_PID
    [ "$1" = nginx ] && pids="$NG_PID $(pgrep -P "$NG_PID" | tr '\n' ' ')"
    for p in $pids; do cat "/proc/$p/stat"; done | awk '{s += $14 + $15} END {print s + 0}'
}
CMDS="$OUT/tls-commands.txt"
: > "$CMDS"
CPU_PARTS=()
measure() { # TARGET NAME COMMAND... (output -> $OUT/tls-NAME.txt)
    local target=$1 name=$2; shift 2
    echo "$name: $*" >> "$CMDS"
    local t0 t1
    t0=$(server_ticks "$target")
    timeout "$RUN_TIMEOUT" "$@" > "$OUT/tls-$name.txt" 2>&1 || die "run $name failed: $(tail -3 "$OUT/tls-$name.txt")"
    t1=$(server_ticks "$target")
    CPU_PARTS+=("\"$name\": {\"ticks\": $((t1 - t0)), \"clk_tck\": $(getconf CLK_TCK)}")
}
handshakes() { # TARGET NAME PORT PATH: HS_CLIENTS s_time clients at once
    local target=$1 name=$2 port=$3 path=$4
    local cmd=(openssl s_time -connect "127.0.0.1:$port" -new -time "$DUR" -www "$path" -ciphersuites "$SUITE")
    echo "$name: $HS_CLIENTS x ${CLIENT_CPU[*]} ${cmd[*]}" >> "$CMDS"
    local t0 t1 w0 w1 i clients=()
    t0=$(server_ticks "$target"); w0=$(date +%s.%N)
    for i in $(seq 1 "$HS_CLIENTS"); do
        timeout "$RUN_TIMEOUT" "${CLIENT_CPU[@]}" "${cmd[@]}" > "$OUT/tls-$name-$i.txt" 2>&1 &
        clients+=($!)
    done
    for i in "${clients[@]}"; do wait "$i" || die "s_time $name failed"; done
    t1=$(server_ticks "$target"); w1=$(date +%s.%N)
    CPU_PARTS+=("\"$name\": {\"ticks\": $((t1 - t0)), \"clk_tck\": $(getconf CLK_TCK), \"wall_s\": $(awk -v a="$w0" -v b="$w1" 'BEGIN {printf "%.3f", b - a}')}")
}
H2LOAD=("${CLIENT_CPU[@]}" h2load --tls13-ciphers="$SUITE" -D "$DUR")
warm() { timeout 60 "${CLIENT_CPU[@]}" h2load --tls13-ciphers="$SUITE" -D 1 "$@" > /dev/null 2>&1 || true; }

for target in switchyard nginx; do
    port=$SY_PORT; path=/v2/health/ready; url=$SY_STATIC
    [ "$target" = nginx ] && { port=$NG_PORT; path=/; url=$NG_STATIC; }
    say "$target: full handshakes (openssl s_time -new, $HS_CLIENTS clients), ${DUR}s"
    handshakes "$target" "handshake-$target" "$port" "$path"
    say "$target: kept-alive HTTPS/1.1, 16 connections, ${DUR}s"
    warm --h1 -c 16 "$url"
    measure "$target" "h1-static-$target" "${H2LOAD[@]}" --h1 -c 16 "$url"
    say "$target: kept-alive HTTP/2, 1 connection x 40 streams, ${DUR}s"
    warm -c 1 -m 40 "$url"
    measure "$target" "h2-static-$target" "${H2LOAD[@]}" -c 1 -m 40 "$url"
done
INFER_ARGS=(-d "$WORK/body.json" -H 'content-type: application/json')
say "switchyard: digits-cheap infer, HTTP/2 1 connection x 40 streams, ${DUR}s"
warm -c 1 -m 40 "${INFER_ARGS[@]}" "$SY_INFER"
measure switchyard "h2-infer-switchyard" "${H2LOAD[@]}" -c 1 -m 40 "${INFER_ARGS[@]}" "$SY_INFER"
say "switchyard: digits-cheap infer, HTTP/1.1 40 connections, ${DUR}s"
warm --h1 -c 40 "${INFER_ARGS[@]}" "$SY_INFER"
measure switchyard "h1-infer-switchyard" "${H2LOAD[@]}" --h1 -c 40 "${INFER_ARGS[@]}" "$SY_INFER"
(IFS=,; echo "{${CPU_PARTS[*]}}") > "$OUT/tls-cpu.json"

# ---------------------------------------------------------------- summary
case "$SY" in *debug*) BUILD="a DEBUG build (its figures mean nothing)" ;; *) BUILD="release build" ;; esac
CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" - "$OUT" <<EOF > "$OUT/tls-summary.md"
import json, os, re, subprocess, sys
from datetime import datetime, timezone
out = sys.argv[1]
cpu = json.load(open(os.path.join(out, "tls-cpu.json")))
dur = $DUR

def text(name):
    return open(os.path.join(out, f"tls-{name}.txt")).read()

def h2load(name):
    t = text(name)
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", t).group(1))
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", t)
    done, ok = int(m.group(2)), int(m.group(3))
    return rps, done, ok, done - ok

def s_time(name):
    conns = 0
    for i in range(1, $HS_CLIENTS + 1):
        m = re.search(r"(\d+) connections in [\d.]+ real seconds", text(f"{name}-{i}"))
        conns += int(m.group(1)) if m else 0
    return conns

def cpu_us(name, n):
    c = cpu[name]
    return c["ticks"] / c["clk_tck"] * 1e6 / n if n else float("nan")

def commit():
    try:
        c = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "gateway", "runtime"]).returncode
        return c + (" (+ uncommitted changes)" if dirty else "")
    except Exception:
        return "unknown"

print("## TLS and HTTP/2 (issue 40)")
print()
print(f"Generated by \`benchmarks/tls_bench.sh $MODE\` ({dur} s per run; commands in \`benchmarks/out/tls-commands.txt\`).")
print()
print(f"- Machine: $(nproc) vCPU \"$CPU_MODEL\", $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load average before the run $LOAD_BEFORE, after $LOAD_AFTER")
print(f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; commit {commit()}; binary \`$SY\`")
print("- Pinning: $PINNING")
print("- TLS: the same self-signed ECDSA P-256 certificate and key for both; TLS 1.3, suite pinned by the clients ($SUITE). Negotiated, Switchyard: $SY_TLS; nginx: $NG_TLS")
print("- Switchyard: $BUILD, \`server.threads = 1\`, access log off, rustls through Pingora; digits-cheap on 1 worker, 1 intra-op thread (\`benchmarks/out/tls-switchyard.toml\`)")
print("- nginx $(nginx -v 2>&1 | sed 's#.*/##'): 1 worker, OpenSSL, \`return 200\`, no session cache or tickets, access log off (\`benchmarks/nginx/tls-static.conf.template\`)")
print("- Clients: \`openssl s_time -new\` (OpenSSL $(openssl version | cut -d' ' -f2)), \`h2load\` ($(h2load --version | cut -d' ' -f2)). Server CPU: utime + stime of its processes from /proc over the run, divided by the requests (or handshakes) done in it")
print()
print("| run | server | answered/s | server CPU µs per request | done | failed |")
print("|---|---|---|---|---|---|")
rows = {}
for target in ("switchyard", "nginx"):
    n = s_time(f"handshake-{target}")
    us = cpu_us(f"handshake-{target}", n)
    rate = n / cpu[f"handshake-{target}"]["wall_s"]
    rows[("hs", target)] = (rate, us)
    print(f"| (a) new TLS connection per request (full handshake + GET), $HS_CLIENTS clients | {target} | {rate:,.0f} | {us:,.0f} (= {1e6 / us:,.0f} handshakes per CPU-second) | {n:,} | - |")
for kind, what in (("h1-static", "(b) kept-alive HTTPS/1.1, 16 connections, static 200"),
                   ("h2-static", "(b) kept-alive HTTP/2 over TLS, 1 connection x 40 streams, static 200")):
    for target in ("switchyard", "nginx"):
        rps, done, ok, failed = h2load(f"{kind}-{target}")
        us = cpu_us(f"{kind}-{target}", done)
        rows[(kind, target)] = (rps, us)
        print(f"| {what} | {target} | {rps:,.0f} | {us:,.1f} | {done:,} | {failed} |")
for kind, what in (("h2-infer", "(c) digits-cheap infer, HTTP/2 over TLS, 1 connection x 40 streams"),
                   ("h1-infer", "(c) digits-cheap infer, HTTPS/1.1, 40 connections")):
    rps, done, ok, failed = h2load(f"{kind}-switchyard")
    us = cpu_us(f"{kind}-switchyard", done)
    rows[(kind, "switchyard")] = (rps, us)
    print(f"| {what} | switchyard | {rps:,.0f} | {us:,.1f} | {done:,} | {failed} |")
print()
print("Switchyard over nginx (server CPU per request; > 1 means Switchyard spends more):")
print()
for kind, what in (("hs", "full handshake"), ("h1-static", "kept-alive HTTPS/1.1"), ("h2-static", "kept-alive HTTP/2")):
    s, n = rows[(kind, "switchyard")][1], rows[(kind, "nginx")][1]
    print(f"- {what}: {s / n:.2f}x")
EOF
say "summary: $OUT/tls-summary.md"
cat "$OUT/tls-summary.md"
