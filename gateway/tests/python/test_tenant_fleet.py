"""Fleet-wide tenant limits against the real binary (issue 41, item 2):
with `[fleet_limits]`, a tenant's request rate and daily quota are held in
the cache's Redis (one atomic script per request, keys hash-tagged by
tenant), so two gateway replicas sharing one Redis (or a Redis Cluster)
admit one tenant's limit in total, not once each. While Redis is
unreachable each replica falls back to its local share (limit /
`replicas`; `fail = "open"`, the default) or refuses with 503 (`fail =
"closed"`). Every count is exact or bounded by a wait the test measures
itself: no timing is asserted."""

import threading
import time

import numpy as np
import pytest
import requests

from conftest import Gateway, RedisCluster
from routing_util import infer_body, write_config

KEYS = {t: f"key-of-{t}-0123456789abcdef" for t in ["daily", "rate", "load", "free", "share"]}

CONFIG = """
[cache]
l1_max_bytes = "16MiB"
redis = {redis}

[fleet_limits]
replicas = 2
fail = "{fail}"

[[models]]
name = "digits-cheap"
path = "{{models}}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
budget_ms = {{ default = 10000, max = 20000 }}
auth = {{ keys = [{keys}] }}

[[tenants]]
name = "daily"
limits = {{ requests_per_day = 50 }}

[[tenants]]
name = "rate"
limits = {{ requests_per_s = 1, burst = 30 }}

[[tenants]]
name = "load"
limits = {{ requests_per_s = 100000, burst = 100000 }}

[[tenants]]
name = "share"
limits = {{ requests_per_day = 40 }}
"""

# A generous command timeout: a busy 2-core machine must not make the
# script time out (which would fall back to the local share).
SINGLE = '{{ url = "{url}", timeout_ms = 2000, write_timeout_ms = 2000 }}'
CLUSTER = '{{ urls = [{urls}], timeout_ms = 2000, write_timeout_ms = 2000 }}'


def replicas(tmp_path, redis, fail="open"):
    keys = ", ".join(f'{{ key = "{k}", tenant = "{t}" }}' for t, k in KEYS.items())
    gateways = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir(exist_ok=True)
        body = CONFIG.format(redis=redis, fail=fail, keys=keys)
        gateways.append(Gateway(config=write_config(tmp_path / name, body)))
    return gateways


def infer(gw, tenant, seed, session=requests):
    x = np.random.default_rng(seed).uniform(0, 16, size=(1, 64)).astype(np.float32)
    return session.post(f"{gw.base}/v2/models/digits/infer", json=infer_body(x),
                        headers={"x-api-key": KEYS[tenant]}, timeout=30)


def blast(gateways, tenant, n, threads=4, seed=0):
    """`n` requests of `tenant` spread over `gateways`, from `threads`
    clients sending as fast as they can; the status codes, per gateway."""
    codes = {id(g): [] for g in gateways}
    lock = threading.Lock()

    def client(k):
        session = requests.Session()
        for i in range(k, n, threads):
            gw = gateways[i % len(gateways)]
            status = infer(gw, tenant, seed * 100_000 + i, session).status_code
            with lock:
                codes[id(gw)].append(status)

    workers = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    return [codes[id(g)] for g in gateways]


def wait_until(done, timeout=120):
    """Waits for `done()`; fails when the load stalls (no speed is asserted)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the load stalled"
        time.sleep(0.02)


def admitted(per_gateway):
    return sum(c.count(200) for c in per_gateway)


def assert_only_200_or_429(per_gateway):
    odd = [c for codes in per_gateway for c in codes if c not in (200, 429)]
    assert not odd, f"failed requests: {odd[:5]}"


@pytest.fixture
def fleet(tmp_path, redis_server):
    gateways = replicas(tmp_path, SINGLE.format(url=redis_server.url))
    yield gateways
    for g in gateways:
        g.stop()


def test_a_daily_quota_of_50_holds_across_two_replicas_in_total(fleet, redis_server):
    codes = blast(fleet, "daily", 120)
    assert_only_200_or_429(codes)
    assert admitted(codes) == 50, [c.count(200) for c in codes]
    assert all(c.count(200) > 0 for c in codes), "both replicas admitted some"
    last = infer(fleet[0], "daily", 999)
    assert last.status_code == 429 and last.headers["ratelimit"].startswith('"daily";r=0;t='), last.headers
    for g in fleet:
        metrics = requests.get(f"{g.admin}/metrics", timeout=5).text
        assert 'switchyard_tenant_quota_left{tenant="daily",route="*"} 0' in metrics, "the fleet's count, not its own"
    keys = redis_server.cli("KEYS", "*tenant*").split()
    assert "switchyard:tenant:{daily}:all:day" in keys, keys


def test_a_request_rate_holds_across_two_replicas_in_total(fleet):
    # 1/s with a burst of 30: over a run of T seconds the fleet admits at
    # most 30 + T (+1 for the cell in progress); each replica alone would
    # admit that much on its own, about twice as many in total.
    started = time.monotonic()
    codes = blast(fleet, "rate", 200)
    elapsed = time.monotonic() - started
    assert_only_200_or_429(codes)
    bound = 30 + int(elapsed) + 2
    assert 30 <= admitted(codes) <= bound, (admitted(codes), elapsed, [c.count(200) for c in codes])


def test_redis_killed_mid_load_fails_no_request_and_each_replica_keeps_its_local_share(fleet, redis_server):
    # `share` spends 10 of its 40 a day in the fleet, then Redis dies.
    assert admitted(blast(fleet, "share", 10)) == 10
    stop, results = threading.Event(), [[], []]

    def load(k):
        session, i = requests.Session(), 0
        while not stop.is_set():
            try:
                results[k].append(infer(fleet[k], "load", 1_000_000 * (k + 1) + i, session).status_code)
            except requests.RequestException as e:
                results[k].append(repr(e))
            i += 1

    loaders = [threading.Thread(target=load, args=(k,)) for k in (0, 1)]
    for t in loaders:
        t.start()
    try:
        wait_until(lambda: min(len(r) for r in results) >= 20)
        redis_server.kill()
        before = [len(r) for r in results]
        wait_until(lambda: min(len(r) - b for r, b in zip(results, before)) >= 50)
    finally:
        stop.set()
        for t in loaders:
            t.join(timeout=60)
    assert_only_200_or_429(results)
    assert all(r.count(200) == len(r) for r in results), "the load tenant's limit is far away"
    # Without Redis each replica enforces its share: 40 / 2 = 20 a day,
    # counted from the outage on.
    codes = [blast([g], "share", 35, seed=7 + k)[0] for k, g in enumerate(fleet)]
    assert_only_200_or_429(codes)
    assert [c.count(200) for c in codes] == [20, 20], codes
    refused = infer(fleet[0], "share", 4242)
    assert refused.status_code == 429
    assert '"daily";q=20;w=86400' in refused.headers["ratelimit-policy"], refused.headers
    assert infer(fleet[1], "free", 1).status_code == 200, "a tenant without limits never needs Redis"
    for g in fleet:
        assert g.alive()


def test_fail_closed_refuses_limited_tenants_while_redis_is_down(tmp_path, redis_server):
    gateways = replicas(tmp_path, SINGLE.format(url=redis_server.url), fail="closed")
    try:
        assert infer(gateways[0], "daily", 1).status_code == 200
        redis_server.kill()
        for seed in range(5):
            r = infer(gateways[seed % 2], "daily", 10 + seed)
            assert r.status_code == 503, r.text
            assert "fleet" in r.json()["error"], r.text
        assert infer(gateways[1], "free", 1).status_code == 200, "a tenant without limits is not refused"
        metrics = requests.get(f"{gateways[0].admin}/metrics", timeout=5).text
        assert 'switchyard_tenant_limited_total{tenant="daily",limit="fleet_unavailable"} 3' in metrics, "3 of the 5 went to a"
    finally:
        for g in gateways:
            g.stop()


def test_a_daily_quota_holds_across_two_replicas_on_a_redis_cluster(tmp_path):
    (tmp_path / "cluster").mkdir()
    cluster = RedisCluster(tmp_path / "cluster")
    gateways = []
    try:
        urls = ", ".join(f'"{u}"' for u in cluster.urls)
        gateways = replicas(tmp_path, CLUSTER.format(urls=urls))
        codes = blast(gateways, "daily", 90)
        assert_only_200_or_429(codes)
        assert admitted(codes) == 50, [c.count(200) for c in codes]
        # Both scopes' keys of a tenant live in its hash slot.
        slots = {n.cli("CLUSTER", "KEYSLOT", "switchyard:tenant:{daily}:all:day") for n in cluster.nodes}
        assert len(slots) == 1
    finally:
        for g in gateways:
            g.stop()
        cluster.stop()
