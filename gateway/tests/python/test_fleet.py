"""Several real gateway processes acting as one fleet (issue 17, item 3):
a front Switchyard balancing over two gateway replicas that are restarted
in turn with SIGTERM under steady load, and replicas sharing a Redis
Cluster whose node dies under load. The client keeps a ledger of every
request; none may fail."""

import json
import signal
import socket
import threading
import time

import numpy as np
import requests

from conftest import MODELS, REPO, Gateway, RedisCluster
from routing_util import infer_body, write_config

REPLICA = """
[server]
shutdown_grace_s = 10
shutdown_notice_ms = 600

[cache]
{redis}

[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-heavy"]
"""

FRONT = """
[[upstreams]]
name = "replicas"
kind = "v2"
addrs = ["{a}", "{b}"]
health = {{ interval_ms = 100 }}
models = [{{ name = "digits-fleet", model = "digits" }}]

[[routes]]
name = "digits"
models = ["digits-fleet"]
budget_ms = {{ default = 5000 }}
cache = {{ enabled = false }}
"""


class Ledger:
    """Keep-alive clients sending distinct requests to `url` until stopped;
    every request's outcome is kept."""

    def __init__(self, url, clients=6):
        self.url, self.results, self.lock, self.stop = url, [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(clients)]
        for t in self.threads:
            t.start()

    def _run(self, k):
        session, rng = requests.Session(), np.random.default_rng(k)
        while not self.stop.is_set():
            body = infer_body(rng.uniform(0, 16, size=(1, 64)))
            try:
                r = session.post(self.url, json=body, timeout=10)
                outcome = (r.status_code, r.text[:200])
            except requests.RequestException as e:
                outcome = (None, repr(e))
            with self.lock:
                self.results.append(outcome)

    def count(self):
        with self.lock:
            return len(self.results)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        return self.results


def replica(tmp_path, name, redis="", port=None, admin_port=None):
    config = write_config(tmp_path / name, REPLICA.format(redis=redis, models="{models}"))
    return Gateway(config=config, port=port, admin_port=admin_port)


def restart_with_sigterm(gw, tmp_path, name, redis=""):
    """SIGTERM, wait for the graceful exit, start again on the same ports."""
    gw.proc.send_signal(signal.SIGTERM)
    assert gw.proc.wait(timeout=30) == 0, gw.log_text()
    gw.log.close()
    return replica(tmp_path, name, redis, port=gw.port, admin_port=gw.admin_port)


def wait_for_more(ledger, n, timeout=30):
    target = ledger.count() + n
    deadline = time.monotonic() + timeout
    while ledger.count() < target and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ledger.count() >= target, "the load stalled"


def test_rolling_sigterm_restart_behind_a_front_loses_no_request(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    front = Gateway(config=write_config(tmp_path, FRONT.format(a=a.url, b=b.url)))
    ledger = Ledger(f"{front.base}/v2/models/digits/infer")
    try:
        wait_for_more(ledger, 200)
        a = restart_with_sigterm(a, tmp_path, "a")
        wait_for_more(ledger, 300)
        b = restart_with_sigterm(b, tmp_path, "b")
        wait_for_more(ledger, 300)
        results = ledger.finish()
        failed = [r for r in results if r[0] != 200]
        assert not failed, f"{len(failed)} of {len(results)} failed, e.g. {failed[:3]}"
        served = {addr["addr"]: addr["requests"] for addr in
                  requests.get(f"{front.admin}/admin/stats", timeout=5).json()["upstreams"][0]["addresses"]}
        assert all(n > 50 for n in served.values()), served
    finally:
        ledger.finish()
        for gw in (front, a, b):
            gw.stop()


def test_a_redis_cluster_node_down_degrades_to_l1_without_failed_requests(tmp_path):
    (tmp_path / "cluster").mkdir()
    redis_cluster = RedisCluster(tmp_path / "cluster")  # its own: a node is killed
    urls = ", ".join(f'"{u}"' for u in redis_cluster.urls)
    redis = f"redis = {{ urls = [{urls}], timeout_ms = 200, write_timeout_ms = 500 }}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = replica(tmp_path, "a", redis), replica(tmp_path, "b", redis)
    ledgers = [Ledger(f"{gw.base}/v2/models/digits/infer", clients=3) for gw in (a, b)]
    try:
        for ledger in ledgers:
            wait_for_more(ledger, 100)
        redis_cluster.nodes[0].kill()
        for ledger in ledgers:
            wait_for_more(ledger, 300)
        results = [r for ledger in ledgers for r in ledger.finish()]
        failed = [r for r in results if r[0] != 200]
        assert not failed, f"{len(failed)} of {len(results)} failed, e.g. {failed[:3]}"
        assert a.alive() and b.alive()
        for gw in (a, b):  # the dead node was in use: its failures were seen, and cost nothing
            cache = requests.get(f"{gw.admin}/admin/stats", timeout=5).json()["cache"]
            assert cache["l2_errors"] + cache["l2_skipped"] > 0, cache
    finally:
        for ledger in ledgers:
            ledger.finish()
        a.stop()
        b.stop()
        redis_cluster.stop()


def example(name, **replace):
    """deploy/examples/NAME.toml with absolute model paths and the given
    substitutions (old text -> new text)."""
    text = (REPO / "deploy" / "examples" / f"{name}.toml").read_text()
    text = text.replace('path = "../../models"', f'path = "{MODELS}"')
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_the_two_tier_examples_run_as_a_fleet(tmp_path):
    """deploy/examples/edge-tier.toml in front of runtime-tier.toml, the edge
    cache on a real 3-master Redis Cluster: cheap answers at the edge, the
    heavy model and MiniLM-L6 from the runtime tier, repeats from the cache
    shared by a second edge."""
    for d in ("runtime", "edge-a", "edge-b", "cluster"):
        (tmp_path / d).mkdir()
    (tmp_path / "runtime" / "switchyard.toml").write_text(example("runtime-tier"))
    runtime = Gateway(config=tmp_path / "runtime" / "switchyard.toml")
    cluster = RedisCluster(tmp_path / "cluster")
    urls = ", ".join(f'"{u}"' for u in cluster.urls)
    edge_text = example("edge-tier", **{
        '"switchyard-runtime:8000"': f'"{runtime.url}"',
        'urls = ["redis://redis-cluster-0.redis-cluster:6379", "redis://redis-cluster-1.redis-cluster:6379", '
        '"redis://redis-cluster-2.redis-cluster:6379"]': f"urls = [{urls}]",
    })
    edges = []
    try:
        for name in ("edge-a", "edge-b"):
            (tmp_path / name / "switchyard.toml").write_text(edge_text)
            edges.append(Gateway(config=tmp_path / name / "switchyard.toml"))
        a, b = edges
        digits = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
        devices = set()
        for row in digits[:40]:
            r = requests.post(f"{a.base}/v2/models/digits/infer", json=infer_body(row), timeout=10)
            assert r.status_code == 200, r.text
            devices.add(r.headers["x-switchyard-device"])
        assert devices == {"cpu", "upstream"}, devices  # confident at the edge, unsure ones escalated
        text = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["two tiers, one fleet"]}]}
        first = requests.post(f"{a.base}/v2/models/minilm/infer", json=text, timeout=10)
        assert first.status_code == 200 and first.headers["x-switchyard-device"] == "upstream", first.headers
        assert first.headers["x-cache"] == "miss"
        time.sleep(0.5)  # the L2 write happens in the background
        again = requests.post(f"{b.base}/v2/models/minilm/infer", json=text, timeout=10)
        assert again.headers["x-cache"] == "hit-l2", again.headers
        assert again.json()["outputs"] == first.json()["outputs"]
    finally:
        for gw in edges:
            gw.stop()
        runtime.stop()
        cluster.stop()


class Activator:
    """What Knative's activator does for a revision scaled to zero: it
    listens in the replica's place, starts the replica when the first
    connection arrives, waits until it is ready, then relays bytes both
    ways (that connection and every later one)."""

    def __init__(self, start_replica):
        self.start_replica, self.replica, self.lock = start_replica, None, threading.Lock()
        self.started_at = None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        with self.lock:
            if self.replica is None:
                self.started_at = time.monotonic()
                self.replica = self.start_replica()  # returns once ready
        upstream = socket.create_connection(("127.0.0.1", self.replica.port))
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=relay, args=(a, b), daemon=True).start()

    def stop(self):
        self.listener.close()
        if self.replica:
            self.replica.stop()


def relay(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_replica_at_zero_is_started_by_the_first_request(tmp_path):
    """No runtime process runs until the first infer reaches the activator;
    that request is answered by the replica it started (the time it takes
    is measured by benchmarks/scale_from_zero.py, not asserted here)."""
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "switchyard.toml").write_text(example("runtime-tier"))
    activator = Activator(lambda: Gateway(config=tmp_path / "runtime" / "switchyard.toml"))
    try:
        assert activator.replica is None
        text = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["woken from zero"]}]}
        sent = time.monotonic()
        r = requests.post(f"http://{activator.url}/v2/models/minilm-l6/infer", json=text, timeout=60)
        assert r.status_code == 200, r.text
        assert activator.replica is not None and activator.started_at >= sent
        assert r.json()["outputs"][0]["shape"] == [1, 384]
        again = requests.post(f"http://{activator.url}/v2/models/minilm-l6/infer", json=text, timeout=10)
        assert again.json()["outputs"] == r.json()["outputs"]
    finally:
        activator.stop()
