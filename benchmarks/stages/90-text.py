#!/usr/bin/env python3
"""Stage `text`: a real transformer scenario (benchmarks/text_bench.sh):
MiniLM-L3 (cheap) and MiniLM-L6 (heavy) sentence embeddings from BYTES
text, Switchyard vs the FastAPI + tokenizers + onnxruntime baseline at 4 and
40 clients, plus the `minilm` latency-budget route over both models with a
tight and a loose budget.

    benchmarks/stages/90-text.py quick|full   ->  benchmarks/out/text.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402

MODELS = ("minilm-l3", "minilm-l6")


def route_mix(folder: Path, target: str, conc: int) -> str:
    """The `minilm` route's decisions during one run: 'model share, ...'."""
    def counts(name: str) -> dict:
        path = folder / name
        c: dict = {}
        if path.exists():
            for d in json.loads(path.read_text()).get("decisions", []):
                if d["route"] == "minilm":
                    key = d["model"] if d["model"] != "none" else f"shed ({d['reason']})"
                    c[key] = c.get(key, 0) + d["count"]
        return c
    before, after = counts(f"stats-before-{target}-c{conc}.json"), counts(f"stats-after-{target}-c{conc}.json")
    mix = {m: after[m] - before.get(m, 0) for m in after if after[m] - before.get(m, 0) > 0}
    total = sum(mix.values())
    return ", ".join(f"{m} {100 * n / total:.0f}%" for m, n in sorted(mix.items())) if total else "-"


def body(st: Stage) -> None:
    for f in ("minilm-l3.onnx", "minilm-l6.onnx", "minilm-tokenizer.json"):
        if not (env.MODELS / f).exists():
            st.not_run(f"models/{f} is missing (scripts/setup.sh test fetches the text models)")
    st.settings = {"duration_s": 20 if st.mode == "full" else 8, "warmup_s": 4 if st.mode == "full" else 3,
                   "concurrency": [4, 40], "route_budgets_ms": [25, 2000]}
    cmd = ["benchmarks/text_bench.sh", st.mode]
    st.commands.append(" ".join(cmd))
    rc = run_child(cmd, 1500, cwd=env.REPO, env=env.child_env())
    if rc != 0:
        raise RuntimeError(f"text_bench.sh exited with {rc}")
    runs = {}
    for path in st.dir.glob("*.json"):
        if path.name.startswith("stats-"):
            continue
        d = json.loads(path.read_text())
        server, target, conc = d["label"].split("/")
        errors = sum(d.get("errors", {}).values()) + d.get("connection_errors", 0)
        runs[f"{server}/{target}/{int(conc[1:])}"] = {"rps": d["rps"], "p50_ms": d["latency_us"]["p50"] / 1e3,
                                                     "p99_ms": d["latency_us"]["p99"] / 1e3, "non_2xx": errors}
    st.data["runs"] = runs
    rows, findings, series = [], [], []
    for conc in (4, 40):
        for model in MODELS:
            sy, fa = runs.get(f"switchyard/{model}/{conc}"), runs.get(f"fastapi/{model}/{conc}")
            if not sy or not fa:
                continue
            r = sy["rps"] / fa["rps"] if fa["rps"] else None
            rows.append([model, conc, f"{sy['rps']:.1f}", f"{fa['rps']:.1f}", f"{r:.2f}x" if r else "-",
                         f"{sy['p50_ms']:.1f} / {sy['p99_ms']:.1f}", f"{fa['p50_ms']:.1f} / {fa['p99_ms']:.1f}",
                         f"{sy['non_2xx']} / {fa['non_2xx']}"])
            findings.append({"what": f"{model} req/s vs FastAPI, {conc} clients", "result": f"{r:.2f}x" if r else "-",
                             "ok": bool(r and r >= 1), "reason_key": "text"})
    route_rows = []
    for conc in (4, 40):
        for budget in (2000, 25):
            x = runs.get(f"switchyard/minilm@{budget}/{conc}")
            if x:
                route_rows.append([f"{budget} ms", conc, f"{x['rps']:.1f}", f"{x['p50_ms']:.1f} / {x['p99_ms']:.1f}",
                                   route_mix(st.dir, f"minilm@{budget}", conc)])
    for model in MODELS:
        for server in ("switchyard", "fastapi"):
            pts = [(c, runs[f"{server}/{model}/{c}"]["rps"]) for c in (4, 40) if f"{server}/{model}/{c}" in runs]
            series.append({"label": f"{server} {model}", "x": [p[0] for p in pts], "y": [p[1] for p in pts]})
    pools = []
    final = st.dir / "stats-final.json"
    if final.exists():
        for m in json.loads(final.read_text())["models"]:
            for p in m["pools"]:
                ex, n = p["executions"], p["executed_rows"]
                pools.append(f"{m['name']}/{p['name']} {n / max(ex, 1):.1f} rows per execution")
    st.data["tables"] = [
        {"title": "One real sentence per request (BYTES, JSON; 64 sentences of 7-28 tokens), closed loop, no "
                  "response cache on either side:",
         "columns": ["model", "clients", "Switchyard req/s", "FastAPI req/s", "Switchyard / FastAPI",
                     "Switchyard p50 / p99 ms", "FastAPI p50 / p99 ms", "non-2xx (Sy / FA)"],
         "rows": rows,
         "note": ("Both servers pinned to the servers' CPU with one model thread per model, loadgen on the client "
                  "CPU; same ONNX files and tokenizer (embeddings checked equal in gateway/tests/python/test_text.py). "
                  "Switchyard batches dynamically (32 rows, 1 ms) within length buckets, padding to the batch's "
                  "longest text; FastAPI runs each request alone. Batch sizes: " + ("; ".join(pools) or "-") + ".")},
        {"title": "Route `minilm` (latency_budget over L3 and L6), budget in `x-latency-budget-ms`:",
         "columns": ["budget", "clients", "answered req/s", "p50 / p99 ms", "decisions (model share; shed = 429)"],
         "rows": route_rows,
         "note": "A budget the queue cannot meet sheds with 429 + Retry-After instead of answering late; "
                 "closed-loop clients resend at once, so the shed share is large under overload."},
    ]
    st.data["findings"] = findings
    st.data["plots"] = [{"file": "text-throughput.png", "title": "MiniLM sentence embeddings: req/s", "kind": "bar",
                         "xlabel": "clients", "ylabel": "answered req/s", "series": series}]


if __name__ == "__main__":
    Stage("text", "Text transformer scenario (MiniLM) vs FastAPI").run(body)
