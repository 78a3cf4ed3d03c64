#!/usr/bin/env python3
"""Stage `perf-analyzer`: Triton's perf_analyzer (unmodified, from
tritonclient 2.50) as a second, independent load generator, against
Switchyard and the FastAPI baseline (both answer Triton's
`/v2/models/{m}/config`, which perf_analyzer requires; it sends binary
tensors). MLServer has no `/config` endpoint: the stage tries it once and
records the error perf_analyzer gives.

    benchmarks/stages/70-perf-analyzer.py quick|full   ->  benchmarks/out/perf-analyzer.json
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env, servers  # noqa: E402
from benchlib.perf import CLIENT_MODE, PERF, bounded, parse  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

MODELS = {"quick": ["digits-cheap"], "full": ["digits-cheap", "synth-heavy"]}
INTERVAL_MS = {"quick": 1000, "full": 5000}
# Stability: perf_analyzer repeats a window until 3 in a row agree within this
# many percent (its default, 10, rarely converges on a shared 2-CPU machine).
STABILITY = {"quick": 50, "full": 25}
# A run normally ends in well under a minute.
TIMEOUT_S = {"quick": 60, "full": 240}
CONCURRENCY = [4, 40]


def perf_cmd(st: Stage, port: int, model: str, conc: int, csv_path: Path) -> list[str]:
    """One perf_analyzer run at one concurrency (one run per level: a
    `--concurrency-range 4:40:36` run was seen to hang at its second level)."""
    return env.client_prefix() + [
        "benchmarks/perf_analyzer.sh", str(port), model, "--concurrency-range", f"{conc}:{conc}",
        *CLIENT_MODE, "--measurement-interval", str(INTERVAL_MS[st.mode]),
        "--stability-percentage", str(STABILITY[st.mode]), "--max-trials", "8", "-f", env.rel(csv_path)]


def run_perf(st: Stage, name: str, port: int, model: str, timeout: int,
             levels: list[int] | None = None) -> dict:
    result = {"server": name, "model": model, "rc": 0, "rows": []}
    errors = []
    for conc in levels or CONCURRENCY:
        csv_path = st.dir / f"{name}-{model}-c{conc}.csv"
        csv_path.unlink(missing_ok=True)
        cmd = perf_cmd(st, port, model, conc, csv_path)
        st.commands.append(shlex.join(cmd))
        st.say(f"perf_analyzer -> {name} {model}, concurrency {conc}")
        rc, out = bounded(cmd, timeout)
        (st.dir / f"{name}-{model}-c{conc}.txt").write_text(out)
        rows = parse(csv_path, out)
        result["rows"] += rows
        if rc != 0:
            result["rc"] = rc
            errors.append(f"concurrency {conc}: " + " ".join(out.strip().splitlines()[-2:])[-300:])
        for row in rows:
            st.say(f"  {row['throughput']:,.0f} infer/s")
    if errors:
        result["error"] = "; ".join(errors)
    return result


def body(st: Stage) -> None:
    if not PERF.exists():
        st.not_run("perf_analyzer is missing (.venv-perf: run scripts/setup.sh bench)")
    env.pin_self_to_client()
    st.data.update(results=[], settings_note="perf_analyzer -i http, binary tensors, shape from /config, "
                   "asynchronous calls from one client thread (`--async --max-threads 1`), "
                   f"concurrency 4 and 40, measurement interval {INTERVAL_MS[st.mode]} ms, stability "
                   f"{STABILITY[st.mode]}%, at most 8 windows; pinned to the client CPU")
    makers = [("switchyard", lambda: servers.switchyard(st.dir)),
              ("fastapi", lambda: servers.fastapi(st.dir, max_batch_size=64))]
    for name, make in makers:
        with servers.Servers() as group:
            s = group.add(make())
            s.wait_ready()
            s.warm(MODELS[st.mode])
            for model in MODELS[st.mode]:
                st.data["results"].append(run_perf(st, name, s.port, model, timeout=TIMEOUT_S[st.mode]))
    if env.MLSERVER_PY.exists():
        with servers.Servers() as group:
            s = group.add(servers.mlserver(st.dir))
            s.wait_ready()
            st.data["mlserver"] = run_perf(st, "mlserver", s.port, "digits-cheap", timeout=60, levels=[4])
    if not any(r["rows"] for r in st.data["results"]):
        raise RuntimeError("perf_analyzer produced no measurement")


if __name__ == "__main__":
    Stage("perf-analyzer", "perf_analyzer against the servers that speak Triton's V2 extensions").run(body)
