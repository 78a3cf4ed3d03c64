"""benchmarks/out/text/*.json -> a markdown table (text_bench.sh)."""

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/out/text")
budget = sys.argv[2] if len(sys.argv) > 2 else "?"


def commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def route_mix(conc):
    """Decisions of the `minilm` route during its run: model -> count."""
    def counts(name):
        path = out / name
        if not path.exists():
            return {}
        c = {}
        for d in json.loads(path.read_text()).get("decisions", []):
            if d["route"] == "minilm":
                c[d["model"]] = c.get(d["model"], 0) + d["count"]
        return c
    before, after = counts(f"stats-before-route-c{conc}.json"), counts(f"stats-after-route-c{conc}.json")
    mix = {m: after[m] - before.get(m, 0) for m in after if after[m] - before.get(m, 0) > 0}
    total = sum(mix.values())
    return ", ".join(f"{m} {100 * n / total:.0f}%" for m, n in sorted(mix.items())) if total else "-"


cpu = "unknown"
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass
print(f"Machine: {cpu}, {os.cpu_count()} cores, {platform.platform()}; "
      f"date {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; commit {commit()}\n")

runs = {}
for path in out.glob("*-c*.json"):
    if path.name.startswith("stats-"):
        continue
    d = json.loads(path.read_text())
    server, model, conc = d["label"].split("/")
    runs[(model, int(conc[1:]), server)] = d

print("| target | clients | server | req/s | p50 ms | p99 ms | errors | req/s vs FastAPI (same model) |")
print("|---|---|---|---|---|---|---|---|")
for conc in sorted({k[1] for k in runs}):
    for model in ("minilm-l3", "minilm-l6", "minilm"):
        for server in ("switchyard", "fastapi"):
            d = runs.get((model, conc, server))
            if not d:
                continue
            base = runs.get(("minilm-l6" if model == "minilm" else model, conc, "fastapi"))
            lat = d["latency_us"]
            errs = sum(d.get("errors", {}).values()) + d.get("connection_errors", 0)
            ratio = f"{d['rps'] / base['rps']:.2f}x" if base and base["rps"] else "-"
            target = model
            if model == "minilm":
                target = f"minilm route (budget {budget} ms; {route_mix(conc)}; vs FastAPI L6)"
            print(f"| {target} | {conc} | {server} | {d['rps']:.1f} | {lat['p50'] / 1e3:.1f} | "
                  f"{lat['p99'] / 1e3:.1f} | {errs} | {ratio} |")
