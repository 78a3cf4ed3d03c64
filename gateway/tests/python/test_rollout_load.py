"""Live traffic is never shed nor queued behind a candidate (issue 43):
the same gateway under the same concurrent load, first without a
candidate, then with one posted (`POST /admin/rollouts/{route}`, every call
drawn) that is slow (each run waits 500 ms for company in its batch), so
it is busy most of the time. Both phases answer every live call 200 with
no shed or rejected request (the live pool's counters and the gateway's
429/503 count stay 0); with the candidate on, every drawn call is either
mirrored or counted as skipped because the candidate was busy, the
candidate ran exactly the mirrored calls (nothing waited for it), and some
draws were skipped.

Latency is not asserted (no timing asserts): the p99 with the candidate on
vs off is measured by benchmarks/rollout_bench.sh (figures in
benchmarks/NOTES.md)."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import requests

from conftest import MODELS
from sse_util import admin, pool_stats, wait_for
from test_rollout import models, rollout, start

X = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
CLIENTS = 4
CALLS = 30
SLOW = "batching = { max_batch_size = 64, max_queue_delay_us = 500000, idle_dispatch = false, inline_max_us = 0 }"


def load(gw):
    """CLIENTS threads, CALLS calls each, one to four rows a call: the statuses."""
    def client(c):
        session, statuses = requests.Session(), []
        for i in range(CALLS):
            rows = X[(c * CALLS + i) % 400:][: 1 + i % 4]
            body = {"inputs": [{"name": "X", "shape": list(rows.shape), "datatype": "FP32",
                                "data": rows.ravel().tolist()}]}
            statuses.append(session.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=60).status_code)
        return statuses
    with ThreadPoolExecutor(CLIENTS) as pool:
        return [s for statuses in pool.map(client, range(CLIENTS)) for s in statuses]


def shed(gw):
    """Live calls refused so far: the live pool's rejections and the gateway's 429/503 answers."""
    metrics = requests.get(f"{gw.admin}/metrics", timeout=10).text
    refused = sum(float(v) for v in re.findall(r'^switchyard_requests_total\{[^}]*status="(?:429|503)"[^}]*\} (\S+)',
                                               metrics, re.M))
    return pool_stats(gw, "digits-cheap")["rejected"], refused


def test_live_calls_are_neither_shed_nor_queued_behind_a_busy_candidate(tmp_path):
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-cheap-slow", "digits-cheap", SLOW)) + (
        '\n[[routes]]\nname = "digits"\nmodels = ["digits-cheap"]\nbudget_ms = { default = 10000, max = 20000 }\n')
    gw = start(tmp_path, body)
    try:
        off = load(gw)
        assert off == [200] * len(off), off
        assert shed(gw) == (0, 0), "no shed without a candidate"
        posted = requests.post(f"{gw.admin}/admin/rollouts/digits",
                               json={"model": "digits-cheap-slow", "share": 1.0, "cpu_ceiling": 1.0}, timeout=60)
        assert posted.status_code == 200, posted.text
        on = load(gw)
        assert on == [200] * len(on), on
        assert shed(gw) == (0, 0), "no shed with the candidate on either"
        c = wait_for(lambda: (c := rollout(gw)["comparison"])["candidate_calls"] + c["skipped_busy"]
                     + c["skipped_cpu"] >= len(on) and c,
                     "every drawn call mirrored or skipped", timeout=120)
        assert c["live_calls"] == len(on) and c["live_errors"] == 0
        assert c["candidate_calls"] + c["skipped_busy"] + c["skipped_cpu"] == len(on), c
        assert c["skipped_busy"] > 0, "a candidate busy for 500 ms a run is skipped, not queued"
        assert c["candidate_calls"] > 0 and c["candidate_errors"] == 0
        slow = pool_stats(gw, "digits-cheap-slow")
        assert slow["requests"] == c["candidate_calls"] and slow["rejected"] == 0 and slow["queue_depth"] == 0, slow
        assert pool_stats(gw, "digits-cheap")["requests"] == len(off) + len(on), "live calls only on live"
        assert admin(gw, "/admin/stats")["rollouts"]["digits"]["state"] == "mirroring"
    finally:
        gw.stop()
