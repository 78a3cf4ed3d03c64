"""Runs of Triton's perf_analyzer (`benchmarks/perf_analyzer.sh`, pinned to
the client CPU by the caller): where it is, the client mode every stage
uses, a run bounded in time, and its summary and CSV parsed into rows.
Shared by the `perf-analyzer` and `grpc` stages."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
from pathlib import Path

from . import env

PERF = env.REPO / ".venv-perf" / "bin" / "perf_analyzer"
# Asynchronous calls from one client thread. In its synchronous mode
# perf_analyzer runs one thread per outstanding request; at concurrency 40 on
# the one client CPU, against a server answering ~15k infer/s, those threads
# starved its main thread, which summarises each window (gdb: in
# `InferenceProfiler::ValidLatencyMeasurement`), and a run did not finish in
# 2 minutes. One thread keeping 40 requests outstanding finishes in seconds.
CLIENT_MODE = ["--async", "--max-threads", "1"]


def bounded(cmd: list[str], timeout: float) -> tuple[int, str]:
    """Runs `cmd` in its own process group; on timeout the whole group
    (perf_analyzer.sh and perf_analyzer under it) is killed."""
    proc = subprocess.Popen(cmd, cwd=env.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, f"{out}\ntimed out after {timeout:.0f} s"


def parse(csv_path: Path, stdout: str) -> list[dict]:
    """Rows per concurrency: throughput and average latency from perf_analyzer's
    summary lines, percentiles (µs) from its CSV when it wrote one."""
    rows = {}
    for m in re.finditer(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec, latency (\d+) usec", stdout):
        rows[int(m[1])] = {"concurrency": int(m[1]), "throughput": float(m[2]), "avg_ms": int(m[3]) / 1e3}
    if csv_path.exists():
        with open(csv_path) as f:
            for r in csv.DictReader(f):
                row = rows.setdefault(int(r["Concurrency"]), {"concurrency": int(r["Concurrency"])})
                row.update(throughput=float(r["Inferences/Second"]), p50_ms=float(r["p50 latency"]) / 1e3,
                           p99_ms=float(r["p99 latency"]) / 1e3)
    return [rows[c] for c in sorted(rows)]
