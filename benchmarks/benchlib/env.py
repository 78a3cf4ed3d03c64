"""Where things are, what a quick or full run measures, which cores the
servers and the load generator get, and facts about the machine.

Every stage reads its settings from here so that one place says what
`quick` and `full` mean (recorded in each stage's JSON and in the report).
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
OUT = Path(os.environ.get("BENCH_OUT", BENCH / "out"))
MODELS = REPO / "models"
PY = REPO / ".venv" / "bin" / "python"
MLSERVER_PY = REPO / ".venv-mlserver" / "bin" / "python"
SWITCHYARD = REPO / "target" / "release" / "switchyard"
LOADGEN = REPO / "target" / "release" / "loadgen"
RUNTIME_BENCH = REPO / "target" / "release" / "runtime-bench"
ORT_LIB = REPO / ".cache" / "onnxruntime" / "libonnxruntime.so.1.31.1"

# Per mode: the measured window and warm-up of every load run, the
# closed-loop concurrency levels per model, the open-loop rates per model.
SETTINGS = {
    "quick": {
        "duration_s": 3,
        "warmup_s": 1,
        "concurrency": {"digits-cheap": [1, 4, 16, 40], "synth-heavy": [4, 40]},
        "open_rates": {"digits-cheap": [500, 1000, 2000, 4000, 8000, 16000]},
    },
    "full": {
        "duration_s": 10,
        "warmup_s": 2,
        "concurrency": {
            "digits-cheap": [1, 2, 4, 8, 16, 40, 64, 128],
            "synth-heavy": [1, 2, 4, 8, 16, 40, 64, 128],
        },
        "open_rates": {
            "digits-cheap": [500, 1000, 2000, 4000, 8000, 12000, 16000, 24000, 32000],
            "synth-heavy": [100, 200, 400, 600, 800, 1200, 1600, 2400],
        },
    },
}

# What every request looks like (the same bytes for every server).
REQUEST = {
    "input_shape": "X:1,64",
    "datatype": "FP32",
    "encoding": "JSON",
    "distinct_bodies": 64,
    "seed": 42,
}


def mode() -> str:
    """The suite's mode, from the first argument or BENCH_MODE (default quick)."""
    import sys

    m = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BENCH_MODE", "quick")
    if m not in SETTINGS:
        raise SystemExit(f"unknown mode {m!r}: use quick or full")
    return m


def pinning() -> dict:
    """CPUs of the servers and of the load generator.

    With two or more CPUs: every server on one CPU (the same one for all,
    so each gets the same single core), the load generator on another.
    BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS override (taskset lists).
    """
    n = os.cpu_count() or 1
    server = os.environ.get("BENCH_SERVER_CPUS", "1" if n >= 2 else "")
    client = os.environ.get("BENCH_CLIENT_CPUS", "0" if n >= 2 else "")
    desc = (f"servers on CPU {server}, load generator on CPU {client} (taskset)"
            if server and client else "none (fewer than 2 CPUs)")
    return {"server_cpus": server, "client_cpus": client, "description": desc}


def server_prefix() -> list[str]:
    """Command prefix that pins a server to the servers' CPUs."""
    cpus = pinning()["server_cpus"]
    return ["taskset", "-c", cpus] if cpus else []


def client_prefix() -> list[str]:
    """Command prefix that pins a load generator to the client CPUs."""
    cpus = pinning()["client_cpus"]
    return ["taskset", "-c", cpus] if cpus else []


def pin_self_to_client() -> None:
    """Moves the calling process (a stage driver) to the client CPUs, so
    its own work (polling, sampling memory) never runs on the servers' CPU."""
    cpus = pinning()["client_cpus"]
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> str:
    """Short commit hash, marked when the working tree has changes."""
    c = _run(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", "gateway", "runtime",
                  "router-policies", "benchmarks/src", "benchmarks/baseline", "benchmarks/mlserver"])
    return c + (" (+ uncommitted changes)" if dirty else "")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def mem_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        return round(kb / 1048576, 1)
    except (OSError, StopIteration):
        return 0.0


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def machine() -> dict:
    """What the report header says about the machine and the run."""
    os_name = "unknown"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": mem_gib(),
        "os": os_name,
        "kernel": platform.release(),
        "gpu": "none" if not Path("/dev/nvidia0").exists() else "present (not used)",
        "loadavg": loadavg(),
    }


def rel(path: Path) -> str:
    """`path` relative to the repository root when inside it (commands in
    the report then read the same on every machine)."""
    try:
        return str(Path(path).absolute().relative_to(REPO))
    except ValueError:
        return str(path)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def child_env() -> dict:
    """Environment for servers: the ONNX Runtime library, no colours."""
    env = dict(os.environ)
    env.setdefault("ORT_DYLIB_PATH", str(ORT_LIB))
    env["NO_COLOR"] = "1"
    return env
