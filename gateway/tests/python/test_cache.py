"""The exact-match cache against real gateways and a real redis-server /
Redis Cluster started by the harness: L1 and L2 hits, sharing across
gateways and encodings, keys that must not share, TTLs, Cache-Control,
coalescing, and a Redis outage in the middle of traffic.

Tenant scoping (API keys naming tenants) is tested in test_auth.py, and at
the Rust unit level (cache::key tests)."""

import json
import signal
import struct
import threading
import time

import pytest
import requests

from conftest import MODELS, Gateway


def config_text(redis=None, cluster_urls=None, heavy_version=1, route_cache="", l1="16MiB", queue_delay_us=200,
                hold=False):
    if cluster_urls:
        urls = ", ".join(f'"{u}"' for u in cluster_urls)
        l2 = f"redis = {{ urls = [{urls}], timeout_ms = 500, write_timeout_ms = 1000 }}"
    elif redis:
        l2 = (f'redis = {{ url = "{redis}", timeout_ms = 200, breaker_failures = 2, '
              f'breaker_cool_down_ms = 300, connect_timeout_ms = 500 }}')
    else:
        l2 = ""
    cache = f"cache = {{ {route_cache} }}" if route_cache else ""
    return f"""
[repository]
path = "{MODELS}"

[cache]
l1_max_bytes = "{l1}"
{l2}

[[models]]
name = "digits-heavy"
version = {heavy_version}
path = "digits-heavy.onnx"
batching = {{ max_batch_size = 64, max_queue_delay_us = {queue_delay_us}, idle_dispatch = {"false" if hold else "true"} }}

[[routes]]
name = "digits"
models = ["digits-heavy"]
{cache}

[[routes]]
name = "digits2"
models = ["digits-heavy"]
"""


def start(tmp_path, name, **kw):
    path = tmp_path / f"{name}.toml"
    path.write_text(config_text(**kw))
    return Gateway(config=path)


def rows(seed):
    """One distinct [1, 64] row per seed."""
    return [float(seed)] + [float((seed * 31 + i * 7) % 17) / 4.0 for i in range(1, 64)]


def json_infer(gw, seed, route="digits", request_id=None, headers=None):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": rows(seed)}]}
    if request_id:
        body["id"] = request_id
    r = requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return r


def binary_infer(gw, seed, route="digits"):
    header = json.dumps({
        "inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                    "parameters": {"binary_data_size": 256}}],
        "parameters": {"binary_data_output": True},
    }).encode()
    body = header + struct.pack("<64f", *rows(seed))
    r = requests.post(f"{gw.base}/v2/models/{route}/infer", data=body, timeout=30,
                      headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200, r.text
    return r


def outputs(r):
    return {o["name"]: o["data"] for o in r.json()["outputs"]}


def stats(gw):
    return requests.get(f"http://127.0.0.1:{gw.admin_port}/admin/stats", timeout=10).json()


def heavy_requests(gw):
    model = next(m for m in stats(gw)["models"] if m["name"] == "digits-heavy")
    return sum(p["requests"] for p in model["pools"])


def wait_for(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def two_gateways(tmp_path, redis_server):
    a = start(tmp_path, "a", redis=redis_server.url)
    b = start(tmp_path, "b", redis=redis_server.url)
    yield a, b
    a.stop()
    b.stop()


def test_l2_shares_across_gateways_encodings_and_ids(two_gateways, redis_server):
    a, b = two_gateways
    first = json_infer(a, 1, request_id="one")
    assert first.headers["x-cache"] == "miss"
    again = json_infer(a, 1, request_id="two")
    assert again.headers["x-cache"] == "hit-l1"
    assert again.json()["id"] == "two"
    wait_for(lambda: redis_server.dbsize() == 1, what="the background L2 write")
    keys = redis_server.cli("KEYS", "switchyard:v2:*").split()
    assert len(keys) == 1 and len(keys[0]) == len("switchyard:v2:{}") + 64
    # Gateway B: the same tensors sent as binary are an L2 hit, then L1.
    from_b = binary_infer(b, 1)
    assert from_b.headers["x-cache"] == "hit-l2"
    assert from_b.headers["x-switchyard-model"] == "digits-heavy"
    assert json_infer(b, 1, request_id="three").headers["x-cache"] == "hit-l1"
    assert outputs(json_infer(b, 1)) == outputs(first)
    snap = stats(b)["cache"]
    assert snap["l2_hits"] == 1 and snap["l1_hits"] >= 1 and snap["l2_breaker"] == "closed"
    assert heavy_requests(b) == 0, "gateway B never ran the model"


def test_route_and_model_version_are_part_of_the_key(tmp_path, redis_server):
    a = start(tmp_path, "a", redis=redis_server.url)
    v2 = start(tmp_path, "v2", redis=redis_server.url, heavy_version=2)
    try:
        assert json_infer(a, 2).headers["x-cache"] == "miss"
        wait_for(lambda: redis_server.dbsize() == 1, what="the background L2 write")
        assert json_infer(a, 2, route="digits2").headers["x-cache"] == "miss", "another route"
        assert json_infer(v2, 2).headers["x-cache"] == "miss", "another model version"
        wait_for(lambda: redis_server.dbsize() == 3, what="three distinct entries")
    finally:
        a.stop()
        v2.stop()


def test_ttl_expiry_in_both_tiers(tmp_path, redis_server):
    a = start(tmp_path, "a", redis=redis_server.url, route_cache="ttl_s = 1, l2_ttl_s = 1")
    try:
        assert json_infer(a, 3).headers["x-cache"] == "miss"
        assert json_infer(a, 3).headers["x-cache"] == "hit-l1"
        wait_for(lambda: redis_server.dbsize() == 1, what="the background L2 write")
        key = redis_server.cli("KEYS", "switchyard:v2:*")
        assert 0 < int(redis_server.cli("PTTL", key)) <= 1000
        time.sleep(1.3)
        assert redis_server.dbsize() == 0, "Redis expired the entry"
        assert json_infer(a, 3).headers["x-cache"] == "miss", "L1 expired too"
    finally:
        a.stop()


def test_cache_control_and_uncached_targets(tmp_path):
    gw = start(tmp_path, "l1")
    try:
        assert json_infer(gw, 4).headers["x-cache"] == "miss"
        assert json_infer(gw, 4).headers["x-cache"] == "hit-l1"
        runs = heavy_requests(gw)
        # no-store: neither read nor written.
        assert json_infer(gw, 4, headers={"Cache-Control": "no-store"}).headers["x-cache"] == "bypass"
        assert json_infer(gw, 5, headers={"Cache-Control": "no-store"}).headers["x-cache"] == "bypass"
        assert json_infer(gw, 5).headers["x-cache"] == "miss", "no-store stored nothing"
        # no-cache: not read, but the fresh answer is stored.
        assert json_infer(gw, 6, headers={"Cache-Control": "no-cache"}).headers["x-cache"] == "bypass"
        assert json_infer(gw, 6).headers["x-cache"] == "hit-l1", "no-cache refreshed the entry"
        assert json_infer(gw, 4, headers={"cache-control": "max-age=0, no-cache"}).headers["x-cache"] == "bypass"
        assert heavy_requests(gw) - runs == 5
        # A model addressed directly (not a route) is never cached.
        direct = json_infer(gw, 4, route="digits-heavy")
        assert direct.headers["x-cache"] == "bypass"
        # Errors are not cached: a bad request stays a 400 and stores nothing.
        bad = {"inputs": [{"name": "X", "shape": [1, 63], "datatype": "FP32", "data": rows(7)[:63]}]}
        for _ in range(2):
            r = requests.post(f"{gw.base}/v2/models/digits/infer", json=bad, timeout=30)
            assert r.status_code == 400 and "x-cache" not in r.headers
        snap = stats(gw)["cache"]
        assert snap["enabled"] and not snap["l2_configured"] and snap["l2_breaker"] == "none"
        assert snap["l1_entries"] >= 2 and snap["l1_bytes"] > 0
    finally:
        gw.stop()


def test_coalescing_fifty_identical_requests_run_once(tmp_path):
    # The batcher holds the one queued request up to 1 s waiting for more
    # rows (`idle_dispatch = false`: even though the pool is idle), so all 50 identical requests arrive while it is in flight and
    # the coalescing is observed deterministically, however loaded the
    # machine is.
    gw = start(tmp_path, "coalesce", queue_delay_us=1_000_000, hold=True)
    try:
        n = 50
        barrier = threading.Barrier(n)
        results = [None] * n

        def call(i):
            session = requests.Session()
            barrier.wait()
            results[i] = json_infer(gw, 8) if session else None

        threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert all(r is not None for r in results)
        assert heavy_requests(gw) == 1, "one model execution for 50 identical requests"
        first = outputs(results[0])
        assert all(outputs(r) == first for r in results)
        kinds = [r.headers["x-cache"] for r in results]
        assert set(kinds) <= {"miss", "hit-l1"}
        snap = stats(gw)["cache"]
        assert snap["coalesced"] + snap["l1_hits"] == n - 1
        assert snap["coalesced"] >= 1, f"no request waited for the in-flight one: {kinds}"
    finally:
        gw.stop()


def test_redis_outage_costs_no_requests_and_l2_comes_back(two_gateways, redis_server):
    a, b = two_gateways
    failures = 0
    slow = 0
    for i in range(120):
        if i == 40:
            redis_server.kill()
        started = time.monotonic()
        body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": rows(100 + i)}]}
        r = requests.post(f"{a.base}/v2/models/digits/infer", json=body, timeout=30)
        failures += r.status_code != 200
        slow += time.monotonic() - started > 0.2
    assert failures == 0
    snap = stats(a)["cache"]
    assert snap["l2_errors"] >= 1 and snap["l2_skipped"] >= 1, snap
    assert slow <= 5, f"{slow} requests were slowed by the outage"
    # Redis comes back on the same port (empty): after the cool-down a probe
    # closes the breaker and writes reach it again.
    redis_server.start()
    seed = 1000

    def written():
        nonlocal seed
        seed += 1
        json_infer(a, seed)
        time.sleep(0.1)
        return redis_server.dbsize() > 0

    wait_for(written, timeout=10, what="L2 writes after the restart")
    assert stats(a)["cache"]["l2_breaker"] == "closed"
    last = redis_server.cli("KEYS", "switchyard:v2:*").split()
    assert last
    hits = [binary_infer(b, s).headers["x-cache"] for s in range(1001, seed + 1)]
    assert "hit-l2" in hits, hits


def test_stalled_redis_is_skipped_by_the_breaker(tmp_path, redis_server):
    """A Redis that accepts connections but never answers (SIGSTOP): only
    the requests that open the breaker, and one probe per cool-down, wait
    for the 200 ms timeout; the rest skip L2."""
    gw = start(tmp_path, "stall", redis=redis_server.url)
    try:
        json_infer(gw, 300)
        redis_server.proc.send_signal(signal.SIGSTOP)
        slow = 0
        started = time.monotonic()
        for seed in range(301, 341):
            t = time.monotonic()
            json_infer(gw, seed)
            slow += time.monotonic() - t > 0.15
        elapsed = time.monotonic() - started
        probes = int(elapsed / 0.3) + 1
        assert slow <= 2 + probes, f"{slow} slow requests in {elapsed:.2f}s"
        assert stats(gw)["cache"]["l2_skipped"] > 0
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
        gw.stop()


def test_redis_cluster_shares_between_gateways(tmp_path, redis_cluster):
    a = start(tmp_path, "ca", cluster_urls=redis_cluster.urls)
    b = start(tmp_path, "cb", cluster_urls=redis_cluster.urls)
    try:
        seeds = range(200, 212)
        assert all(json_infer(a, s).headers["x-cache"] == "miss" for s in seeds)
        total = lambda: sum(n.dbsize() for n in redis_cluster.nodes)  # noqa: E731
        wait_for(lambda: total() == len(seeds), what="writes to the cluster")
        assert sum(n.dbsize() > 0 for n in redis_cluster.nodes) >= 2, "keys spread over the masters"
        assert all(binary_infer(b, s).headers["x-cache"] == "hit-l2" for s in seeds)
        assert stats(b)["cache"]["l2_hits"] == len(seeds)
    finally:
        a.stop()
        b.stop()
