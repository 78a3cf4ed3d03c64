"""What the soak samples from the running gateway: the process's resident
memory, open descriptors and threads (from /proc), and from the admin API
the pool queue depths, requests in flight and the pools' error counts."""

from __future__ import annotations

import os
import time

import requests


def process_figures(pid: int) -> dict:
    """RSS (MiB), open file descriptors and threads of `pid`."""
    figures = {"rss_mib": 0.0, "threads": 0}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                figures["rss_mib"] = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                figures["threads"] = int(line.split()[1])
    figures["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return figures


def gateway_figures(admin: str) -> dict:
    """Queue depths, in-flight requests, pool errors and the L1/L2 cache
    counters from `/admin/stats`."""
    stats = requests.get(f"{admin}/admin/stats", timeout=10).json()
    depths = [pool.get("queue_depth", 0) for model in stats.get("models", []) for pool in model.get("pools", [])]
    errors = sum(pool.get("errors", 0) for model in stats.get("models", []) for pool in model.get("pools", []))
    cache = stats.get("cache", {})
    return {
        "queue_depth_sum": sum(depths),
        "queue_depth_max": max(depths, default=0),
        "in_flight": stats.get("in_flight", 0),
        "pool_errors": errors,
        "generation": stats.get("generation", 0),
        "l1_hits": cache.get("l1_hits", 0),
        "l2_hits": cache.get("l2_hits", 0),
        "l1_bytes": cache.get("l1_bytes", 0),
        "l2_errors": cache.get("l2_errors", 0),
    }


def sample(pid: int, admin: str, started: float, phase: str, ledger_totals: dict) -> dict:
    """One row of the soak's time series."""
    row = {"t_s": round(time.monotonic() - started, 1), "phase": phase}
    row.update(process_figures(pid))
    try:
        row.update(gateway_figures(admin))
    except (requests.RequestException, ValueError) as e:
        row["admin_error"] = str(e)[:200]
    row.update({f"client_{k}": v for k, v in ledger_totals.items()})
    return row
