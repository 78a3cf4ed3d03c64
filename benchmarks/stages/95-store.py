#!/usr/bin/env python3
"""Stage `store`: cold start from the model store (benchmarks/store_cold_start.py).

A gateway whose only models are a Triton-layout repository in a real
S3-compatible server (moto, on loopback) is started and timed from process
start to its first answer, for digits-cheap and MiniLM-L6, with an empty
disk cache (pulled from the store) and a warm one; then MiniLM-L6's model
file is downloaded by Switchyard's store (`store-pull`) and by boto3's own
`download_file` from the same server, alternating.

    benchmarks/stages/95-store.py quick|full   ->  benchmarks/out/store.json

Goals (the model-store issue, after Everinfer's figures): first answer under
65 ms for digits from a warm cache and under 1 s for MiniLM-L6 from the
store; download at least as fast as boto3.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402


def body(st: Stage) -> None:
    for module in ("moto", "boto3"):
        if importlib.util.find_spec(module) is None:
            st.not_run(f"{module} is missing (scripts/setup.sh test installs it)")
    if not (env.MODELS / "minilm-l6.onnx").is_file():
        st.not_run("models/minilm-l6.onnx is missing (scripts/setup.sh text)")
    runs = 3 if st.mode == "quick" else 7
    out = st.dir / "store-cold-start.json"
    cmd = [str(env.PY), "benchmarks/store_cold_start.py", "--runs", str(runs), "--json-out", str(out)]
    st.commands.append(" ".join(cmd[1:]))
    rc = run_child(cmd, 900, cwd=env.REPO, env=env.child_env())
    if rc != 0:
        raise RuntimeError(f"store_cold_start.py exited with {rc}")
    result = json.loads(out.read_text())
    st.data["result"] = result
    rows = []
    for model, figures in result["models"].items():
        for cache in ("empty", "warm"):
            f = figures[f"{cache}_cache_ms"]
            rows.append([model, f"{figures['model_bytes'] / 1e6:.1f}", cache, f["min"], f["median"], f["max"]])
    download = result["download"]
    ours, boto = download["switchyard_mb_per_s"], download["boto3_mb_per_s"]
    st.data["tables"] = [
        {"title": "Process start to first answer from a Triton repository in S3 (moto), ms:",
         "columns": ["model", "MB", "disk cache", "min", "median", "max"], "rows": rows,
         "note": f"{runs} runs each; 'empty': pulled from the store; 'warm': the same cache folder, store up."},
        {"title": f"Download of {download['object']}, MB/s:",
         "columns": ["client", "min", "median", "max"],
         "rows": [["Switchyard store (store-pull)", ours["min"], ours["median"], ours["max"]],
                  ["boto3 download_file", boto["min"], boto["median"], boto["max"]]],
         "note": f"alternating, {runs} runs each; both at their default part size and concurrency."},
    ]
    digits_warm = result["models"]["digits-cheap"]["warm_cache_ms"]["median"]
    minilm_cold = result["models"]["minilm-l6"]["empty_cache_ms"]["median"]
    st.data["findings"] = [
        {"what": "digits-cheap first answer, warm cache (goal < 65 ms)", "result": f"{digits_warm} ms",
         "ok": digits_warm < 65, "reason_key": "store.start"},
        {"what": "MiniLM-L6 first answer, pulled from the store (goal < 1 s)", "result": f"{minilm_cold} ms",
         "ok": minilm_cold < 1000, "reason_key": "store.start"},
        {"what": "model download vs boto3 (same object, same server)",
         "result": f"{ours['median']} vs {boto['median']} MB/s ({download['ratio_median']:.2f}x)",
         "ok": download["ratio_median"] >= 1.0, "reason_key": "store.download"},
    ]


if __name__ == "__main__":
    Stage("store", "Model store: cold start and download").run(body)
