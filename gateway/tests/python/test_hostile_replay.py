"""Hostile inputs to the replay on the real binary (issue 37, items 15 and
16): `switchyard replay --pace recorded` with a tiny `--speed`, or a
sample whose `arrived_ms` jumps by 10^12 ms or sits at 2^64-1, is refused
with a message naming the line instead of panicking or waiting for ever;
concurrent `POST /admin/replay` calls run one at a time, the others get
429 with Retry-After at once."""

import json
import os
import subprocess
import threading

import pytest
import requests

from conftest import REPO, Gateway
from routing_util import write_config
from sse_util import admin, wait_for

CONFIG = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "r"
models = ["digits-cheap"]
cache = { enabled = false }
record = { sample = 1.0, path = "{dir}/traffic/r.jsonl" }
"""

CALLS = 60


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile-replay")
    config = write_config(folder, CONFIG.replace("{dir}", str(folder)))
    gw = Gateway(config=config)
    session = requests.Session()
    for n in range(CALLS):
        body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [n / CALLS] * 64}]}
        assert session.post(f"{gw.base}/v2/models/r/infer", json=body, timeout=30).status_code == 200
    wait_for(lambda: admin(gw, "/admin/stats")["record"].get("r", {}).get("written", 0) >= CALLS,
             "every call recorded")
    gw.config, gw.traffic = config, folder / "traffic" / "r.jsonl"
    yield gw
    gw.stop()


def replay(config, traffic, *args):
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    # The unfixed binary waited for ever here: the timeout kills it.
    return subprocess.run([binary, "replay", "--config", str(config), "--traffic", str(traffic), *args],
                          capture_output=True, text=True, timeout=90, cwd=REPO)


def with_arrivals(recorded, tmp_path, change):
    lines = [json.loads(line) for line in recorded.traffic.read_text().splitlines()]
    change(lines)
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def assert_refused(out, *words):
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    assert "panicked" not in out.stderr, out.stderr[-2000:]
    for word in words:
        assert word in out.stderr, out.stderr[-2000:]


def test_a_tiny_speed_is_refused_not_a_panic(recorded):
    out = replay(recorded.config, recorded.traffic, "--pace", "recorded", "--speed", "1e-300")
    assert_refused(out, "--speed", "line ")


@pytest.mark.parametrize("case", ["jump", "near-2^64"])
def test_a_wrong_arrival_is_refused_naming_its_line(recorded, tmp_path, case):
    def change(lines):
        if case == "jump":
            lines[1]["arrived_ms"] += 10**12
        else:
            lines[1]["arrived_ms"] = 2**64 - 1

    out = replay(recorded.config, with_arrivals(recorded, tmp_path, change), "--pace", "recorded")
    assert_refused(out, "line 2 ", "arrived_ms")


def test_a_sample_at_the_recorded_pace_still_replays(recorded):
    out = replay(recorded.config, recorded.traffic, "--pace", "recorded", "--speed", "1000", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    [report] = json.loads(out.stdout)["configs"]
    calls = len(recorded.traffic.read_text().splitlines())
    assert report["replayed"] == calls and report["latency"]["basis"] == "measured"


def test_concurrent_admin_replays_run_one_at_a_time(recorded):
    # A sample long enough that a replay is still running when the other
    # calls arrive, even on a fast machine (the writer is idle: appending
    # copies of its lines is safe).
    lines = recorded.traffic.read_text()
    with open(recorded.traffic, "a") as traffic:
        traffic.write(lines * 50)
    candidate = recorded.config.read_text()
    start = threading.Barrier(6)
    answers = []

    def post():
        start.wait()
        answers.append(requests.post(f"{recorded.admin}/admin/replay", data=candidate, timeout=300,
                                     headers={"content-type": "application/toml"}))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) <= {200, 429}, [(r.status_code, r.text[:200]) for r in answers]
    assert 200 in statuses and 429 in statuses, statuses
    for r in answers:
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert "a replay is already running" in r.json()["error"]
    # The slot is free again once the replay ended.
    again = requests.post(f"{recorded.admin}/admin/replay", data=candidate, timeout=300,
                          headers={"content-type": "application/toml"})
    assert again.status_code == 200
