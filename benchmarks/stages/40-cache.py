#!/usr/bin/env python3
"""Stage `cache`: exact-match cache hits, Switchyard L1 vs nginx as a
POST-body-keyed proxy cache (open loop at 10k req/s and closed loop at 32
clients), L2 (Redis) hits, and the generator's own floor. Runs
benchmarks/cache_bench.sh (which checks that hits really are hits) with the
suite's timings and collects its reports.

    benchmarks/stages/40-cache.py quick|full   ->  benchmarks/out/cache.json
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env  # noqa: E402
from benchlib.load import summary  # noqa: E402
from benchlib.stage import Stage, run_child  # noqa: E402

RUNS = ["hit-open-switchyard", "hit-open-nginx", "calibrate-open", "hit-closed-c32-switchyard",
        "hit-closed-c32-nginx", "hit-closed-c32-switchyard-log", "hit-closed-c32-nginx-log", "calibrate-closed-c32",
        "l2-hit-closed-c1", "l1-hit-closed-c1", "miss-closed-c1", "l2-hit-closed-c8", "l1-hit-closed-c8",
        "miss-closed-c8"]


def body(st: Stage) -> None:
    missing = [c for c in ("nginx", "redis-server", "redis-cli", "curl") if not shutil.which(c)]
    if missing:
        st.not_run(f"missing {', '.join(missing)} (run scripts/setup.sh bench)")
    script_env = env.child_env()
    script_env.update(CACHE_OUT=env.rel(st.dir), CACHE_RESULTS=env.rel(st.dir / "RESULTS-cache.md"),
                      CACHE_DUR=f"{st.settings['duration_s']}s", CACHE_WARM=f"{st.settings['warmup_s']}s")
    cmd = ["benchmarks/cache_bench.sh", st.mode]
    st.commands.append(f"CACHE_DUR={script_env['CACHE_DUR']} CACHE_WARM={script_env['CACHE_WARM']} {' '.join(cmd)}")
    rc = run_child(cmd, 1500, cwd=env.REPO, env=script_env, stdout=subprocess.DEVNULL)
    runs = {}
    for name in RUNS:
        path = st.dir / f"cache-{name}.json"
        if path.exists():
            runs[name] = summary(json.loads(path.read_text()))
    st.data["runs"] = runs
    cpu_path = st.dir / "cache-server-cpu.json"
    if cpu_path.exists():
        cpu = json.loads(cpu_path.read_text())
        st.data["server_cpu_us"] = {k: v["cpu_ticks"] / v["clk_tck"] * 1e6 / v["server_requests"]
                                    for k, v in cpu.items() if v["server_requests"]}
    stats_path = st.dir / "cache-stats.json"
    if stats_path.exists():
        st.data["stats"] = json.loads(stats_path.read_text())
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    st.data["nginx_version"] = nginx.rsplit("/", 1)[-1]
    st.data["rate"] = 10000
    st.data["connections"] = 32
    commands = st.dir / "cache-commands.txt"
    if commands.exists():
        st.commands += commands.read_text().splitlines()
    if rc != 0:
        raise RuntimeError(f"cache_bench.sh exited with {rc} (log: benchmarks/out/logs/cache.log)")


if __name__ == "__main__":
    Stage("cache", "Cache hits vs nginx proxy cache").run(body)
