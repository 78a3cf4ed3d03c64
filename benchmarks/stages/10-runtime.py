#!/usr/bin/env python3
"""Stage `runtime`: what the runtime delivers without HTTP, and its limits.

1. `runtime-bench` (unpinned: the pool's worker has a core for the model,
   as the direct loop has): dynamic batching gain on synth-wide, the runtime
   path vs a direct `Session::run` loop at the same batch size, cold start
   (session load) per model. The direct loop and the lone caller whose
   requests run inline are both one thread: runtime-bench runs the pair on
   its main thread, held on one CPU, round by round.
2. The raw runtime limit: `runtime-bench --section raw-limit`, pinned to the
   servers' CPU: `Session::run` in a loop at several batch sizes, one thread.
   The gateway's throughput is reported as a fraction of the best of these.
3. Cold start of the same models in onnxruntime's Python API (what the
   FastAPI and MLServer peers do for each model at start-up), for reference.

    benchmarks/stages/10-runtime.py quick|full   ->  benchmarks/out/runtime.json
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

PY_COLD_START = r"""
import json, sys, time
import onnxruntime as ort
def load(path):
    o = ort.SessionOptions(); o.intra_op_num_threads = 1; o.inter_op_num_threads = 1
    t = time.perf_counter(); ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    return (time.perf_counter() - t) * 1e3
load(sys.argv[1] + "/digits-cheap.onnx")  # the first session pays the library's own start-up
print(json.dumps({m: load(f"{sys.argv[1]}/{m}.onnx") for m in sys.argv[2:]}))
"""
MODELS = ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"]


def run(st: Stage, cmd: list[str], what: str) -> None:
    st.commands.append(shlex.join(cmd))
    st.say(what)
    r = subprocess.run(cmd, cwd=env.REPO, env=env.child_env(), stdout=subprocess.DEVNULL, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {r.returncode}")


def body(st: Stage) -> None:
    if not env.RUNTIME_BENCH.exists():
        raise RuntimeError(f"missing {env.RUNTIME_BENCH} (cargo build --release -p switchyard-benchmarks)")
    bench_json, raw_json = st.dir / "runtime-bench.json", st.dir / "raw-limit.json"
    run(st, [str(env.RUNTIME_BENCH), "--models-dir", "models", "--mode", st.mode, "--json-out", str(bench_json)],
        "runtime-bench: batching gain, runtime vs Session::run, cold start")
    st.data["bench"] = json.loads(bench_json.read_text())
    run(st, env.server_prefix() + [str(env.RUNTIME_BENCH), "--section", "raw-limit", "--models-dir", "models",
                                   "--mode", st.mode, "--json-out", str(raw_json)],
        "raw runtime limit: Session::run at several batch sizes, pinned to the servers' CPU")
    st.data["raw_limit"] = json.loads(raw_json.read_text())
    cmd = [str(env.PY), "-c", PY_COLD_START, str(env.MODELS), *MODELS]
    st.say("cold start in onnxruntime's Python API")
    r = subprocess.run(cmd, cwd=env.REPO, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"Python cold start failed: {r.stderr.strip()[-300:]}")
    st.data["python_cold_start_ms"] = json.loads(r.stdout)
    st.commands.append(".venv/bin/python -c '<InferenceSession per model, 1 thread>'")


if __name__ == "__main__":
    Stage("runtime", "Runtime: batching, overhead, raw limit, cold start").run(body)
