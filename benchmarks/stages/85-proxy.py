#!/usr/bin/env python3
"""Stage `proxy`: reverse-proxy overhead in one run (benchmarks/proxy_bench.sh):
the same V2 infer requests sent directly to the FastAPI baseline, through a
Switchyard prefix route, and through nginx as a plain reverse proxy; open
loop at a fixed rate (latency at equal load) and closed loop (throughput),
with each proxy's own CPU time per request read from /proc.

    benchmarks/stages/85-proxy.py quick|full   ->  benchmarks/out/proxy.json

Goal (the reverse-proxy issue): overhead no worse than nginx's.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402

TARGETS = ("direct", "switchyard", "nginx")


def ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def runs_of(folder: Path, cpu: dict) -> dict:
    """proxy-<kind>-<target>-r<round>.json -> {name: figures}."""
    runs = {}
    for path in sorted(folder.glob("proxy-*-r*.json")):
        name = path.stem.removeprefix("proxy-")
        rep = json.loads(path.read_text())
        c = cpu.get(name, {})
        cpu_us = (c["ticks"] / c["clk_tck"] * 1e6 / rep["requests"]) if c.get("ticks") and rep["requests"] else None
        runs[name] = {"rps": rep["rps"], "requests": rep["requests"], "ok": rep["ok"],
                      "p50_us": rep["latency_us"]["p50"], "p99_us": rep["latency_us"]["p99"],
                      "p999_us": rep["latency_us"]["p999"], "proxy_cpu_us": cpu_us}
    return runs


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def body(st: Stage) -> None:
    for tool in ("nginx", "curl"):
        if not shutil.which(tool):
            st.not_run(f"{tool} is missing (scripts/setup.sh bench installs it)")
    cmd = ["benchmarks/proxy_bench.sh", st.mode]
    st.commands.append(" ".join(cmd))
    rc = run_child(cmd, 1500, cwd=env.REPO, env=env.child_env())
    for f in list(env.OUT.glob("proxy-*")):
        shutil.move(str(f), st.dir / f.name)
    if rc != 0:
        raise RuntimeError(f"proxy_bench.sh exited with {rc}")
    summary = (st.dir / "proxy-summary.md").read_text()
    st.commands.extend(l.strip() for l in (st.dir / "proxy-commands.txt").read_text().splitlines() if l.strip())
    runs = runs_of(st.dir, json.loads((st.dir / "proxy-cpu.json").read_text()))
    st.data["runs"] = runs
    rounds = sorted({int(n.rsplit("-r", 1)[1]) for n in runs})
    rows = []
    for r in rounds:
        for kind in ("open", "closed"):
            base = runs.get(f"{kind}-direct-r{r}")
            for target in TARGETS:
                x = runs.get(f"{kind}-{target}-r{r}")
                if not x or not base:
                    continue
                over = target != "direct"
                rows.append([f"{kind} (round {r})", target, f"{x['rps']:,.0f}", ms(x["p50_us"]), ms(x["p99_us"]),
                             f"{(x['p50_us'] - base['p50_us']) / 1000:+.3f}" if over else "-",
                             f"{(x['p99_us'] - base['p99_us']) / 1000:+.3f}" if over else "-",
                             f"{x['proxy_cpu_us']:.1f}" if over and x["proxy_cpu_us"] else "-",
                             x["ok"], x["requests"] - x["ok"]])
    setup = [l[2:] for l in summary.splitlines() if l.startswith("- ")]
    st.data["tables"] = [{
        "title": "FastAPI direct vs Switchyard prefix route vs nginx plain proxy (`benchmarks/proxy_bench.sh`):",
        "columns": ["run", "target", "answered/s", "p50 ms", "p99 ms", "p50 over direct ms", "p99 over direct ms",
                    "proxy CPU µs/request", "ok", "failed"],
        "rows": rows,
        "note": "; ".join(setup) + ".",
    }]

    def avg(kind: str, target: str, key: str) -> float | None:
        return mean([runs[n][key] for n in runs if n.startswith(f"{kind}-{target}-") and runs[n][key] is not None])

    findings = []
    sy_cpu, ng_cpu = avg("closed", "switchyard", "proxy_cpu_us"), avg("closed", "nginx", "proxy_cpu_us")
    if sy_cpu and ng_cpu:
        findings.append({"what": "proxy CPU per request vs nginx (closed loop)",
                         "result": f"{sy_cpu:.1f} vs {ng_cpu:.1f} µs ({sy_cpu / ng_cpu:.2f}x)",
                         "ok": sy_cpu <= ng_cpu, "reason_key": "proxy.cpu"})
    sy_rps, ng_rps = avg("closed", "switchyard", "rps"), avg("closed", "nginx", "rps")
    if sy_rps and ng_rps:
        findings.append({"what": "proxied req/s vs nginx, proxy on the upstream's CPU (closed loop)",
                         "result": f"{sy_rps:,.0f} vs {ng_rps:,.0f} ({sy_rps / ng_rps:.2f}x)",
                         "ok": sy_rps >= ng_rps, "reason_key": "proxy.cpu"})
    d50, s50, n50 = (avg("open", t, "p50_us") for t in TARGETS)
    if d50 and s50 and n50:
        findings.append({"what": "p50 added at equal load (open loop) vs nginx's",
                         "result": f"{(s50 - d50) / 1000:+.3f} vs {(n50 - d50) / 1000:+.3f} ms",
                         "ok": s50 <= n50, "reason_key": "proxy.cpu"})
    st.data["findings"] = findings
    m = re.search(r"nginx ([0-9.]+)", summary)
    st.data["nginx_version"] = m.group(1) if m else ""


if __name__ == "__main__":
    Stage("proxy", "Proxy overhead vs nginx plain proxy").run(body)
