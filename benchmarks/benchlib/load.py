"""Runs the load generator (`target/release/loadgen`) pinned to the client
CPU and returns its JSON report. Every run's command line is kept so the
stage can record exactly what was run."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from . import env


class LoadRunner:
    """Runs loadgen with the suite's request shape and the mode's timings."""

    def __init__(self, settings: dict, out: Path):
        self.settings = settings
        self.out = out
        self.commands: list[str] = []

    def base_args(self) -> list[str]:
        r = env.REQUEST
        return ["--input-shape", r["input_shape"], "--datatype", r["datatype"],
                "--distinct", str(r["distinct_bodies"]), "--seed", str(r["seed"])]

    def closed(self, url: str, label: str, concurrency: int, **kw) -> dict:
        """Closed loop: `concurrency` clients, one keep-alive connection each."""
        return self._run(url, label, ["--mode", "closed", "--concurrency", str(concurrency)], **kw)

    def open(self, url: str, label: str, rate: float, connections: int = 64, **kw) -> dict:
        """Open loop at `rate` req/s over `connections`; latency from the
        intended send time."""
        return self._run(url, label, ["--mode", "open", "--rate", str(rate), "--connections", str(connections)], **kw)

    def _run(self, url: str, label: str, pacing: list[str], duration_s: float | None = None,
             warmup_s: float | None = None) -> dict:
        dur = duration_s if duration_s is not None else self.settings["duration_s"]
        warm = warmup_s if warmup_s is not None else self.settings["warmup_s"]
        path = self.out / f"{label.replace('/', '-')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = env.client_prefix() + [env.rel(env.LOADGEN), "--url", url, *pacing, "--duration", f"{dur}s",
                                     "--warmup", f"{warm}s", "--timeout", "10s", *self.base_args(),
                                     "--label", label, "--json-out", env.rel(path), "--quiet"]
        self.commands.append(shlex.join(cmd))
        r = subprocess.run(cmd, cwd=env.REPO, capture_output=True, text=True, timeout=dur + warm + 90)
        if r.returncode != 0:
            raise RuntimeError(f"loadgen {label} failed (rc {r.returncode}): {r.stderr.strip()[-500:]}")
        return json.loads(path.read_text())


def summary(report: dict) -> dict:
    """The fields of a loadgen report the suite keeps."""
    lat = report["latency_us"]
    errors = sum(report.get("errors", {}).values()) + report.get("connection_errors", 0) + report.get("timeouts", 0)
    s = {
        "rps": report["rps"],
        "p50_ms": lat["p50"] / 1e3,
        "p90_ms": lat["p90"] / 1e3,
        "p99_ms": lat["p99"] / 1e3,
        "p999_ms": lat["p999"] / 1e3,
        "max_ms": lat["max"] / 1e3,
        "requests": report["requests"],
        "ok": report["ok"],
        "errors": errors,
    }
    sched = report.get("schedule")
    if sched:
        s["offered_rps"] = sched["target_rate"]
        s["sent_rps"] = sched["achieved_rate"]
        s["unsent"] = sched["unsent"]
        s["behind"] = sched["behind"]
        s["send_lag_p99_ms"] = sched["send_lag_us"]["p99"] / 1e3
    return s
