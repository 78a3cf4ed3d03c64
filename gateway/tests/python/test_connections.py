"""Client connections against the real binary, as an attacker or a careless
client would use them: idle keep-alive connections are closed at the
keep-alive timeout, a request head trickled in one byte at a time is cut at
the head deadline, hundreds of slowloris and idle connections do not keep a
new client waiting, the connection limit makes room by closing idle
connections (and refuses with a 503 only when none can be closed),
pipelined requests are all answered in order, `Expect: 100-continue` gets
its `100 Continue` at once, and an HTTP/1.1 request without `Host` is a 400."""

import resource
import socket
import threading
import time

import pytest
import requests

from conftest import Gateway
from proxy_util import upstream_app
from routing_util import DIGITS_ROUTE, infer_body, write_config
from sse_util import wait_for
from test_metrics import parse, scrape, value

BODY = infer_body([[float(i % 16) for i in range(64)]])


def connect(gw, timeout=5.0):
    return socket.create_connection(("127.0.0.1", gw.port), timeout=timeout)


def read_response(sock):
    """One whole HTTP/1.1 response (Content-Length framed): (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response head: {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        rest += chunk
    return status, headers, rest[:length], rest[length:]


def closed_within(sock, seconds):
    """Seconds until the server closed `sock` (reads EOF or a reset), or None."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while True:
            if not sock.recv(4096):
                return time.monotonic() - started
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - started
    except socket.timeout:
        return None


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """Default connection settings."""
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("plain"), DIGITS_ROUTE))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Short timeouts, so that the tests can watch them fire."""
    config = write_config(tmp_path_factory.mktemp("quick"), """
[server]
keepalive_timeout_s = 1
header_timeout_ms = 1000
""" + DIGITS_ROUTE)
    gw = Gateway(config=config)
    yield gw
    gw.stop()


def test_idle_connections_are_closed_at_the_keepalive_timeout(quick):
    served = connect(quick)
    served.sendall(b"GET /v2 HTTP/1.1\r\nHost: t\r\n\r\n")
    status, headers, _, _ = read_response(served)
    assert status == 200 and headers["connection"] == "keep-alive"
    took = closed_within(served, 10)
    assert took is not None, "an idle keep-alive connection was kept past the keep-alive timeout"
    assert 0.5 < took < 3.0, took
    silent = connect(quick)  # never sends anything
    took = closed_within(silent, 10)
    assert took is not None and 0.5 < took < 3.0, took
    metrics = parse(scrape(quick))
    assert value(metrics, "switchyard_connections_closed_total", reason="idle_timeout") >= 2


def test_a_trickled_head_is_cut_at_the_header_timeout(quick):
    sock = connect(quick)
    started = time.monotonic()
    cut = None
    for byte in b"GET /v2 HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            cut = time.monotonic() - started
            break
        time.sleep(0.1)  # every byte well inside the keep-alive timeout
    if cut is None:
        cut = closed_within(sock, 5)
        assert cut is not None, "a head trickled for 12 s was never cut"
        cut += 12
    assert cut < 3.0, f"the head deadline (1 s) counts from the first byte, cut after {cut:.1f}s"
    metrics = parse(scrape(quick))
    assert value(metrics, "switchyard_connections_closed_total", reason="header_timeout") >= 1


def test_pipelined_requests_are_answered_in_order(plain):
    sock = connect(plain)
    sock.sendall(
        b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
        b"GET /v2/models/second-one HTTP/1.1\r\nHost: t\r\n\r\n"
        b"GET /v2 HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    first = read_response(sock)
    buffered = first[3]
    assert first[0] == 200 and first[1]["connection"] == "keep-alive"
    sock2 = _Prefixed(sock, buffered)
    second = read_response(sock2)
    third = read_response(_Prefixed(sock, second[3]))
    assert second[0] == 404 and b"second-one" in second[2]
    assert third[0] == 200 and b'"extensions"' in third[2]


class _Prefixed:
    """A socket whose next reads return `prefix` first."""

    def __init__(self, sock, prefix):
        self.sock, self.prefix = sock, prefix

    def recv(self, n):
        if self.prefix:
            out, self.prefix = self.prefix[:n], self.prefix[n:]
            return out
        return self.sock.recv(n)


def test_http11_without_host_is_a_400(plain):
    for head in (b"GET /v2 HTTP/1.1\r\n\r\n", b"GET /v2 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"):
        sock = connect(plain)
        sock.sendall(head)
        status, _, body, _ = read_response(sock)
        assert status == 400, (head, body)
        assert b"Host" in body or b"Host: a" in head, "the missing Host is named"  # Pingora refuses two itself
    sock = connect(plain)
    sock.sendall(b"GET /v2 HTTP/1.0\r\n\r\n")
    assert read_response(sock)[0] == 200, "HTTP/1.0 needs no Host"


def test_expect_100_continue_is_answered_at_once(plain):
    import json
    body = json.dumps(BODY).encode()
    sock = connect(plain)
    sock.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                 b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
    sock.settimeout(0.5)
    interim = sock.recv(64)
    assert interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim
    sock.settimeout(5)
    sock.sendall(body)
    status, _, answer, _ = read_response(_Prefixed(sock, interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]))
    assert status == 200, answer
    # Too large for server.max_body_bytes: 413 without waiting for (or reading) the body.
    sock = connect(plain)
    sock.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                 b"Content-Length: 999999999999\r\n\r\n")
    sock.settimeout(2)
    status, headers, _, _ = read_response(sock)
    assert status == 413 and headers["connection"] == "close"
    # An expectation the server cannot meet.
    sock = connect(plain)
    sock.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n")
    assert read_response(sock)[0] == 417


def set_fd_limit(soft):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < soft:
        pytest.skip(f"needs {soft} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_new_clients_are_served_under_slowloris_and_idle_floods(tmp_path):
    """500 connections trickling a head and 1,000 idle keep-alive ones
    against a server started with the common soft limit of 1,024 open
    files: a new client's infer and health check still answer, 20 times
    each, inside the client's 5 s timeout (the server raises its soft
    limit to the hard one, and makes room by closing idle connections
    when it cannot). Without that, a new connection is not accepted at
    all and the call times out. No tighter time bound: a busy test
    machine stretches single calls to several hundred ms."""
    config = write_config(tmp_path, "[server]\n\n" + DIGITS_ROUTE)
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    set_fd_limit(1024)  # inherited by the server
    try:
        gw = Gateway(config=config)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
    set_fd_limit(4096)  # this client holds 1,500 sockets
    held, stop = [], threading.Event()
    try:
        for _ in range(1000):
            idle = connect(gw)
            held.append(idle)
        loris = []
        for _ in range(500):
            s = connect(gw)
            s.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\n")
            loris.append(s)
        held += loris

        def trickle():
            while not stop.wait(0.5):
                for s in loris:
                    try:
                        s.sendall(b"X")
                    except OSError:
                        pass

        threading.Thread(target=trickle, daemon=True).start()
        wait_for(lambda: value(parse(scrape(gw)), "switchyard_connections_total") >= 1500,
                 "every attacking connection to be accepted (or refused)")
        client = requests.Session()
        for _ in range(20):
            r = client.post(f"{gw.base}/v2/models/digits/infer", json=BODY, timeout=5)
            assert r.status_code == 200, r.text
            assert requests.get(f"{gw.base}/v2/health/ready", timeout=5).status_code == 200
    finally:
        stop.set()
        for s in held:
            s.close()
        gw.stop()


def test_the_connection_limit_makes_room_then_refuses(tmp_path):
    app = upstream_app("app")
    config = write_config(tmp_path, f"""
[server]
max_connections = 4
keepalive_timeout_s = 2

[[upstreams]]
name = "app"
addrs = ["{app.addr}"]
timeouts = {{ first_byte_ms = 10000, total_ms = 10000 }}

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
""")
    gw = Gateway(config=config)
    try:
        # (keep-alive connections the harness left close after 2 s)
        wait_for(lambda: value(parse(scrape(gw)), "switchyard_connections_open") == 0, "a quiet listener")
        idle = [connect(gw) for _ in range(4)]
        time.sleep(0.2)
        # At the limit with idle connections: the longest idle one makes room.
        r = requests.get(f"{gw.base}/v2/health/live", timeout=5)
        assert r.status_code == 200
        assert sum(closed_within(s, 0.5) is not None for s in idle) >= 1
        for s in idle:
            s.close()
        wait_for(lambda: value(parse(scrape(gw)), "switchyard_connections_open") == 0, "the idle ones to go")
        # Four connections each serving a slow request: none can make room.
        busy = []
        for _ in range(4):
            s = connect(gw)
            s.sendall(b"GET /apps/app/slow?ms=3000 HTTP/1.1\r\nHost: t\r\n\r\n")
            busy.append(s)
        time.sleep(0.5)
        refused = connect(gw)
        status, headers, body, _ = read_response(refused)
        assert status == 503 and headers["connection"] == "close" and headers["retry-after"] == "1"
        assert b"server.max_connections = 4" in body
        for s in busy:
            assert read_response(s)[0] == 200, "requests in progress are never cut for room"
        metrics = parse(scrape(gw))
        assert value(metrics, "switchyard_connections_total", outcome="refused") >= 1
        assert value(metrics, "switchyard_connections_closed_total", reason="evicted") >= 1
    finally:
        gw.stop()
        app.stop()


def test_past_max_concurrent_requests_a_request_gets_429_and_keeps_its_connection(tmp_path):
    """The two limits answer differently, as the connection table of
    docs/src/reference/connections.md says (issue 37, item 18): past `server.max_concurrent_requests` a
    request gets 429 with `Retry-After` and its connection stays open for
    the next one; only a new connection past `server.max_connections`
    (test above) gets 503 and is closed."""
    app = upstream_app("app")
    config = write_config(tmp_path, f"""
[server]
max_concurrent_requests = 1

[[upstreams]]
name = "app"
addrs = ["{app.addr}"]
timeouts = {{ first_byte_ms = 10000, total_ms = 10000 }}

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
""")
    gw = Gateway(config=config)
    try:
        busy = connect(gw, timeout=30)
        busy.sendall(b"GET /apps/app/slow?ms=3000 HTTP/1.1\r\nHost: t\r\n\r\n")
        wait_for(lambda: requests.get(f"{gw.admin}/admin/stats", timeout=5).json()["in_flight"] >= 1,
                 "the slow request to be in flight")
        other = connect(gw, timeout=30)
        other.sendall(b"GET /apps/app/slow?ms=0 HTTP/1.1\r\nHost: t\r\n\r\n")
        status, headers, body, _ = read_response(other)
        assert status == 429 and headers.get("retry-after") == "1", (status, headers, body)
        assert headers.get("connection", "").lower() != "close"
        assert read_response(busy)[0] == 200
        # The slow request's admission permit is given back after its last
        # byte left (the gauge counts permits): wait for it, on a busy
        # machine the client can be faster.
        wait_for(lambda: value(parse(scrape(gw)), "switchyard_requests_in_flight") == 0,
                 "the slow request's permit to be given back")
        other.sendall(b"GET /apps/app/slow?ms=0 HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_response(other)[0] == 200, "the connection that got 429 still serves"
        busy.close()
        other.close()
    finally:
        gw.stop()
        app.stop()
