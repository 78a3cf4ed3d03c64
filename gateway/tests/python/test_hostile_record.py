"""Hostile traffic against the traffic sample (`routes[].record`) on the
real binary (issue 37, items 4 and 14): clients repeating one 7.7 MB
request, every call recorded, must not fill the gateway's memory with
queued records (the queue is bounded by the bytes its records hold, and a
line larger than `max_line_bytes` is not recorded at all), and no file
may pass `max_bytes` because of one large line."""

import json
import threading

import numpy as np
import pytest
import requests

from conftest import Gateway
from hostile_util import RssPeak
from routing_util import write_config
from sse_util import admin, wait_for

ROWS = 30_000  # x 64 FP32 = 7.68 MB of binary tensor data

CONFIG = """
[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
limits = { max_rows = 40000 }
warmup = true

[[routes]]
name = "big"
models = ["digits-cheap"]
record = { sample = 1.0, path = "{dir}/traffic/big.jsonl" }

[[routes]]
name = "tiny"
models = ["digits-cheap"]
cache = { enabled = false }
record = { sample = 1.0, path = "{dir}/traffic/tiny.jsonl", max_bytes = "1MiB", files = 2 }
"""

# Large lines allowed (a setting the gateway did not have before the fix).
WIDE = CONFIG + """
[[routes]]
name = "wide"
models = ["digits-cheap"]
record = { sample = 1.0, path = "{dir}/traffic/wide.jsonl", max_bytes = "32MiB", files = 2, max_line_bytes = "16MiB" }
"""


def start(tmp_path_factory, config):
    folder = tmp_path_factory.mktemp("hostile-record")
    gw = Gateway(config=write_config(folder, config.replace("{dir}", str(folder))))
    gw.traffic = folder / "traffic"
    return gw


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = start(tmp_path_factory, CONFIG)
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    gw = start(tmp_path_factory, WIDE)
    yield gw
    gw.stop()


def big_request(seed=0):
    """One binary infer body of ROWS rows (7.7 MB), asking for the labels only."""
    x = np.random.default_rng(seed).uniform(0, 16, size=(ROWS, 64)).astype(np.float32)
    header = json.dumps({
        "inputs": [{"name": "X", "shape": [ROWS, 64], "datatype": "FP32",
                    "parameters": {"binary_data_size": x.nbytes}}],
        "outputs": [{"name": "label", "parameters": {"binary_data": True}}],
    }).encode()
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"}


def one_row(session, gw, route):
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}
    return session.post(f"{gw.base}/v2/models/{route}/infer", json=body, timeout=60)


def record_stats(gw, route):
    return admin(gw, "/admin/stats")["record"].get(route, {})


def ended(gw, route):
    s = record_stats(gw, route)
    return s.get("written", 0) + s.get("dropped", 0) + s.get("oversized", 0) + s.get("failed", 0)


def repeat_big_requests(gw, route, clients=4, per_client=25):
    """`clients` clients each sending the same 7.7 MB request `per_client`
    times (cache hits after the first, each one recorded), and one client
    sending one-row requests meanwhile; stops early if RSS grows past 600 MB
    (the unfixed gateway went to gigabytes). Returns the peak RSS growth,
    the big requests' statuses and the one-row ones'."""
    body, headers = big_request()
    statuses, served = [], []
    with RssPeak(gw.proc.pid, over=600) as rss:
        def attack():
            session = requests.Session()
            for _ in range(per_client):
                if rss.tripped.is_set():
                    return
                r = session.post(f"{gw.base}/v2/models/{route}/infer", data=body, headers=headers, timeout=120)
                statuses.append(r.status_code)

        attackers = [threading.Thread(target=attack) for _ in range(clients)]
        for t in attackers:
            t.start()
        session = requests.Session()
        while any(t.is_alive() for t in attackers):
            served.append(one_row(session, gw, route).status_code)
        for t in attackers:
            t.join()
        # The writer works through what was queued: memory stays bounded
        # until the queue is empty, not only while requests arrive.
        wait_for(lambda: ended(gw, route) >= len(statuses) + len(served) or rss.tripped.is_set(),
                 "every record written or dropped", timeout=120)
    return rss.grown, statuses, served


def test_repeated_large_requests_do_not_fill_memory_with_queued_records(gw):
    # Default record settings: a 7.7 MB request's line (10 MB of base64)
    # passes the default max_line_bytes (4 MiB) and is counted, not queued.
    grown, statuses, served = repeat_big_requests(gw, "big")
    assert grown < 300, f"RSS grew by {grown:.0f} MB while {len(statuses)} large calls were recorded"
    assert set(statuses) == {200}, statuses
    assert served and set(served) == {200}, served
    stats = record_stats(gw, "big")
    assert stats["oversized"] >= len(statuses), stats
    metrics = requests.get(f"{gw.admin}/metrics", timeout=5).text
    assert 'switchyard_record_oversized_total{route="big"}' in metrics
    assert "switchyard_record_queued_bytes" in metrics


def test_large_lines_allowed_are_queued_within_the_byte_bound(wide):
    # max_line_bytes = 16 MiB: the large lines are recorded, and the queue
    # holds at most its byte bound of them; the rest are dropped, counted.
    gw = wide
    grown, statuses, served = repeat_big_requests(gw, "wide", per_client=15)
    assert grown < 300, f"RSS grew by {grown:.0f} MB while {len(statuses)} large calls were recorded"
    assert set(statuses) == {200} and set(served) == {200}
    stats = record_stats(gw, "wide")
    assert stats["written"] >= 1 and stats["failed"] == 0, stats
    assert stats["written"] + stats["dropped"] == len(statuses) + len(served), stats
    assert stats["oversized"] == 0, stats
    for path in gw.traffic.glob("wide.jsonl*"):
        assert path.stat().st_size <= 32 << 20, path
        for line in path.read_text().splitlines():
            assert json.loads(line)["inputs"][0]["shape"] in ([ROWS, 64], [1, 64])


def test_a_line_larger_than_max_bytes_is_not_written(gw):
    # max_bytes = 1 MiB x files = 2: before, two 7.7 MB calls left 20 MiB.
    body, headers = big_request(seed=1)
    for _ in range(2):
        r = requests.post(f"{gw.base}/v2/models/tiny/infer", data=body, headers=headers, timeout=120)
        assert r.status_code == 200, r.text[:300]
    assert one_row(requests.Session(), gw, "tiny").status_code == 200
    wait_for(lambda: ended(gw, "tiny") >= 3, "three records ended")
    files = list(gw.traffic.glob("tiny.jsonl*"))
    on_disk = sum(p.stat().st_size for p in files)
    assert on_disk <= 2 << 20, f"{on_disk} bytes on disk for max_bytes = 1 MiB x files = 2"
    for path in files:
        assert path.stat().st_size <= 1 << 20, path
    stats = record_stats(gw, "tiny")
    assert (stats["written"], stats["oversized"]) == (1, 2), stats
