"""The result file of one stage: `benchmarks/out/<name>.json`.

Every stage writes one, whatever happens:

    {"stage": "peers", "title": "...", "status": "ok" | "failed" | "not-run",
     "reason": "...",                       # failed / not-run: why
     "mode": "quick", "settings": {...},    # what quick/full meant for it
     "pinning": {...}, "commit": "...", "machine": {...},
     "started_at": "...", "finished_at": "...", "elapsed_s": 12.3,
     "commands": ["taskset -c 0 target/release/loadgen ..."],
     ...the stage's own data...,
     "tables": [{"title", "columns", "rows", "note"}]   # optional: rendered as is
    }

Exit codes (read by benchmarks/run.sh): 0 ok, 3 not run, anything else failed.
A stage that fails half-way still writes what it measured, with
status "failed", so the report can show it beside the error.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import traceback
from typing import Callable

from . import env

NOT_RUN = 3


def _terminate(signum, _frame):
    raise SystemExit(128 + signum)


def run_child(cmd: list[str], timeout: float, **popen_kw) -> int:
    """Runs a child to completion and returns its exit code. When this stage
    is stopped (SIGTERM from the suite's timeout) or the child overruns
    `timeout`, the child gets SIGTERM and 30 s to stop its own servers
    before SIGKILL (subprocess.run would SIGKILL it at once)."""
    proc = subprocess.Popen(cmd, **popen_kw)
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


class Stage:
    """Collects a stage's data and writes its result file once."""

    def __init__(self, name: str, title: str):
        self.name = name
        self.title = title
        self.mode = env.mode()
        self.settings = dict(env.SETTINGS[self.mode])
        self.dir = env.OUT / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data: dict = {}
        self.commands: list[str] = []
        self.started = time.monotonic()
        self.started_at = env.now()
        # `timeout` and Ctrl-C: unwind through finally blocks so servers stop.
        signal.signal(signal.SIGTERM, _terminate)

    def say(self, msg: str) -> None:
        print(f"[{self.name}] {msg}", file=sys.stderr, flush=True)

    def write(self, status: str = "ok", reason: str = "") -> None:
        doc = {
            "stage": self.name,
            "title": self.title,
            "status": status,
            "reason": reason,
            "mode": self.mode,
            "settings": self.settings,
            "request": env.REQUEST,
            "pinning": env.pinning(),
            "commit": env.commit(),
            "machine": env.machine(),
            "started_at": self.started_at,
            "finished_at": env.now(),
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "commands": self.commands,
            **self.data,
        }
        path = env.OUT / f"{self.name}.json"
        tmp = path.with_suffix(".json.part")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)

    def not_run(self, reason: str) -> None:
        """Records that the stage could not run, and exits with NOT_RUN."""
        self.say(f"not run: {reason}")
        self.write("not-run", reason)
        sys.exit(NOT_RUN)

    def run(self, body: Callable[["Stage"], None]) -> None:
        """Runs `body(self)`; writes the result file as ok, or as failed
        with the error (and whatever data was collected), then exits."""
        try:
            body(self)
        except SystemExit as e:
            if e.code == NOT_RUN:
                raise
            self.write("failed", f"interrupted (exit {e.code})")
            raise
        except Exception as e:  # noqa: BLE001 - any failure is reported, then the suite goes on
            traceback.print_exc()
            self.write("failed", f"{type(e).__name__}: {e}")
            sys.exit(1)
        self.write("ok")
