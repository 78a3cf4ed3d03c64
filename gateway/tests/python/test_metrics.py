"""Prometheus `/metrics` on the admin listener: the page passes
`promtool check metrics` (Prometheus's own linter, from Debian's
`prometheus` package), and counters and histograms move as requests flow:
requests, durations, cache tiers, routing decisions, pool executions and
batch/queue histograms, model loads, and upstream attempts (V2 calls and
proxied prefix-route requests, with real upstream processes). Label values
never come from what clients send."""

import os
import re
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
import requests

from conftest import MODELS, REPO, Gateway, free_port
from proxy_util import upstream_app
from routing_util import infer_body

CONFIG = f"""
[repository]
path = "{MODELS}"

[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "digits-cheap.onnx"

[[models]]
name = "digits-heavy"
path = "digits-heavy.onnx"
batching = {{ max_batch_size = 16, max_queue_delay_us = 200 }}

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = 0.8 }}
"""


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or str(REPO / ".cache" / "prometheus" / "promtool")
    if not Path(found).is_file():
        found = shutil.which("promtool")
    assert found, "promtool missing: run `scripts/setup.sh test` (or set PROMTOOL)"
    return found


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    path = tmp_path_factory.mktemp("metrics") / "metrics.toml"
    path.write_text(CONFIG)
    g = Gateway(config=path)
    yield g
    g.stop()


def scrape(gw) -> str:
    r = requests.get(f"http://127.0.0.1:{gw.admin_port}/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{name: {frozenset(labels): value}}"""
    out = defaultdict(dict)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"unparseable sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        out[m.group(1)][labels] = float(m.group(3))
    return out


def value(metrics, name, **labels):
    """Sum of `name` over series whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for k, v in metrics.get(name, {}).items() if want <= set(k))


def sample(gw, name, **labels):
    """`name` on gw's page now, summed over series whose labels include
    `labels`; fails when there is no such series."""
    series = parse(scrape(gw)).get(name, {})
    want = set(labels.items())
    found = [v for k, v in series.items() if want <= set(k)]
    assert found, f"no {name} sample with {labels}"
    return sum(found)


def infer(gw, seed, model="digits", rows=1):
    data = [float((seed * 37 + i * 11) % 16) for i in range(64 * rows)]
    body = {"inputs": [{"name": "X", "shape": [rows, 64], "datatype": "FP32", "data": data}]}
    return requests.post(f"{gw.base}/v2/models/{model}/infer", json=body, timeout=30)


def test_page_passes_promtool(gw):
    assert infer(gw, 1).status_code == 200
    text = scrape(gw)
    out = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "", f"promtool: {out.stdout}{out.stderr}"
    for family in ["switchyard_requests_total", "switchyard_request_duration_seconds",
                   "switchyard_cache_hits_total", "switchyard_routing_decisions_total",
                   "switchyard_pool_batch_size_rows", "switchyard_pool_batch_execution_seconds",
                   "switchyard_pool_queue_wait_seconds", "switchyard_model_cold_start_seconds",
                   "switchyard_pool_queue_depth", "switchyard_pool_in_flight"]:
        assert f"# TYPE {family} " in text, family


def test_counters_move_with_requests(gw):
    before = parse(scrape(gw))
    seeds = [100 + i for i in range(4)]
    for s in seeds:
        assert infer(gw, s).status_code == 200
    for s in seeds:  # the same requests again: L1 hits
        r = infer(gw, s)
        assert r.status_code == 200 and r.headers["x-cache"] == "hit-l1"
    assert infer(gw, 200, model="digits-heavy", rows=3).status_code == 200  # direct model: no cache
    after = parse(scrape(gw))

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("switchyard_requests_total", route="digits", endpoint="infer", status="200") == 8
    assert delta("switchyard_requests_total", route="digits-heavy", endpoint="infer", status="200") == 1
    assert delta("switchyard_request_duration_seconds_count", route="digits", endpoint="infer") == 8
    assert delta("switchyard_request_duration_seconds_sum", route="digits", endpoint="infer") > 0
    assert delta("switchyard_cache_hits_total", tier="l1") == 4
    assert delta("switchyard_cache_misses_total", tier="l1") == 4
    assert delta("switchyard_cache_stores_total") == 4
    assert delta("switchyard_cache_bypass_total") == 1
    assert delta("switchyard_routing_decisions_total", route="digits") == 4, "hits are not decisions"
    assert delta("switchyard_routing_decisions_total", route="digits-heavy", model="digits-heavy",
                 device="cpu", reason="fixed") == 1

    # Every model run is a pool execution with its histograms.
    executions = delta("switchyard_pool_executions_total")
    assert executions >= 5, "4 cascade misses (cheap, maybe heavy) + 1 direct"
    assert delta("switchyard_pool_batch_size_rows_count") == executions
    assert delta("switchyard_pool_batch_execution_seconds_count") == executions
    assert delta("switchyard_pool_queue_wait_seconds_count") == delta("switchyard_pool_requests_total")
    assert delta("switchyard_pool_batch_size_rows_sum", model="digits-heavy") >= 3
    # The three-row batch is counted in the le="4" bucket and above, not in le="2".
    assert delta("switchyard_pool_batch_size_rows_bucket", model="digits-heavy", le="4") >= 1
    heavy_le2 = delta("switchyard_pool_batch_size_rows_bucket", model="digits-heavy", le="2")
    heavy_le4 = delta("switchyard_pool_batch_size_rows_bucket", model="digits-heavy", le="4")
    assert heavy_le4 - heavy_le2 >= 1
    assert value(after, "switchyard_model_loads_total", model="digits-cheap") == 1
    assert value(after, "switchyard_model_state", model="digits-cheap", state="ready") == 1
    assert value(after, "switchyard_model_cold_start_seconds_count", model="digits-cheap") == 1
    assert value(after, "switchyard_pool_queue_depth", model="digits-cheap") == 0
    assert value(after, "switchyard_requests_in_flight") == 0


def test_errors_are_counted_and_unknown_names_add_no_labels(gw):
    before = parse(scrape(gw))
    assert requests.post(f"{gw.base}/v2/models/no-such-model-42/infer", json={}, timeout=10).status_code == 404
    assert requests.post(f"{gw.base}/v2/models/digits/infer", data=b"{", timeout=10).status_code == 400
    assert requests.get(f"{gw.base}/nowhere", timeout=10).status_code == 404
    assert requests.get(f"{gw.base}/v2/health/ready", timeout=10).status_code == 200
    text = scrape(gw)
    after = parse(text)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("switchyard_requests_total", route="_other", endpoint="infer", status="404") == 1
    assert delta("switchyard_requests_total", route="digits", endpoint="infer", status="400") == 1
    assert delta("switchyard_requests_total", route="_other", endpoint="other", status="404") == 1
    assert delta("switchyard_requests_total", route="_other", endpoint="health", status="200") == 1
    assert "no-such-model-42" not in text and "nowhere" not in text


def l2_config(redis_url):
    return CONFIG.replace(
        'l1_max_bytes = "16MiB"',
        f'l1_max_bytes = "16MiB"\nredis = {{ url = "{redis_url}", timeout_ms = 200, breaker_failures = 1, '
        f'breaker_cool_down_ms = 60000, connect_timeout_ms = 500 }}')


def wait_until(cond, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_l2_tiers_errors_and_breaker_state(tmp_path, redis_server):
    """A real redis-server: L2 misses, writes and hits per tier, then an
    outage: L2 errors counted and the breaker reported open."""
    path = tmp_path / "l2.toml"
    path.write_text(l2_config(redis_server.url))
    a, b = Gateway(config=path), Gateway(config=path)
    try:
        assert infer(a, 500).status_code == 200  # L1 and L2 miss; written to Redis
        wait_until(lambda: redis_server.dbsize() > 0, "the background L2 write")
        r = infer(b, 500)  # a fresh L1: answered from Redis
        assert r.headers["x-cache"] == "hit-l2"
        ma, mb = parse(scrape(a)), parse(scrape(b))
        assert value(ma, "switchyard_cache_misses_total", tier="l2") == 1
        assert value(ma, "switchyard_cache_l2_writes_total") == 1
        assert value(mb, "switchyard_cache_hits_total", tier="l2") == 1
        assert value(mb, "switchyard_cache_misses_total", tier="l1") == 1
        assert value(mb, "switchyard_cache_l2_breaker_state", state="closed") == 1
        assert value(mb, "switchyard_cache_l2_errors_total") == 0

        redis_server.kill()
        assert infer(b, 501).status_code == 200, "an outage costs no request"
        text = scrape(b)
        mb = parse(text)
        assert value(mb, "switchyard_cache_l2_errors_total") >= 1
        assert value(mb, "switchyard_cache_l2_breaker_state", state="open") == 1
        assert value(mb, "switchyard_cache_l2_breaker_state", state="closed") == 0
        out = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "", f"promtool: {out.stdout}{out.stderr}"
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="module")
def upstreams():
    started = {"app": upstream_app("app"), "fast": upstream_app("v2-slow", 0),
               "slow": upstream_app("v2-slow", 5000)}
    yield started
    for app in started.values():
        app.stop()


@pytest.fixture(scope="module")
def front(upstreams, tmp_path_factory):
    """Prefix routes to a live app and to a dead address; V2 route members
    on a fast and on a slow upstream."""
    config = f"""
[[upstreams]]
name = "app"
addrs = ["{upstreams['app'].addr}"]
health = {{ path = "/health" }}

[[upstreams]]
name = "nowhere"
addrs = ["127.0.0.1:{free_port()}"]
timeouts = {{ connect_ms = 500 }}
health = {{ enabled = false }}

[[upstreams]]
name = "fast"
kind = "v2"
addrs = ["{upstreams['fast'].addr}"]
models = [{{ name = "fast-remote", model = "digits" }}]

[[upstreams]]
name = "slow"
kind = "v2"
addrs = ["{upstreams['slow'].addr}"]
models = [{{ name = "slow-remote", model = "digits" }}]

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"

[[prefix_routes]]
name = "nowhere"
prefix = "/apps/nowhere/"
upstream = "nowhere"

[[routes]]
name = "fast"
models = ["fast-remote"]

[[routes]]
name = "slow"
models = ["slow-remote"]
budget_ms = {{ default = 200 }}
"""
    path = tmp_path_factory.mktemp("upstream-metrics") / "front.toml"
    path.write_text(config)
    gw = Gateway(config=path)
    yield gw
    gw.stop()


def test_upstream_attempts_and_prefix_route_requests(front, upstreams):
    before = parse(scrape(front))
    row = infer_body([[0.0] * 64])
    for i in range(3):
        assert requests.get(f"{front.base}/apps/app/echo?i={i}", timeout=10).status_code == 200
    assert requests.get(f"{front.base}/apps/app/status?code=500", timeout=10).status_code == 500
    assert requests.get(f"{front.base}/apps/nowhere/x", timeout=10).status_code == 502
    for _ in range(2):
        assert requests.post(f"{front.base}/v2/models/fast/infer", json=row, timeout=10).status_code == 200
    assert requests.post(f"{front.base}/v2/models/slow/infer", json=row, timeout=10).status_code == 504
    # A request is counted in its logging phase, just after its answer is
    # sent: wait (briefly) until all 9 are in.
    deadline = time.monotonic() + 5
    while True:
        text = scrape(front)
        after = parse(text)
        counted = value(after, "switchyard_requests_total") - value(before, "switchyard_requests_total")
        if counted >= 9 or time.monotonic() > deadline:
            break
        time.sleep(0.02)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    attempts = "switchyard_upstream_attempts_total"
    assert delta(attempts, upstream="app", via="proxy", outcome="ok") == 3
    assert delta(attempts, upstream="app", via="proxy", outcome="server_error") == 1
    assert delta(attempts, upstream="nowhere", via="proxy", outcome="connect_error") == 1
    assert delta(attempts, upstream="fast", via="v2", outcome="ok") == 2
    assert delta(attempts, upstream="slow", via="v2", outcome="timeout") == 1
    assert delta(attempts) == 8, "nothing else was attempted"
    duration = "switchyard_upstream_attempt_duration_seconds"
    assert delta(f"{duration}_count", upstream="app", via="proxy") == 4
    assert delta(f"{duration}_count", upstream="slow", via="v2") == 1
    # The timed-out attempt waited for (most of) the 200 ms budget.
    assert delta(f"{duration}_sum", upstream="slow", via="v2") >= 0.1
    assert delta(f"{duration}_bucket", upstream="slow", via="v2", le="0.05") == 0

    # Prefix-route requests count under their route, endpoint `proxy`.
    reqs = "switchyard_requests_total"
    assert delta(reqs, route="app", endpoint="proxy", status="200") == 3
    assert delta(reqs, route="app", endpoint="proxy", status="500") == 1
    assert delta(reqs, route="nowhere", endpoint="proxy", status="502") == 1
    assert delta(reqs, route="fast", endpoint="infer", status="200") == 2
    assert delta(reqs, route="slow", endpoint="infer", status="504") == 1
    assert delta("switchyard_request_duration_seconds_count", route="app", endpoint="proxy") == 4
    assert delta(reqs, route="_other") == 0

    # Low cardinality: no paths, queries or addresses in label values.
    for leaked in ["/apps/", "echo", "i=2", "code=500", *(a.addr for a in upstreams.values())]:
        assert leaked not in text, leaked
    out = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "", f"promtool: {out.stdout}{out.stderr}"
