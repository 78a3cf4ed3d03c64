"""Turns benchmarks/out/*.json into markdown tables (ratios first)."""

import glob
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

out = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/out"


def load(path):
    with open(path) as f:
        return json.load(f)


def commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


cpu = "unknown"
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
except Exception:
    pass
print(f"Machine: {cpu}, {os.cpu_count()} cores, {platform.platform()}; "
      f"date {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; commit {commit()}\n")

rt = os.path.join(out, "runtime.json")
if os.path.exists(rt):
    r = load(rt)
    b = r["batching"]
    print("### Runtime: dynamic batching (synth-wide, 32 callers x 1 row, 1 worker, 1 thread)\n")
    print("| batching | rows/s | ratio |\n|---|---|---|")
    print(f"| off (batch 1) | {b['unbatched_rows_per_s']:.0f} | 1.00 |")
    print(f"| on (max 32, 2 ms) | {b['batched_rows_per_s']:.0f} | {b['gain']:.2f}x |\n")
    print("### Runtime path vs direct `Session::run` at the same batch size\n")
    print("| model | batch | direct rows/s | runtime rows/s | runtime / direct |\n|---|---|---|---|---|")
    for o in r["overhead"]:
        print(f"| {o['model']} | {o['batch']} | {o['direct_rows_per_s']:.0f} | {o['runtime_rows_per_s']:.0f} | {o['ratio']:.1%} |")
    ref = r.get("synth_heavy_gateway_reference_rows_per_s")
    if ref:
        print(f"\nRuntime alone, synth-heavy, 40 one-row callers, gateway batching (max 16, 500 us): {ref:.0f} rows/s "
              "(the reference for the gateway's synth-heavy figure below)")
    print("\n### Cold start (load of all pools' sessions)\n")
    print("| model | cold start ms |\n|---|---|")
    for c in r["cold_start"]:
        print(f"| {c['model']} | {c['cold_start_ms']:.1f} |")
    print()

runs = {}
for path in glob.glob(os.path.join(out, "gateway-*.json")):
    d = load(path)
    name, model, conc = d["label"].split("/")
    runs[(model, conc, name)] = d
if runs:
    print("### Gateway vs FastAPI baseline (closed loop, 1 row per request, JSON, each server pinned to one core)\n")
    print("| model | clients | server | req/s | p50 ms | p99 ms | errors | req/s vs FastAPI |\n|---|---|---|---|---|---|---|---|")
    for model in sorted({k[0] for k in runs}):
        for conc in sorted({k[1] for k in runs if k[0] == model}, key=lambda c: int(c[1:])):
            base = runs.get((model, conc, "fastapi"))
            for name in ("switchyard", "fastapi"):
                d = runs.get((model, conc, name))
                if not d:
                    continue
                lat = d["latency_us"]
                errs = sum(d.get("errors", {}).values())
                ratio = f"{d['rps'] / base['rps']:.1f}x" if base and base["rps"] else "-"
                print(f"| {model} | {conc[1:]} | {name} | {d['rps']:.0f} | {lat['p50']/1e3:.2f} | {lat['p99']/1e3:.2f} | {errs} | {ratio} |")
