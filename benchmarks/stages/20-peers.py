#!/usr/bin/env python3
"""Stage `peers`: Switchyard vs the FastAPI baseline (session.run in the
threadpool, and inline on the event loop) vs MLServer (with and without its
adaptive batching), closed loop, on digits-cheap and
synth-heavy, at each concurrency of the mode (4 and 40 always among them);
each server's start-up time, and its memory at idle and under load.

Every server serves the same four ONNX files on the same pinned CPU and gets
the same request bodies (loadgen, 64 distinct one-row JSON bodies, seed 42).
Runs are interleaved server by server at each step, so a drift in the
machine's load hits all of them alike.

    benchmarks/stages/20-peers.py quick|full   ->  benchmarks/out/peers.json
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import env, servers  # noqa: E402
from benchlib.load import LoadRunner, summary  # noqa: E402
from benchlib.stage import Stage  # noqa: E402

ALL_MODELS = ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"]

DESCRIPTIONS = {
    "switchyard": "Switchyard, built-in config (per-model dynamic batching, one CPU pool: 1 worker, "
                  "1 intra-op thread), access log off",
    "fastapi": "FastAPI + uvicorn (uvloop, httptools) + onnxruntime: 1 worker, session.run in the threadpool, "
               "1 intra-op thread, access log off",
    "fastapi-inline": "same FastAPI with session.run called inline on the event loop (`--run-mode inline`): no "
                      "thread hop per request, the faster choice for microsecond models",
    "mlserver": "MLServer + onnxruntime runtime class (benchmarks/mlserver): inference in the server process "
                "(parallel_workers 0), 1 intra-op thread, adaptive batching off",
    "mlserver-batch": "same MLServer with adaptive batching (max_batch_size "
                      f"{servers.MLSERVER_BATCH['max_batch_size']}, max_batch_time "
                      f"{servers.MLSERVER_BATCH['max_batch_time_s'] * 1e3:g} ms)",
}


class PeakMemory:
    """Samples a server's process-tree memory every 100 ms in a thread."""

    def __init__(self, server: servers.Server):
        self.server, self.peak = server, {"rss_mib": 0.0, "pss_mib": 0.0, "processes": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            m = self.server.memory()
            if m["rss_mib"] > self.peak["rss_mib"]:
                self.peak = m
            self._stop.wait(0.1)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def label_of(server: servers.Server, model: str) -> object:
    req = urllib.request.Request(server.infer_url(model), data=servers.one_row_body(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        doc = json.loads(r.read())
    return next(o["data"] for o in doc["outputs"] if o["name"] == "label")


def start_all(st: Stage, group: servers.Servers) -> list[servers.Server]:
    """Starts the peers one after the other (so start-up times do not
    compete), waits for each and loads all its models."""
    wanted = [("switchyard", lambda: servers.switchyard(st.dir)), ("fastapi", lambda: servers.fastapi(st.dir)),
              ("fastapi-inline", lambda: servers.fastapi(st.dir, "fastapi-inline", run_mode="inline"))]
    if env.MLSERVER_PY.exists():
        wanted += [("mlserver", lambda: servers.mlserver(st.dir)),
                   ("mlserver-batch", lambda: servers.mlserver(st.dir, "mlserver-batch", batching=True))]
    else:
        st.data["notes"].append("MLServer not run: .venv-mlserver is missing (run scripts/setup.sh bench)")
    running = []
    for name, make in wanted:
        info = st.data["servers"].setdefault(name, {"description": DESCRIPTIONS[name]})
        try:
            s = group.add(make())
            st.say(f"starting {name}")
            info["ready_s"] = round(s.wait_ready(), 3)
            info["all_models_s"] = round(s.warm(ALL_MODELS), 3)
            info["command"] = " ".join(s.cmd)
            running.append(s)
            st.say(f"  {name}: ready after {info['ready_s']:.2f} s, all four models answered after "
                   f"{info['all_models_s']:.2f} s")
        except RuntimeError as e:
            info["error"] = str(e)
            st.say(f"  {name} failed to start: {e}")
    return running


def check_answers(st: Stage, running: list[servers.Server]) -> None:
    """The same body must get the same label from every server."""
    for model in ("digits-cheap", "synth-heavy"):
        labels = {s.name: label_of(s, model) for s in running}
        agree = len({json.dumps(v) for v in labels.values()}) == 1
        st.data["answers_agree"][model] = {"agree": agree, "labels": labels}
        if not agree:
            raise RuntimeError(f"servers disagree on {model}: {labels}")


def measure(st: Stage, running: list[servers.Server]) -> None:
    time.sleep(1.0)
    for s in running:
        st.data["servers"][s.name]["idle_memory"] = s.memory()
    runner = LoadRunner(st.settings, st.dir / "loadgen")
    peaks = {s.name: {"rss_mib": 0.0} for s in running}
    for model, levels in st.settings["concurrency"].items():
        for conc in levels:
            for s in running:
                st.say(f"{model}, {conc} clients: {s.name}")
                entry = {"server": s.name, "model": model, "concurrency": conc}
                try:
                    with PeakMemory(s) as pm:
                        rep = runner.closed(s.infer_url(model), f"{s.name}/{model}/c{conc}", conc)
                    entry.update(summary(rep), peak_memory=pm.peak)
                    if pm.peak["rss_mib"] > peaks[s.name]["rss_mib"]:
                        peaks[s.name] = pm.peak
                    st.say(f"  {entry['rps']:,.0f} req/s, p99 {entry['p99_ms']:.2f} ms, errors {entry['errors']}")
                except RuntimeError as e:
                    entry["error"] = str(e)
                    st.say(f"  failed: {e}")
                st.data["runs"].append(entry)
                st.commands[:] = runner.commands
    for s in running:
        st.data["servers"][s.name]["peak_memory"] = peaks[s.name]


def body(st: Stage) -> None:
    for f in (env.SWITCHYARD, env.LOADGEN):
        if not f.exists():
            raise RuntimeError(f"missing {f} (cargo build --release -p switchyard -p switchyard-benchmarks)")
    env.pin_self_to_client()
    st.data.update(servers={}, runs=[], notes=[], answers_agree={}, versions=servers.versions())
    with servers.Servers() as group:
        running = start_all(st, group)
        if not running:
            raise RuntimeError("no server started")
        check_answers(st, running)
        measure(st, running)


if __name__ == "__main__":
    Stage("peers", "Switchyard vs FastAPI vs MLServer, closed loop").run(body)
