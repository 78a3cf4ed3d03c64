"""The connection guards of the V2 listener over TLS (issue 40): the
handshake is admitted first and counts against the head deadline, then the
keep-alive and head timeouts apply to the decrypted requests as on
cleartext, a client that hangs up is noticed and its queued work is not
computed, and a connection past `server.max_connections` gets its 503 over
TLS."""

import json
import socket
import ssl
import time

import numpy as np
import pytest

from conftest import Gateway
from routing_util import infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for
from test_metrics import sample
from tls_util import issue, make_ca

ROWS = 64


def config(tmp_path, pki, keepalive_timeout_s=1, server=""):
    return write_config(tmp_path, f"""
[server]
tls = {{ cert = "{pki['cert']}", key = "{pki['key']}" }}
keepalive_timeout_s = {keepalive_timeout_s}
header_timeout_ms = 1000
{server}

[[models]]
name = "synth-heavy"
path = "{{models}}/synth-heavy.onnx"
batching = {{ max_batch_size = 64, max_queue_delay_us = 100, queue_capacity = 4096 }}
pools = [{{ device = "cpu", workers = 1, intra_op_threads = 1 }}]

[[routes]]
name = "heavy"
models = ["synth-heavy"]
budget_ms = {{ default = 60000, max = 60000 }}
""")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    root = make_ca("guards root")
    cert, key = issue(root, "gateway").write(d, "gateway")
    return {"root": root.write_cert(d / "root.pem"), "cert": cert, "key": key}


@pytest.fixture(scope="module")
def gw(tmp_path_factory, pki):
    g = Gateway(config=config(tmp_path_factory.mktemp("guards"), pki), tls_ca=pki["root"])
    yield g
    g.stop()


def tls_connect(gw, pki):
    ctx = ssl.create_default_context(cafile=str(pki["root"]))
    raw = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def closed_by_server(sock, within_s=30):
    """True once the server closed `sock` (end of stream or reset)."""
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_an_idle_tls_connection_is_closed_at_the_keepalive_timeout(gw, pki):
    sock = tls_connect(gw, pki)
    sock.sendall(b"GET /v2 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    assert closed_by_server(sock), "an idle TLS connection was kept past the keep-alive timeout"


def test_a_head_trickled_over_tls_is_cut_at_the_header_timeout(gw, pki):
    sock = tls_connect(gw, pki)
    cut = False
    for byte in b"GET /v2 HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            cut = True
            break
        time.sleep(0.1)  # each byte well inside the keep-alive timeout; 13 s in all
    assert cut or closed_by_server(sock, 5), "a head trickled over TLS was never cut"


def test_work_of_tls_clients_that_left_is_not_computed(gw, pki):
    clients = 20
    before = pool_stats(gw, "synth-heavy")
    pause(gw, "synth-heavy")
    try:
        sockets = []
        for seed in range(clients):
            rows = np.random.default_rng(seed).uniform(0, 16, size=(ROWS, 64))
            body = json.dumps(infer_body(rows)).encode()
            sock = tls_connect(gw, pki)
            sock.sendall(b"POST /v2/models/heavy/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            sockets.append(sock)
        wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= clients, "the requests to queue")
        for s in sockets:
            s.close()  # no close_notify: the TCP connection just ends
        time.sleep(0.2)  # several client checks (every 20 ms) while paused
    finally:
        resume(gw, "synth-heavy")

    def settled():
        first = pool_stats(gw, "synth-heavy")
        time.sleep(0.3)
        second = pool_stats(gw, "synth-heavy")
        return second if first == second and second["queue_depth"] == 0 and second["in_flight"] == 0 else None

    after = wait_for(settled, "the pool to settle", timeout=30)
    assert after["executed_rows"] - before["executed_rows"] == 0
    assert after["cancelled"] - before["cancelled"] == clients


def test_past_max_connections_a_tls_client_gets_the_503_over_tls(tmp_path, pki):
    g = Gateway(config=config(tmp_path, pki, keepalive_timeout_s=30, server="max_connections = 2"),
                tls_ca=pki["root"])
    busy = []
    try:
        wait_for(lambda: open_connections(g) == 0, "the harness's connection to close", timeout=60)
        pause(g, "synth-heavy")
        body = json.dumps(infer_body(np.zeros((1, 64)))).encode()
        for _ in range(2):
            sock = tls_connect(g, pki)
            sock.sendall(b"POST /v2/models/heavy/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            busy.append(sock)
        wait_for(lambda: pool_stats(g, "synth-heavy")["queue_depth"] >= 2, "both requests to queue")
        refused = tls_connect(g, pki)
        answer = refused.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"server.max_connections = 2" in answer
        resume(g, "synth-heavy")
        for sock in busy:
            assert sock.recv(4096).startswith(b"HTTP/1.1 200"), "requests in progress are never cut for room"
    finally:
        for sock in busy:
            sock.close()
        g.stop()


def open_connections(gw):
    return sample(gw, "switchyard_connections_open", listener="api")


def test_an_http2_call_longer_than_the_keepalive_timeout_is_not_cut(gw, pki):
    """A call in progress makes its HTTP/2 connection busy: the keep-alive
    timeout (1 s here) runs only between calls, as on HTTP/1."""
    import threading

    import httpx
    ctx = ssl.create_default_context(cafile=str(pki["root"]))
    result = {}
    with httpx.Client(http2=True, verify=ctx, timeout=60) as client:
        assert client.get(f"{gw.base}/v2").http_version == "HTTP/2"
        pause(gw, "synth-heavy")
        try:
            def call():
                try:
                    result["answer"] = client.post(f"{gw.base}/v2/models/heavy/infer",
                                                   json=infer_body(np.zeros((1, 64))))
                except httpx.HTTPError as e:
                    result["error"] = e

            caller = threading.Thread(target=call)
            caller.start()
            wait_for(lambda: pool_stats(gw, "synth-heavy")["queue_depth"] >= 1, "the call to queue")
            time.sleep(2.5)  # well past the keep-alive timeout, the call still queued
        finally:
            resume(gw, "synth-heavy")
        caller.join(timeout=60)
    assert "error" not in result, result
    assert result["answer"].status_code == 200 and result["answer"].http_version == "HTTP/2"
