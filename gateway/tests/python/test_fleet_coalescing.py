"""Fleet-wide coalescing on real processes (issue 17, item 3b): two gateway
replicas on one real redis-server, a route with `fleet_coalesce = true`.
Identical concurrent misses split across the replicas run the model once
in the whole fleet; when the replica computing it is killed, the others
still answer (after at most `fleet_wait_ms`). The pools are paused while
the requests arrive, so who computes and who waits does not depend on
timing."""

import json
import threading
import time

import numpy as np
import pytest
import requests

from conftest import Gateway, RedisCluster, RedisServer
from routing_util import infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for

ROWS = 8

CONFIG = """
[cache]
redis = {{ {redis}, timeout_ms = 500 }}

[[models]]
name = "synth-heavy"
path = "{models}/synth-heavy.onnx"
warmup = true
pools = [{{ device = "cpu", workers = 1, intra_op_threads = 1 }}]

[[routes]]
name = "heavy"
models = ["synth-heavy"]
budget_ms = {{ default = 60000, max = 60000 }}
cache = {{ fleet_coalesce = true, fleet_wait_ms = {wait_ms} }}
"""


def redis_setting(redis):
    if isinstance(redis, RedisCluster):
        return "urls = [" + ", ".join(f'"{u}"' for u in redis.urls) + "]"
    return f'url = "{redis.url}"'


def replicas(tmp_path, redis, wait_ms):
    gws = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        config = CONFIG.format(redis=redis_setting(redis), wait_ms=wait_ms, models="{models}")
        gws.append(Gateway(config=write_config(tmp_path / name, config)))
    return gws


def body(seed):
    return infer_body(np.random.default_rng(seed).uniform(0, 16, size=(ROWS, 64)))


def send_all(targets, payload):
    """Sends `payload` once per target, concurrently; returns the threads
    and the list their (status, headers, json) land in."""
    results, lock = [], threading.Lock()

    def one(gw):
        try:
            r = requests.post(f"{gw.base}/v2/models/heavy/infer", json=payload, timeout=60)
            result = (r.status_code, dict(r.headers), r.json() if r.status_code == 200 else r.text)
        except requests.RequestException as e:  # the killed owner's own client
            result = (None, {}, repr(e))
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one, args=(gw,)) for gw in targets]
    for t in threads:
        t.start()
    return threads, results


def cache_stats(gw):
    return requests.get(f"{gw.admin}/admin/stats", timeout=5).json()["cache"]


@pytest.mark.parametrize("store", ["redis", "cluster"])
def test_identical_misses_across_two_replicas_run_once_in_the_fleet(tmp_path, store):
    """On one redis-server, and on a 3-master Redis Cluster (the value and
    its marker share a slot, so one script reads and claims)."""
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis") if store == "redis" else RedisCluster(tmp_path / "redis")
    a, b = replicas(tmp_path, redis, wait_ms=20000)
    try:
        before = [pool_stats(gw, "synth-heavy")["executed_rows"] for gw in (a, b)]
        for gw in (a, b):
            pause(gw, "synth-heavy")
        threads, results = send_all([a, b] * 32, body(1))
        # One replica's leader holds the marker and waits on its paused
        # pool; the other's waits for it; every request has joined one.
        wait_for(lambda: sum(pool_stats(gw, "synth-heavy")["queue_depth"] for gw in (a, b)) == 1,
                 "the fleet's one computation to be queued")
        time.sleep(0.3)
        for gw in (a, b):
            resume(gw, "synth-heavy")
        for t in threads:
            t.join(timeout=60)
        assert len(results) == 64 and all(r[0] == 200 for r in results), [r[:1] + r[2:] for r in results[:3]]
        outputs = {json.dumps(r[2]["outputs"], sort_keys=True) for r in results}
        assert len(outputs) == 1
        executed = sum(pool_stats(gw, "synth-heavy")["executed_rows"] - n for gw, n in zip((a, b), before))
        assert executed == ROWS, f"{executed // ROWS} executions in the fleet for 64 identical requests"
        served = sum(cache_stats(gw)["fleet_served"] for gw in (a, b))
        assert served == 1, "the other replica's leader took the owner's answer from Redis"
    finally:
        a.stop()
        b.stop()
        redis.stop()


def test_waiters_still_answer_when_the_owner_is_killed(tmp_path):
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis")
    a, b = replicas(tmp_path, redis, wait_ms=1500)
    try:
        b_before = pool_stats(b, "synth-heavy")["executed_rows"]
        pause(a, "synth-heavy")
        owner_threads, _ = send_all([a], body(2))
        wait_for(lambda: pool_stats(a, "synth-heavy")["queue_depth"] == 1, "the owner's computation to be queued")
        threads, results = send_all([b] * 16, body(2))
        wait_for(lambda: cache_stats(b)["l2_misses"] >= 1, "the replica to find the owner's marker")
        time.sleep(0.2)
        assert not results, "the waiting replica answered while the owner still held the computation"
        a.proc.kill()
        a.proc.wait()
        for t in threads:
            t.join(timeout=30)
        assert len(results) == 16 and all(r[0] == 200 for r in results), results[:2]
        stats = cache_stats(b)
        assert stats["fleet_waits"] == 1 and stats["fleet_served"] == 0, stats
        executed = pool_stats(b, "synth-heavy")["executed_rows"] - b_before
        assert executed == ROWS, "the waiting replica computed its own answer, once"
        for t in owner_threads:
            t.join(timeout=5)
    finally:
        a.stop()
        b.stop()
        redis.stop()
