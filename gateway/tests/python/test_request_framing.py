"""Request framing an attacker or a confused client might send (issue 21,
item 5), on raw sockets against the real binary: smuggling patterns get a
clear 400 and nothing hidden behind them is answered; a body in a coding
the V2 API cannot read gets 415, and one that claims gzip but is not, 400,
instead of being parsed as JSON (issue 38, item 2: gzip and deflate are
read)."""

import socket
import time

import pytest

from conftest import Gateway

BODY = (b'{"inputs":[{"name":"X","shape":[1,64],"datatype":"FP32","data":['
        + b",".join([b"0.5"] * 64) + b"]}]}")
INFER = b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: t\r\n"
SMUGGLED = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"


@pytest.fixture(scope="module")
def gw():
    g = Gateway()
    yield g
    g.stop()


def exchange(gw, data, wait=0.5):
    """Sends `data`, returns everything answered within `wait` s (or until closed)."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=wait) as s:
        s.sendall(data)
        out, deadline = b"", time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
        return out


def statuses(raw):
    return [int(line.split()[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


@pytest.mark.parametrize("name, head", [
    ("content-length and chunked", b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("two different content-lengths", b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % len(BODY) + BODY),
    ("unknown transfer-encoding", b"Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    ("signed content-length", b"Content-Length: +%d\r\n\r\n" % len(BODY) + BODY),
    ("space before the colon", b"Content-Length : %d\r\n\r\n" % len(BODY) + BODY),
    ("obsolete line folding", b"Content-Length: %d\r\n x\r\n\r\n" % len(BODY) + BODY),
])
def test_ambiguous_framing_is_refused_and_nothing_behind_it_is_answered(gw, name, head):
    got = statuses(exchange(gw, INFER + head + SMUGGLED))
    assert got == [400], f"{name}: {got}"
    assert gw.alive()


def test_an_unknown_coding_is_415_and_a_false_gzip_body_400(gw):
    raw = exchange(gw, INFER + b"Content-Encoding: br\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    assert statuses(raw) == [415], raw[:200]
    assert b"Content-Encoding" in raw and b"uncompressed" in raw
    raw = exchange(gw, INFER + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    assert statuses(raw) == [400], raw[:200]
    assert b"gzip body could not be decompressed" in raw
    ok = exchange(gw, INFER + b"Content-Encoding: identity\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    assert statuses(ok) == [200], ok[:200]
