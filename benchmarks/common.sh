# Shared helpers of the scenario scripts (cache_bench.sh, proxy_bench.sh,
# sse_bench.sh, text_bench.sh, replay_ab.sh). Source it after setting TAG
# (the prefix of every message) and PY (the venv's python):
#
#   TAG=cache-bench; PY=.venv/bin/python; . benchmarks/common.sh
#
# What it gives:
#   say MSG / die MSG        progress on stderr; die exits 1
#   SERVER_CPU / CLIENT_CPU  taskset prefixes (empty arrays on < 2 CPUs),
#                            PINNING says which in words
#   PIDS + a cleanup trap    processes added to PIDS are stopped on exit
#                            (TERM, then KILL after 5 s); WORK, when set to
#                            a folder, is removed with them
#   free_port                a free TCP port on loopback
#   wait_http URL [TRIES]    waits (0.1 s a try, 300 by default) for a 2xx
#   sy_server_toml PORT ADMIN the `[server]` section of a benchmarked
#                            Switchyard: one HTTP thread, a 1 s shutdown grace
#   NO_ACCESS_LOG            RUST_LOG with the access log off (as nginx runs)
#   digits_wrk_script DIR    writes DIR/body.json (one digits row as a V2
#                            JSON body) and DIR/post.lua (wrk posting it)

say() { printf '\033[1m[%s]\033[0m %s\n' "$TAG" "$*" >&2; }
die() { printf '\033[1;31m[%s] FAILED:\033[0m %s\n' "$TAG" "$*" >&2; exit 1; }

SERVER_CPU=(taskset -c 1); CLIENT_CPU=(taskset -c 0)
PINNING="servers on CPU 1, load generator on CPU 0 (taskset)"
if [ "$(nproc)" -lt 2 ]; then SERVER_CPU=(); CLIENT_CPU=(); PINNING="none (fewer than 2 CPUs)"; fi

PIDS=()
WORK=""
cleanup() {
    local rc=$?
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    [ -n "$WORK" ] && rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_http() { # URL [tries of 0.1 s]
    for _ in $(seq 1 "${2:-300}"); do
        curl -sf --max-time 1 "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "$1 did not answer"
}

sy_server_toml() { # PORT ADMIN_PORT
    cat <<EOF
[server]
listen = "127.0.0.1:$1"
admin_listen = "127.0.0.1:$2"
threads = 1
shutdown_grace_s = 1

EOF
}

NO_ACCESS_LOG="info,pingora=warn,ort=warn,switchyard::access=off"

digits_wrk_script() { # DIR
    "$PY" - "$1" <<'PYEOF'
import json, sys
folder = sys.argv[1]
d = json.load(open("models/digits-test.json"))
body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": d["X"][0]}]}
text = json.dumps(body, separators=(",", ":"))
open(f"{folder}/body.json", "w").write(text)
open(f"{folder}/post.lua", "w").write(
    'wrk.method = "POST"\n'
    f"wrk.body = {json.dumps(text)}\n"
    'wrk.headers["Content-Type"] = "application/json"\n')
PYEOF
}
