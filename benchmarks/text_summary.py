"""benchmarks/out/text/*.json -> markdown tables (text_bench.sh)."""

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/out/text")


def commit():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    except Exception:
        return "unknown"


def route_mix(target, conc):
    """Decisions of the `minilm` route during one run: 'model share, ...'."""
    def counts(name):
        path = out / name
        if not path.exists():
            return {}
        c = {}
        for d in json.loads(path.read_text()).get("decisions", []):
            if d["route"] == "minilm":
                key = d["model"] if d["model"] != "none" else f"shed ({d['reason']})"
                c[key] = c.get(key, 0) + d["count"]
        return c
    before, after = counts(f"stats-before-{target}-c{conc}.json"), counts(f"stats-after-{target}-c{conc}.json")
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
for path in out.glob("*.json"):
    if path.name.startswith("stats-"):
        continue
    d = json.loads(path.read_text())
    server, target, conc = d["label"].split("/")
    runs[(target, int(conc[1:]), server)] = d

print("| target | clients | server | answered req/s | p50 ms | p99 ms | non-2xx | req/s vs FastAPI (same model) |")
print("|---|---|---|---|---|---|---|---|")
for conc in sorted({k[1] for k in runs}):
    targets = ["minilm-l3", "minilm-l6"] + sorted(t for t in {k[0] for k in runs} if t.startswith("minilm@"))
    for target in targets:
        for server in ("switchyard", "fastapi"):
            d = runs.get((target, conc, server))
            if not d:
                continue
            lat = d["latency_us"]
            errs = sum(d.get("errors", {}).values()) + d.get("connection_errors", 0)
            base = runs.get((target, conc, "fastapi"))
            ratio = f"{d['rps'] / base['rps']:.2f}x" if base and base["rps"] else "-"
            name = target
            if target.startswith("minilm@"):
                name = f"route `minilm`, budget {target.split('@')[1]} ms ({route_mix(target, conc)})"
            print(f"| {name} | {conc} | {server} | {d['rps']:.1f} | {lat['p50'] / 1e3:.1f} | "
                  f"{lat['p99'] / 1e3:.1f} | {errs} | {ratio} |")

final = out / "stats-final.json"
if final.exists():
    print("\nSwitchyard pools over the whole run (executions, rows, mean rows per execution):\n")
    for m in json.loads(final.read_text())["models"]:
        for p in m["pools"]:
            ex, rows = p["executions"], p["executed_rows"]
            print(f"- {m['name']}/{p['name']}: {ex} executions, {rows} rows, {rows / max(ex, 1):.1f} rows per execution")
