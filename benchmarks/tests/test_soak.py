"""Tests of the soak suite (`make soak`): its pass rules on made-up series
(each rule can fail), and a short real soak against the gateway binary
(Redis, the upstream app, reloads and every request kind), which must pass.

    .venv/bin/python -m pytest -q benchmarks/tests/test_soak.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH / "soak"))
import verdict  # noqa: E402


def series(rss_start=200.0, rss_end=205.0, n=20, pool_errors=0):
    step = (rss_end - rss_start) / (n - 1)
    return [{"phase": "load", "t_s": 10 * i, "rss_mib": rss_start + step * i, "fds": 50, "threads": 19,
             "pool_errors": pool_errors} for i in range(n)]


BASE = {"fds": 40, "threads": 19}
CLEAN = {"ok": 1000, "rejected": 0, "unexpected": 0}
RELOADS = {"asked": 3, "applied": 3}


def failed(result):
    return [c["name"] for c in result["checks"] if not c["pass"]]


def test_a_steady_run_passes():
    result = verdict.judge(series(), BASE, {"fds": 40, "threads": 19}, CLEAN, RELOADS)
    assert result["pass"], result


def test_memory_growing_past_ten_percent_fails():
    assert failed(verdict.judge(series(200, 240), BASE, BASE, CLEAN, RELOADS)) == ["rss growth after warm-up"]


def test_descriptors_or_threads_left_behind_fail():
    assert failed(verdict.judge(series(), BASE, {"fds": 41, "threads": 19}, CLEAN, RELOADS)) == \
        ["fds back to baseline"]
    assert failed(verdict.judge(series(), BASE, {"fds": 40, "threads": 23}, CLEAN, RELOADS)) == \
        ["threads back to baseline"]


def test_client_errors_rejections_reloads_and_pool_errors_fail():
    assert failed(verdict.judge(series(), BASE, BASE, {**CLEAN, "unexpected": 1}, RELOADS)) == \
        ["no unexpected client outcomes"]
    assert failed(verdict.judge(series(), BASE, BASE, {**CLEAN, "rejected": 1}, RELOADS)) == \
        ["no unexpected client outcomes"]
    assert failed(verdict.judge(series(), BASE, BASE, CLEAN, {"asked": 3, "applied": 2})) == \
        ["every reload took effect"]
    assert failed(verdict.judge(series(pool_errors=2), BASE, BASE, CLEAN, RELOADS)) == ["no pool execution errors"]


def test_too_short_a_run_is_not_a_pass():
    assert "enough samples" in failed(verdict.judge(series(n=5), BASE, BASE, CLEAN, RELOADS))


def test_a_short_real_soak_passes(tmp_path):
    # 25 s of warm-up: a debug gateway's RSS is still rising after 10 s
    # (allocator pages and caches filling; 7-12% "growth" over the next
    # 38 s in repeated runs, the old and the new binary alike), and flat
    # after ~25 s (1.5% over the next 47 s).
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    run = subprocess.run(
        [sys.executable, str(BENCH / "soak" / "run.py"), "--bin", binary, "--minutes", "1.2", "--warmup-s", "25",
         "--quiet-s", "3", "--interval-s", "2", "--reload-every-s", "8", "--clients", "3", "--no-plot",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    reports = list(tmp_path.glob("*/soak.json"))
    assert reports, run.stdout + run.stderr
    report = json.loads(reports[0].read_text())
    assert run.returncode == 0, json.dumps({k: report[k] for k in ("checks", "unexpected_examples")}, indent=1)
    kinds = report["ledger_by_kind"]
    for kind in ("digits-json", "synth-binary", "sse-full", "sse-abandoned", "proxy-get", "proxy-upload",
                 "proxy-sse", "admin-read", "malformed", "over-limit", "new-connection"):
        assert kinds.get(kind, {}).get("ok", 0) > 0, f"{kind} never answered as expected: {kinds}"
    reloads = next(c for c in report["checks"] if c["name"] == "every reload took effect")
    assert reloads["asked"] >= 2, reloads
