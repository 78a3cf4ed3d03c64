"""Hostile REST bodies on the real binary (issue 37, item 3): a body made
of a long list of tiny entries (`{"inputs":[{},{},...]}`, 2.8 million of
them in 8 MiB) is refused with its limit's 413 while it is read, before
the list is built, so the gateway's memory does not grow with it and other
clients are served meanwhile."""

import threading

import pytest
import requests

from conftest import Gateway
from hostile_util import RssPeak

BODY = 8 << 20
ROW = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}


def fill(prefix: bytes, item: bytes, suffix: bytes, size=BODY) -> bytes:
    """`prefix item,item,... suffix`, `size` bytes at most."""
    n = (size - len(prefix) - len(suffix)) // (len(item) + 1)
    return prefix + b",".join([item] * n) + suffix


# (case, body, words of the 413 message). Each list passes its limit
# within its first few hundred bytes and goes on for 8 MiB.
ATTACKS = [
    ("inputs", fill(b'{"inputs":[', b"{}", b"]}"), "more than 64 inputs"),
    ("outputs", fill(b'{"inputs":[],"outputs":[', b"{}", b"]}"), "more than 64 requested outputs"),
    ("parameters", fill(b'{"parameters":{"a":[', b"0", b']},"inputs":[]}'), "JSON values"),
    ("id", fill(b'{"id":[', b"[]", b'],"inputs":[]}'), "JSON values"),
    ("shape", fill(b'{"inputs":[{"name":"X","datatype":"FP32","shape":[', b"1", b'],"data":[1]}]}'),
     "JSON values"),
    ("input-parameters",
     fill(b'{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":[1],"parameters":{"a":[', b"{}", b"]}}]}"),
     "JSON values"),
    ("output-parameters", fill(b'{"inputs":[],"outputs":[{"name":"p","parameters":{"a":[', b"0", b"]}}]}"),
     "JSON values"),
]


@pytest.fixture(scope="module")
def gw():
    gw = Gateway()
    yield gw
    gw.stop()


def one_row(session, gw):
    return session.post(f"{gw.base}/v2/models/digits/infer", json=ROW, timeout=30)


@pytest.mark.parametrize("case,body,words", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_a_long_list_of_tiny_entries_is_refused_while_read_without_the_memory(gw, case, body, words):
    session = requests.Session()
    for _ in range(3):
        assert one_row(session, gw).status_code == 200
    with RssPeak(gw.proc.pid) as rss:
        answers = [session.post(f"{gw.base}/v2/models/digits/infer", data=body, timeout=120) for _ in range(3)]
    # Before the fix the inputs case alone took a gigabyte; the 8 MiB body
    # itself (and its copy) is all that may remain.
    grown = rss.grown
    assert grown < 300, f"{case}: RSS grew by {grown:.0f} MB refusing an 8 MiB body"
    for r in answers:
        assert r.status_code == 413, (r.status_code, r.text[:300])
        assert words in r.json()["error"], r.json()["error"]
    assert gw.alive()


def test_clients_are_served_while_the_attack_runs(gw):
    body = ATTACKS[0][1]
    stop = threading.Event()
    statuses = []

    def attack():
        session = requests.Session()
        while not stop.is_set():
            statuses.append(session.post(f"{gw.base}/v2/models/digits/infer", data=body, timeout=120).status_code)

    attackers = [threading.Thread(target=attack) for _ in range(2)]
    served = []
    # Stopped early past 600 MB: the unfixed gateway grew by gigabytes.
    with RssPeak(gw.proc.pid, over=600) as rss:
        for t in attackers:
            t.start()
        session = requests.Session()
        try:
            while (len(statuses) < 6 or len(served) < 20) and not rss.tripped.is_set():
                served.append(one_row(session, gw).status_code)
        finally:
            stop.set()
            for t in attackers:
                t.join()
    assert set(statuses) == {413}, statuses
    assert set(served) == {200}, served
    grown = rss.grown
    assert grown < 300, f"RSS grew by {grown:.0f} MB under two attacking clients"


def test_data_the_model_would_refuse_is_not_decoded(gw):
    # 40 MiB of empty strings for the digits model's FP32 input: 14 M
    # `BYTES` elements (within the element limits) took 32 bytes each to
    # decode before the datatype was compared with the model's.
    n = (40 << 20) // 3
    body = (b'{"inputs":[{"name":"X","datatype":"BYTES","shape":[1,%d],"data":[' % n
            + b",".join([b'""'] * n) + b"]}]}")
    session = requests.Session()
    with RssPeak(gw.proc.pid) as rss:
        answers = [session.post(f"{gw.base}/v2/models/digits/infer", data=body, timeout=300) for _ in range(2)]
    assert rss.grown < 300, f"RSS grew by {rss.grown:.0f} MB refusing a 40 MiB body"
    for r in answers:
        assert r.status_code == 400, (r.status_code, r.text[:300])
        assert "datatype BYTES" in r.json()["error"]
