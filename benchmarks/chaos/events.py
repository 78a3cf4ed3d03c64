"""The faults, in the order the scenario injects them. Each takes the fleet
and the load and returns a dict of what happened (for the report)."""

from __future__ import annotations

import shutil
import time

import requests

from fleet import MODELS, Fleet
from load import Load


def redis_outage(fleet: Fleet, load: Load, down_s: float = 4.0) -> dict:
    """SIGKILL Redis (the replicas' shared L2) and start it again."""
    fleet.redis.kill()
    time.sleep(down_s)
    fleet.redis.start()
    return {"down_s": down_s}


def upstream_flap(fleet: Fleet, load: Load, times: int = 2, down_s: float = 2.0, up_s: float = 2.0) -> dict:
    """SIGKILL one of the app's two addresses and bring it back, `times` times."""
    app = fleet.apps[1]
    for _ in range(times):
        app.kill()
        time.sleep(down_s)
        app.start()
        time.sleep(up_s)
    return {"port": app.port, "times": times}


def model_swap(fleet: Fleet, load: Load) -> dict:
    """On each replica in turn: the model file is replaced (written beside,
    renamed over) by version 2, the config says version 2, and the replica
    reloads through its admin API. After the last reload answers, every
    request sent must get version 2."""
    outcomes = []
    for replica in fleet.replicas:
        folder = replica.config_path.parent
        shutil.copy(MODELS / "digits-heavy.onnx", folder / "next.onnx")
        (folder / "next.onnx").rename(folder / "served.onnx")
        fleet.write_replica_config(folder, version=2)
        r = requests.post(f"{replica.admin}/admin/reload", timeout=60)
        outcomes.append(r.status_code)
        if r.status_code != 200:
            raise RuntimeError(f"{replica.name}: reload answered {r.status_code}: {r.text[:300]}")
    load.swapped_at = load.now()
    return {"reloads": outcomes}


def burst(fleet: Fleet, load: Load, factor: float = 3.0, seconds: float = 5.0) -> dict:
    """Measures the fleet's capacity (the load generator in closed loop, 64
    clients, 3 s, on top of the steady clients), then sends `factor` x that
    rate open loop for `seconds` over 1024 connections."""
    workdir = fleet.workdir
    probe = load.loadgen(fleet.loadgen, workdir, ["--mode", "closed", "--concurrency", "64", "--duration", "3s"])
    rate = max(100.0, factor * probe["rps"])
    sent = load.loadgen(fleet.loadgen, workdir, ["--mode", "open", "--rate", f"{rate:.0f}", "--connections", "1024",
                                                 "--duration", f"{seconds}s"])
    schedule = sent.get("schedule") or {}
    return {"capacity_per_s": round(probe["rps"], 1), "offered_rate": round(rate, 1),
            "achieved_send_rate": schedule.get("achieved_rate"), "burst_requests": sent["requests"],
            "burst_ok": sent["ok"], "burst_errors": sent["errors"], "burst_p99_ms": sent["latency_us"]["p99"] / 1e3}


def sigterm_replica(fleet: Fleet, load: Load) -> dict:
    """SIGTERM one replica behind the front, wait for its graceful exit
    (readiness 503 for shutdown_notice_ms first, then in-flight requests
    finish), and start it again on the same ports."""
    replica = fleet.replicas[1]
    began = time.monotonic()
    code = replica.terminate()
    drained = time.monotonic() - began
    replica.start()
    return {"replica": replica.name, "exit_code": code, "drain_s": round(drained, 2),
            "restart_s": round(time.monotonic() - began - drained, 2)}


SCENARIO = [
    ("redis killed and restarted", redis_outage),
    ("upstream address flapped", upstream_flap),
    ("model file swapped and reloaded", model_swap),
    ("burst at 3x capacity", burst),
    ("SIGTERM to one of two replicas", sigterm_replica),
]
