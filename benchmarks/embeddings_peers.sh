#!/usr/bin/env bash
# MiniLM-L6 embeddings through OpenAI's `POST /v1/embeddings`, Switchyard vs
# the peers a user would pick instead, side by side in one run (issue 46):
#
#   switchyard  target/release/switchyard, minilm-l6 (int8), one pool worker
#               with one ONNX Runtime thread, batches of at most 256 padded
#               tokens per length bucket (SY_MAX_TOKENS), no response cache
#   tei         Hugging Face text-embeddings-inference, ONNX Runtime backend,
#               built beside the project (not by this script: see
#               benchmarks/NOTES.md "text-embeddings-inference"), serving
#               the same int8 model.onnx with the sentence-transformers files
#               of the same model (config, tokenizer, 1_Pooling)
#   infinity    `infinity_emb v2` (PyPI `infinity-emb`), when INFINITY_BIN
#               points at it, with INFINITY_ENGINE (default `torch`: the
#               sentence-transformers model in fp32, since its `optimum`
#               ONNX engine cannot load a local folder here; see NOTES)
#
# Each at 1, 8 and 32 texts per request and 4 and 40 clients, closed loop,
# the servers pinned to the same CPU and the load generator to the other;
# the texts are benchmarks/data/sentences.txt (64 real sentences, 7-28
# tokens), the same bodies for every server (loadgen --openai-model). The
# servers alternate per row, so drift hits them alike. Texts/s counts the
# responses that completed inside the measured window, whenever their
# request started (loadgen's `window_rps`): at 32 texts per request and 40
# clients a request takes seconds, and counting only requests that both
# start and end in the window undercounts the server that answers in
# arrival order (benchmarks/NOTES.md, "how much of the loss is the count").
# Beside texts/s and p99, each row gives the server's CPU time per text
# (utime + stime from /proc, sampled at the window's edges, over the texts
# answered in it): on a shared machine throughput moves with the
# neighbours' load, CPU per text much less. Before the load,
# the vectors of 8 sentences are compared between the servers (max abs
# difference).
#
#   TEI_BIN=/path/to/text-embeddings-router TEI_MODEL=/path/to/model-dir \
#   [INFINITY_BIN=/path/to/infinity_emb INFINITY_MODEL=dir] \
#       benchmarks/embeddings_peers.sh [quick|full]
#
# Writes benchmarks/out/embed-peers/*.json and summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-quick}"
OUT=benchmarks/out/embed-peers
mkdir -p "$OUT"
rm -f "$OUT"/*.json
PY=.venv/bin/python
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
if [ "$MODE" = full ]; then DUR=20; WARM=4; else DUR=8; WARM=3; fi
TAG=embed-peers
# shellcheck source=benchmarks/common.sh
. benchmarks/common.sh

[ -x "${TEI_BIN:-}" ] || die "TEI_BIN must point at a text-embeddings-router binary (see benchmarks/NOTES.md)"
[ -d "${TEI_MODEL:-}" ] || die "TEI_MODEL must be the model folder TEI serves (model.onnx + tokenizer + config)"
for f in models/minilm-l6.onnx models/minilm-tokenizer.json target/release/switchyard target/release/loadgen; do
    [ -e "$f" ] || die "$f missing: scripts/setup.sh test, then cargo build --release -p switchyard -p switchyard-benchmarks"
done

SY_PORT=$(free_port); SY_ADMIN=$(free_port); TEI_PORT=$(free_port)
CONFIG="$OUT/switchyard.toml"
{
    sy_server_toml "$SY_PORT" "$SY_ADMIN"
    cat <<TOML
[[models]]
name = "minilm-l6"
path = "$PWD/models/minilm-l6.onnx"
tokenizer = { path = "$PWD/models/minilm-tokenizer.json", max_length = 128 }
batching = { max_batch_size = ${SY_MAX_BATCH:-32}, max_batch_tokens = ${SY_MAX_TOKENS:-256}, max_queue_delay_us = 1000, queue_capacity = 2048 }
limits = { max_rows = 64 }
pools = [{ device = "cpu", workers = 1, intra_op_threads = 1 }]
warmup = true
TOML
} > "$CONFIG"

say "pinning: $PINNING"
RUST_LOG="$NO_ACCESS_LOG" "${SERVER_CPU[@]}" ./target/release/switchyard serve --config "$CONFIG" \
    > "$OUT/switchyard.log" 2>&1 &
PIDS+=($!); declare -A PID_OF; PID_OF[switchyard]=$!
"${SERVER_CPU[@]}" "$TEI_BIN" --model-id "$TEI_MODEL" --hostname 127.0.0.1 --port "$TEI_PORT" \
    --max-client-batch-size 64 --max-concurrent-requests 2048 --tokenization-workers 1 \
    > "$OUT/tei.log" 2>&1 &
PIDS+=($!); PID_OF[tei]=$!
SERVERS=("switchyard:$SY_PORT:/v1/embeddings" "tei:$TEI_PORT:/v1/embeddings")
if [ -n "${INFINITY_BIN:-}" ]; then
    INF_PORT=$(free_port)
    "${SERVER_CPU[@]}" "$INFINITY_BIN" v2 --model-id "${INFINITY_MODEL:?INFINITY_MODEL}" --served-model-name minilm-l6 \
        --engine "${INFINITY_ENGINE:-torch}" --device cpu --host 127.0.0.1 --port "$INF_PORT" \
        > "$OUT/infinity.log" 2>&1 &
    PIDS+=($!); PID_OF[infinity]=$!
    SERVERS+=("infinity:$INF_PORT:/embeddings")
fi
wait_http "http://127.0.0.1:$SY_PORT/v2/health/ready" 600
wait_http "http://127.0.0.1:$TEI_PORT/health" 600
[ -n "${INF_PORT:-}" ] && wait_http "http://127.0.0.1:$INF_PORT/health" 1200

say "the same vectors?"
"$PY" - "${SERVERS[@]}" <<'PYEOF' | tee "$OUT/agreement.txt"
import sys, json, urllib.request
import numpy as np
texts = [l.strip() for l in open("benchmarks/data/sentences.txt") if l.strip()][:8]
vecs = {}
for spec in sys.argv[1:]:
    name, port, path = spec.split(":")
    body = json.dumps({"model": "minilm-l6", "input": texts}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, {"content-type": "application/json"})
    data = json.load(urllib.request.urlopen(req, timeout=60))["data"]
    vecs[name] = np.array([d["embedding"] for d in sorted(data, key=lambda d: d["index"])], dtype=np.float32)
base = vecs.pop("switchyard")
for name, v in vecs.items():
    print(f"switchyard vs {name}: max abs difference {np.abs(base - v).max():.2e} over {base.shape}")
PYEOF

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

load() { # server port path texts clients
    local label="$1/t$4/c$5" before after t0 t1 lg
    # The window grows with the texts in flight: at 32 texts and 40
    # clients a request takes seconds and TEI answers in bursts of
    # hundreds of texts, so an 8 s window would count 3-6 bursts (+-20%,
    # benchmarks/NOTES.md); the warm-up must outlast one request.
    local dur=$(( DUR + $4 * $5 / 40 )) warm=$(( WARM + $4 * $5 / 160 ))
    say "$label (${warm} s warm-up, ${dur} s measured)"
    "${CLIENT_CPU[@]}" ./target/release/loadgen --url "http://127.0.0.1:$2$3" \
        --mode closed --concurrency "$5" --duration "${dur}s" --warmup "${warm}s" \
        --text-file benchmarks/data/sentences.txt --texts-per-request "$4" --openai-model minilm-l6 \
        --label "$label" --json-out "$OUT/${1}_t$4_c$5.json" --quiet > /dev/null &
    lg=$!
    # The server's CPU over the measured window only (after the warm-up).
    sleep "$warm"
    before=$(cpu_ticks "${PID_OF[$1]}"); t0=$(date +%s.%N)
    sleep "$dur"
    after=$(cpu_ticks "${PID_OF[$1]}"); t1=$(date +%s.%N)
    wait "$lg"
    echo $(( after - before )) "$(getconf CLK_TCK)" "$t0" "$t1" > "$OUT/${1}_t$4_c$5.cpu"
}

for texts in 1 8 32; do
    for clients in 4 40; do
        for spec in "${SERVERS[@]}"; do
            IFS=: read -r name port path <<< "$spec"
            load "$name" "$port" "$path" "$texts" "$clients"
        done
    done
done

"$PY" - "$OUT" <<'PYEOF' > "$OUT/summary.md"
import json, sys, glob, os
out = sys.argv[1]
rows = {}
for f in glob.glob(f"{out}/*_t*_c*.json"):
    r = json.load(open(f))
    name, t, c = os.path.basename(f)[:-5].rsplit("_", 2)
    ticks, hz, t0, t1 = open(f[:-5] + ".cpu").read().split()
    # Responses completed inside the window (loadgen's window_rps; older
    # reports without it: rps), and the CPU sampled at the window's edges.
    r["rps"] = r.get("window_rps") or r["rps"]
    texts = r["rps"] * (float(t1) - float(t0)) * int(t[1:])
    r["cpu_ms_per_text"] = int(ticks) / int(hz) * 1e3 / max(1.0, texts)
    rows.setdefault((int(t[1:]), int(c[1:])), {})[name] = r
names = sorted({n for v in rows.values() for n in v}, key=lambda n: (n != "switchyard", n))
peers = [n for n in names if n != "switchyard"]
head = "| texts/req | clients | " + " | ".join(f"{n} texts/s (p99 ms) [CPU ms/text]" for n in names)
head += " | " + " | ".join(f"vs {p} texts/s [CPU]" for p in peers) + " | errors |"
print(head)
print("|" + "---|" * (3 + len(names) + len(peers)))
for (t, c), v in sorted(rows.items()):
    cells = []
    for n in names:
        r = v.get(n)
        cells.append("-" if r is None else
                     f"{r['rps'] * t:,.0f} ({r['latency_us']['p99'] / 1000:.1f}) [{r['cpu_ms_per_text']:.2f}]")
    ratio = []
    for p in peers:
        a, b = v.get("switchyard"), v.get(p)
        ratio.append("-" if not (a and b and b["rps"]) else
                     f"{a['rps'] / b['rps']:.2f}x [{b['cpu_ms_per_text'] / a['cpu_ms_per_text']:.2f}x]")
    errs = sum(sum(r["errors"].values()) + r["timeouts"] + r["connection_errors"] for r in v.values())
    print(f"| {t} | {c} | " + " | ".join(cells) + " | " + " | ".join(ratio) + f" | {errs} |")
PYEOF
cat "$OUT/agreement.txt" "$OUT/summary.md"
