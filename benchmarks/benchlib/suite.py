"""The suite's own record, `benchmarks/out/suite.json`: the run's header
(mode, machine, date, commit, pinning, load generator settings, tool
versions) and, stage by stage, status and elapsed time. Written by
benchmarks/run.sh through this module's command line:

    python -m benchlib.suite start MODE
    python -m benchlib.suite stage NAME STATUS RC ELAPSED_S LOG
    python -m benchlib.suite finish ELAPSED_S
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

from . import env

PATH = env.OUT / "suite.json"


def _version(cmd: list[str]) -> str:
    if not shutil.which(cmd[0]):
        return "missing"
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        found = re.search(r"\d+\.\d+(\.\d+)?", r.stdout + r.stderr)
        return found[0] if found else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def start(mode: str) -> None:
    doc = {
        "mode": mode,
        "started_at": env.now(),
        "commit": env.commit(),
        "machine": env.machine(),
        "pinning": env.pinning(),
        "settings": env.SETTINGS[mode],
        "request": env.REQUEST,
        "tools": {
            "rustc": _version(["rustc", "--version"]),
            "nginx": _version(["nginx", "-v"]),
            "redis-server": _version(["redis-server", "--version"]),
        },
        "stages": [],
    }
    env.OUT.mkdir(parents=True, exist_ok=True)
    PATH.write_text(json.dumps(doc, indent=2) + "\n")


def _update(fn) -> None:
    doc = json.loads(PATH.read_text())
    fn(doc)
    PATH.write_text(json.dumps(doc, indent=2) + "\n")


def stage(name: str, status: str, rc: str, elapsed: str, log: str) -> None:
    def add(doc):
        doc["stages"] = [s for s in doc["stages"] if s["name"] != name]
        doc["stages"].append({"name": name, "status": status, "rc": int(rc), "elapsed_s": float(elapsed),
                              "log": log, "finished_at": env.now()})
    _update(add)


def finish(elapsed: str) -> None:
    def done(doc):
        doc["finished_at"] = env.now()
        doc["elapsed_s"] = float(elapsed)
    _update(done)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"start": start, "stage": stage, "finish": finish}[cmd](*args)
