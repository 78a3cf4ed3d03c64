"""TLS to backends on the real binary (issue 40, item 2): `https://`
upstream addresses (a V2 member and a prefix route) reached over TLS with
the test's own CA, refused with a clear reason under a wrong CA, mTLS to
an upstream that requires a client certificate, and a `rediss://` Redis
(redis-server with `--tls-port`) as the L2 shared by two gateways and as
the fleet-coalescing store. The certificates are made by the test
(`cryptography`); the TLS servers are Python's `ssl` around
`http.server`, and Debian's redis-server, all on 127.0.0.1."""

import json
import os
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import REPO, Gateway, RedisCluster, RedisServer, RedisTls
from otlp_receiver import OtlpReceiver
from routing_util import DIGITS_ROUTE, infer_body, write_config
from tls_util import issue, make_ca

BINARY = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


# ---------------------------------------------------------------- certificates

class Certs:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client
    certificate, all signed by the CA; and another CA that signed none."""

    def __init__(self, folder: Path):
        ca = make_ca("switchyard test CA")
        other = make_ca("another CA")
        self.ca = ca.write_cert(folder / "ca.pem")
        self.other_ca = other.write_cert(folder / "other-ca.pem")
        _, self.other_key = other.write(folder, "other")
        # The server's may act as a client too: Redis Cluster nodes
        # present theirs to each other on the TLS cluster bus.
        server = issue(ca, "localhost", client_too=True)
        self.server_cert, self.server_key = server.write(folder, "server")
        client = issue(ca, "gateway", hosts=("gateway",), client=True)
        self.client_cert, self.client_key = client.write(folder, "client")

    def redis(self, auth_clients=False):
        """TLS for a redis-server with the server certificate."""
        return RedisTls(self.server_cert, self.server_key, self.ca, auth_clients)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


# ---------------------------------------------------------------- a V2 server behind TLS

META = {"name": "double", "platform": "python", "versions": ["1"],
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "Y", "datatype": "FP32", "shape": [-1, 4]}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.server.hosts.append(self.headers.get("host"))
        if self.path in ("/v2/health/ready", "/v2/health/live"):
            self._send(200, b"")
        elif self.path == "/v2":
            self._send(200, {"name": "tls-test", "version": "1", "extensions": []})
        elif self.path == "/v2/models/double":
            self._send(200, META)
        elif self.path.startswith("/hello"):
            self.server.connections.add(self.client_address)
            peer = self.connection.getpeercert()
            who = dict(x[0] for x in peer["subject"])["commonName"] if peer else "anonymous"
            self._send(200, f"hello over TLS to {who}".encode(), "text/plain")
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        if self.path != "/v2/models/double/infer":
            self._send(404, {"error": "not found"})
            return
        self.server.connections.add(self.client_address)
        x = body["inputs"][0]
        data = [2.0 * float(v) for v in np.asarray(x["data"]).ravel()]
        self._send(200, {"model_name": "double", "id": body.get("id", ""),
                         "outputs": [{"name": "Y", "datatype": "FP32", "shape": x["shape"], "data": data}]})


class TlsServer:
    """A threaded HTTPS server on 127.0.0.1 (port 0); with `client_ca` it
    requires a client certificate signed by it."""

    def __init__(self, certs, client_ca=None):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs.server_cert, certs.server_key)
        if client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(client_ca)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        # The client addresses of the connections that carried an infer call
        # or a proxied page (health checks and metadata reads not counted).
        self.server.connections = set()
        # The Host header of every GET.
        self.server.hosts = []
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tls_server(certs):
    server = TlsServer(certs)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mtls_server(certs):
    server = TlsServer(certs, client_ca=certs.ca)
    yield server
    server.stop()


def upstream_config(addr, tls):
    """A V2 member and a prefix route, both on `https://addr`."""
    return f"""
[[upstreams]]
name = "secure"
kind = "v2"
addrs = ["https://{addr}"]
tensors = "json"
tls = {tls}
health = {{ interval_ms = 200 }}
breaker = {{ failures = 100 }}
models = [{{ name = "double-remote", model = "double" }}]

[[upstreams]]
name = "secure-app"
addrs = ["https://{addr}"]
tls = {tls}

[[routes]]
name = "remote"
models = ["double-remote"]
cache = {{ enabled = false }}

[[prefix_routes]]
name = "app"
prefix = "/apps/secure/"
upstream = "secure-app"
"""


def start(tmp_path, name, config):
    folder = tmp_path / name
    folder.mkdir()
    return Gateway(config=write_config(folder, config))


def infer(gw, rows, route="remote"):
    if rows.shape[1] == 64:
        body = infer_body(rows)
    else:
        body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": list(rows.shape),
                            "data": rows.ravel().tolist()}]}
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=body, timeout=30)


def wait_for_answer(gw, rows, deadline_s=30):
    """The upstream model's signature is read in the background after
    start-up: retries until the route answers 200 (or the deadline)."""
    deadline = time.monotonic() + deadline_s
    while True:
        r = infer(gw, rows)
        if r.status_code == 200 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


ROWS = np.arange(8, dtype=np.float32).reshape(2, 4)


def assert_refused(gw, reason):
    """Both ways to the upstream refused, saying `reason`: the V2 member's
    call (502, or 503 while its metadata cannot be read) and the prefix
    route's page (502)."""
    r = infer(gw, ROWS)
    assert r.status_code in (502, 503) and reason in r.text, r.text
    page = requests.get(f"{gw.base}/apps/secure/hello", timeout=10)
    assert page.status_code == 502 and reason in page.text, page.text


def health_of(gw, upstream, want, deadline_s=20):
    """The health-check verdict on `upstream`'s address, once it is `want`
    (or the deadline passed): the checks run over TLS too."""
    deadline = time.monotonic() + deadline_s
    while True:
        stats = requests.get(f"{gw.admin}/admin/stats", timeout=5).json()["upstreams"]
        healthy = next(u for u in stats if u["name"] == upstream)["addresses"][0]["healthy"]
        if healthy == want or time.monotonic() > deadline:
            return healthy
        time.sleep(0.1)


def test_https_upstream_answers_with_the_test_ca(tmp_path, certs, tls_server):
    with start(tmp_path, "gw", upstream_config(tls_server.addr, f'{{ ca = "{certs.ca}" }}')) as gw:
        r = wait_for_answer(gw, ROWS)
        assert r.status_code == 200, r.text
        y = next(o for o in r.json()["outputs"] if o["name"] == "Y")
        assert np.allclose(np.asarray(y["data"]).reshape(2, 4), ROWS * 2)
        page = requests.get(f"{gw.base}/apps/secure/hello", timeout=10)
        assert page.status_code == 200 and page.text == "hello over TLS to anonymous", page.text
        assert health_of(gw, "secure", want=True) is True
        # Kept-alive TLS connections are reused, as plain ones: 40 requests
        # one after another take a connection or two of each client.
        tls_server.server.connections.clear()
        for _ in range(20):
            assert requests.get(f"{gw.base}/apps/secure/hello", timeout=10).status_code == 200
            assert infer(gw, ROWS).status_code == 200
        opened = len(tls_server.server.connections)
        assert opened <= 4, f"{opened} TLS connections for 40 requests"


def test_a_wrong_ca_is_refused_with_the_reason(tmp_path, certs, tls_server):
    """Verified against a CA that did not sign the upstream's certificate:
    the V2 member is unavailable (503, its metadata cannot be read) and the
    prefix route answers 502, both saying why; nothing panics."""
    with start(tmp_path, "gw", upstream_config(tls_server.addr, f'{{ ca = "{certs.other_ca}" }}')) as gw:
        assert_refused(gw, "invalid peer certificate: UnknownIssuer")
        assert health_of(gw, "secure", want=False) is False, "the TLS health check fails too"
        assert gw.alive()


def test_mtls_upstream_needs_the_client_certificate(tmp_path, certs, mtls_server):
    tls = f'{{ ca = "{certs.ca}", client_cert = "{certs.client_cert}", client_key = "{certs.client_key}" }}'
    with start(tmp_path, "with-cert", upstream_config(mtls_server.addr, tls)) as gw:
        r = wait_for_answer(gw, ROWS)
        assert r.status_code == 200, r.text
        page = requests.get(f"{gw.base}/apps/secure/hello", timeout=10)
        assert page.status_code == 200 and page.text == "hello over TLS to gateway", page.text
    with start(tmp_path, "without-cert", upstream_config(mtls_server.addr, f'{{ ca = "{certs.ca}" }}')) as gw:
        assert_refused(gw, "CertificateRequired")
        assert gw.alive()


def test_server_name_override_is_checked_against_the_certificate(tmp_path, certs, tls_server):
    ok = f'{{ ca = "{certs.ca}", server_name = "localhost" }}'
    with start(tmp_path, "ok", upstream_config(tls_server.addr, ok)) as gw:
        tls_server.server.hosts.clear()
        assert requests.get(f"{gw.base}/apps/secure/hello", timeout=10).status_code == 200
        assert wait_for_answer(gw, ROWS).status_code == 200
        # The Host header names what the certificate was checked against.
        assert set(tls_server.server.hosts) == {f"localhost:{tls_server.port}"}, tls_server.server.hosts
    wrong = f'{{ ca = "{certs.ca}", server_name = "elsewhere.example" }}'
    with start(tmp_path, "wrong", upstream_config(tls_server.addr, wrong)) as gw:
        assert_refused(gw, "not valid for name")


def test_verify_false_accepts_a_certificate_of_an_unknown_ca(tmp_path, certs, tls_server):
    """`verify = false` (tests only): encrypted, not authenticated; both
    clients (V2 calls and prefix routes) connect without the CA."""
    with start(tmp_path, "gw", upstream_config(tls_server.addr, "{ verify = false }")) as gw:
        assert wait_for_answer(gw, ROWS).status_code == 200
        assert requests.get(f"{gw.base}/apps/secure/hello", timeout=10).status_code == 200


def check_config(tmp_path, name, config):
    folder = tmp_path / name
    folder.mkdir()
    path = write_config(folder, config)
    out = subprocess.run([BINARY, "check-config", str(path)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    return out.returncode, out.stdout + out.stderr


def test_bad_tls_files_are_refused_with_their_field(tmp_path, certs):
    cases = {
        "unreadable": (f'{{ ca = "{tmp_path}/missing.pem" }}', "upstreams[0].tls.ca", "cannot read"),
        "not-pem": (f'{{ ca = "{certs.server_key}" }}', "upstreams[0].tls.ca", "no PEM certificate"),
        "mismatch": (f'{{ client_cert = "{certs.client_cert}", client_key = "{certs.other_key}" }}',
                     "upstreams[0].tls.client_key", "does not fit"),
        "half": (f'{{ client_cert = "{certs.client_cert}" }}', "upstreams[0].tls.client_key", "missing"),
    }
    for name, (tls, field, why) in cases.items():
        code, text = check_config(tmp_path, name, upstream_config("127.0.0.1:9", tls))
        assert code != 0 and field in text and why in text, (name, text)
    code, text = check_config(tmp_path, "good", upstream_config("127.0.0.1:9", f'{{ ca = "{certs.ca}" }}'))
    assert code == 0, text


# ---------------------------------------------------------------- rediss://

def redis_config(where, tls):
    """The L2 at `where` (`url = ...` or `urls = [...]`) over `tls`, for
    the route "digits" and a fleet-coalescing route "fleet"."""
    return f"""
[cache]
redis = {{ {where}, timeout_ms = 500, write_timeout_ms = 1000, tls = {tls} }}
""" + DIGITS_ROUTE + """
[[routes]]
name = "fleet"
models = ["digits-cheap"]
cache = { fleet_coalesce = true, fleet_wait_ms = 2000 }
"""


def digits_row(seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(1, 64)).astype(np.float32)


def cache_stats(gw):
    return requests.get(f"{gw.admin}/admin/stats", timeout=5).json()["cache"]


@pytest.mark.parametrize("store", ["tls", "mtls", "cluster"])
def test_rediss_l2_and_fleet_store_shared_by_two_gateways(tmp_path, certs, store):
    """One TLS redis-server (clients without, then with, certificates), and
    a three-node Redis Cluster over TLS: an answer computed at one gateway
    is an L2 hit at the other, on a plain cached route and on a route with
    fleet-wide coalescing (whose markers go over the same connection)."""
    (tmp_path / "redis").mkdir()
    tls = f'{{ ca = "{certs.ca}" }}'
    if store == "cluster":
        redis = RedisCluster(tmp_path / "redis", tls=certs.redis())
        where = "urls = [" + ", ".join(f'"{u}"' for u in redis.urls) + "]"
    else:
        redis = RedisServer(tmp_path / "redis", tls=certs.redis(auth_clients=store == "mtls"))
        where = f'url = "{redis.url}"'
    if store == "mtls":
        tls = f'{{ ca = "{certs.ca}", client_cert = "{certs.client_cert}", client_key = "{certs.client_key}" }}'
    config = redis_config(where, tls)
    gws = []
    try:
        gws.append(start(tmp_path, "a", config))
        gws.append(start(tmp_path, "b", config))
        a, b = gws
        for route, seed in (("digits", 1), ("fleet", 2)):
            rows = digits_row(seed)
            first = infer(a, rows, route)
            assert first.status_code == 200 and first.headers["x-cache"] == "miss", (first.status_code, first.text)
            deadline = time.monotonic() + 10
            while True:
                again = infer(b, rows, route)
                if again.headers.get("x-cache") == "hit-l2" or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert again.status_code == 200 and again.headers["x-cache"] == "hit-l2", (
                route, again.headers.get("x-cache"), cache_stats(b), b.log_text())
            assert again.json()["outputs"] == first.json()["outputs"]
        assert cache_stats(b)["l2_breaker"] == "closed"
    finally:
        for gw in gws:
            gw.stop()
        redis.stop()


def test_rediss_with_a_wrong_ca_carries_on_without_l2(tmp_path, certs):
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis", tls=certs.redis())
    gw = None
    try:
        config = redis_config(f'url = "{redis.url}"', f'{{ ca = "{certs.other_ca}" }}')
        gw = start(tmp_path, "gw", config)
        r = infer(gw, digits_row(3), "digits")
        assert r.status_code == 200 and r.headers["x-cache"] == "miss"
        assert infer(gw, digits_row(3), "digits").headers["x-cache"] == "hit-l1"
        assert gw.alive()
        stats = cache_stats(gw)
        assert stats["l2_hits"] == 0 and stats["l2_errors"] >= 1, stats
        deadline = time.monotonic() + 10
        while "invalid peer certificate: UnknownIssuer" not in gw.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "invalid peer certificate: UnknownIssuer" in gw.log_text(), gw.log_text()
    finally:
        if gw:
            gw.stop()
        redis.stop()


# ---------------------------------------------------------------- OTLP over HTTPS

def test_traces_are_exported_to_an_https_collector(tmp_path, certs):
    """`otlp_endpoint = "https://..."`: spans arrive over TLS, the
    collector's certificate verified against the roots `SSL_CERT_FILE`
    names (here the test CA)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    receiver = OtlpReceiver(ssl_context=context)
    config = f"""
[telemetry]
otlp_endpoint = "{receiver.endpoint}"
batch_delay_ms = 50
""" + DIGITS_ROUTE
    folder = tmp_path / "gw"
    folder.mkdir()
    gw = None
    try:
        gw = Gateway(config=write_config(folder, config), env={"SSL_CERT_FILE": str(certs.ca)})
        trace_id = "5b8efff798038103d269b633813fc60c"
        r = requests.post(f"{gw.base}/v2/models/digits/infer", json=infer_body(digits_row(9)), timeout=30,
                          headers={"traceparent": f"00-{trace_id}-eee19b7ec3c1b174-01"})
        assert r.status_code == 200, r.text
        spans = receiver.spans_of(trace_id)
        assert spans, f"no span arrived over HTTPS:\n{gw.log_text()}"
        assert receiver.endpoint.startswith("https://")
    finally:
        if gw:
            gw.stop()
        receiver.stop()
