#!/usr/bin/env bash
# The GPU check, run on the GPU machine from the repo root once every part
# made by benchmarks/gpu/bundle.sh is in $GPU_PARTS (benchmarks/gpu/README.md).
# Writes its logs and JSON figures to $OUT.
#   1. the device, driver and CUDA libraries found;
#   2. gateway/tests/python/test_cuda.py against the CUDA build;
#   3. spill-over from a CUDA pool to CPU workers at 2x the CUDA pool's capacity
#      (gateway/tests/spill_over.rs with SPILL_PREFERRED_DEVICE=cuda);
#   4. device-bench: CUDA pool vs bare Session::run on the GPU vs CPU pool;
#   5. MiniLM-L6 through the gateway on the GPU and on the CPU (loadgen).
set -uo pipefail
cd "$(dirname "$0")/../.."
PARTS=${GPU_PARTS:-/root/sy-gpu/parts}
GPU=${GPU_DIR:-/root/sy-gpu/bundle}
OUT=${OUT:-/tmp/gpu-out}
WORK=${WORK:-/tmp/gpu-work}
SECONDS_PER_FIGURE=${SECONDS_PER_FIGURE:-3}
mkdir -p "$OUT" "$WORK"
say() { printf '[gpu-check] %s\n' "$*" | tee -a "$OUT/steps.log"; }

if [ ! -x "$GPU/bin/switchyard" ]; then
    say "unpacking the bundle"
    cat "$PARTS"/bundle.tar.xz.* > "$PARTS/../bundle.tar.xz" || exit 1
    got=$(sha256sum "$PARTS/../bundle.tar.xz" | cut -d' ' -f1)
    [ "$got" = "$(cat "$PARTS/bundle.sha256")" ] || { say "bundle checksum mismatch"; exit 1; }
    mkdir -p "$GPU"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$PARTS/../bundle.tar.xz" "$GPU" || exit 1
fi
cp --update=none "$GPU"/models/* models/
export ORT_DYLIB_PATH="$GPU/ort/$(cd "$GPU/ort" && ls libonnxruntime.so.1.*)"
nvidia_site=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])')
cuda_libs=$(find "$nvidia_site" -name 'lib*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$GPU/ort:${cuda_libs}${LD_LIBRARY_PATH:-}"

say "1. device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)';
  echo "ORT: $ORT_DYLIB_PATH"; ls "$nvidia_site"; } > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

say "   synthetic models (models/generate.py, here)"
python3 -c '
import sys; sys.path.insert(0, "models"); import generate as g; from pathlib import Path
Xtr, Xte, ytr, yte = g.load_split()
g.build_synth_heavy(Path("models"), Xtr[:g.N_CALIBRATION]); g.build_synth_wide(Path("models"), Xtr[:g.N_CALIBRATION])' \
    >> "$OUT/steps.log" 2>&1 || say "model generation failed"
sha256sum models/*.onnx >> "$OUT/device.txt"

say "2. test_cuda.py"
SWITCHYARD_CUDA=1 SWITCHYARD_BIN="$GPU/bin/switchyard" PYTHONUNBUFFERED=1 timeout 240 \
    python3 -m pytest -q -p no:cacheprovider gateway/tests/python/test_cuda.py -rA > "$OUT/test_cuda.log" 2>&1
say "   test_cuda.py exit $?"; tail -15 "$OUT/test_cuda.log"

say "3. spill-over, CUDA pool -> CPU pool"
[ -e /work/main/gateway ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
SPILL_PREFERRED_DEVICE=cuda SPILL_CPU_WORKERS=${SPILL_CPU_WORKERS:-12} SPILL_JSON_OUT="$OUT/spill.json" \
    timeout 120 "$GPU/bin/spill_over" --nocapture > "$OUT/spill.log" 2>&1
say "   spill_over exit $? (the test's own result is in spill.log)"
tail -12 "$OUT/spill.log"

say "4. device-bench"
timeout 300 "$GPU/bin/device-bench" --models-dir models --models synth-wide,synth-heavy --batches 1,8,32 \
    --seconds "$SECONDS_PER_FIGURE" --json-out "$OUT/device-bench.json" > "$WORK/device-bench.log" 2>&1
say "   device-bench exit $?"; tail -5 "$WORK/device-bench.log"

say "5. MiniLM-L6 through the gateway, GPU vs CPU"
cat > "$WORK/minilm.toml" <<TOML
[[models]]
name = "minilm-cuda"
path = "$PWD/models/minilm-l6.onnx"
tokenizer = { path = "$PWD/models/minilm-tokenizer.json", max_length = 128 }
warmup = true
batching = { max_batch_size = 32, max_queue_delay_us = 500 }
pools = [{ name = "cuda", device = "cuda" }]
[[models]]
name = "minilm-cpu"
path = "$PWD/models/minilm-l6.onnx"
tokenizer = { path = "$PWD/models/minilm-tokenizer.json", max_length = 128 }
warmup = true
batching = { max_batch_size = 32, max_queue_delay_us = 500 }
pools = [{ name = "cpu", device = "cpu", workers = 2, intra_op_threads = 6 }]
TOML
"$GPU/bin/switchyard" serve --config "$WORK/minilm.toml" --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:18081 \
    > "$WORK/minilm-gateway.log" 2>&1 &
gw=$!
python3 -c '
import time, urllib.request
for _ in range(300):
    try:
        if urllib.request.urlopen("http://127.0.0.1:18080/v2/health/ready", timeout=1).status == 200: break
    except Exception: time.sleep(0.2)' 
for texts in 1 8 32; do
    for dev in cuda cpu; do
        timeout 30 "$GPU/bin/loadgen" --url "http://127.0.0.1:18080/v2/models/minilm-$dev/infer" --concurrency 8 \
            --duration "${SECONDS_PER_FIGURE}s" --warmup 1s --text-file benchmarks/data/sentences.txt \
            --texts-per-request "$texts" --label "minilm-$dev-$texts" --quiet \
            --json-out "$WORK/minilm-$dev-$texts.json" >> "$WORK/minilm.log" 2>&1
    done
done
kill -TERM "$gw"; wait "$gw"; say "   the gateway (CUDA and CPU pools, after load) exited with $? on SIGTERM"
{ echo "--- gateway log, head:"; head -c 2500 "$WORK/minilm-gateway.log"; } > "$WORK/minilm-gateway.head"
python3 - "$WORK" <<'PY' | tee "$OUT/minilm.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for f in sorted(out.glob("minilm-*-*.json")):
    d = json.loads(f.read_text())
    print(f.stem, {k: d.get(k) for k in ("rps", "ok", "errors", "timeouts")}, d.get("latency_us", {}))
PY
cat "$WORK/minilm-gateway.head" >> "$OUT/minilm.txt"
say "done"
