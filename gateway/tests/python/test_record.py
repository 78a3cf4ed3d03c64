"""The traffic sample (`routes[].record`): the real gateway writes sampled
calls (REST and gRPC) as JSON lines a replay can re-run: the inputs exactly
as sent, the decision, the cache outcome, the cheap model's confidence, the
tenant hashed; sampling, rotation and its bounds, counters, config errors."""

import base64
import json
import subprocess
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conftest import REPO, Gateway, free_port
from routing_util import DIGITS_MODELS, Reference, write_config
from sse_util import admin, wait_for

KEY = "record-test-key-0123456789"

CONFIG = """
[cache]
""" + DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 400, max = 1000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
auth = { keys = [{ key = "%s", tenant = "team-a" }] }
record = { sample = 1.0, path = "{dir}/traffic/digits.jsonl" }

[[routes]]
name = "half"
models = ["digits-cheap"]
cache = { enabled = false }
record = { sample = 0.5, path = "{dir}/traffic/half.jsonl" }

[[routes]]
name = "tiny"
models = ["digits-cheap"]
cache = { enabled = false }
record = { sample = 1.0, path = "{dir}/traffic/tiny.jsonl", max_bytes = 4096, files = 2 }

[[routes]]
name = "unrecorded"
models = ["digits-cheap"]
""" % KEY

AUTH = {"x-api-key": KEY}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("record")
    grpc_port = free_port()
    gw = Gateway(config=write_config(folder, CONFIG.replace("{dir}", str(folder))),
                 extra_args=["--grpc-listen", f"127.0.0.1:{grpc_port}"])
    gw.grpc_url = f"127.0.0.1:{grpc_port}"
    gw.traffic = folder / "traffic"
    yield gw
    gw.stop()


def written(gw, route):
    return admin(gw, "/admin/stats")["record"].get(route, {}).get("written", 0)


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def decoded_input(entry):
    raw = base64.b64decode(entry["data_b64"])
    assert entry["datatype"] == "FP32"
    return np.frombuffer(raw, dtype=np.float32).reshape(entry["shape"])


def rows(n, seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(n, 64)).astype(np.float32)


def test_recorded_lines_hold_inputs_decisions_and_cache_outcomes(gw):
    rest = httpclient.InferenceServerClient(url=gw.url)
    x = rows(2, seed=1)
    answers = []
    for binary in (True, True, False):  # the second is an exact repeat of the first
        i = httpclient.InferInput("X", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        # A fresh dict each call: tritonclient adds its header-length field to the one it is given.
        result = rest.infer("digits", [i], headers=dict(AUTH), request_id=f"rest-{len(answers)}")
        answers.append(result)
    g = grpcclient.InferenceServerClient(url=gw.grpc_url)
    gi = grpcclient.InferInput("X", [1, 64], "FP32")
    y = rows(1, seed=2)
    gi.set_data_from_numpy(y)
    g.infer("digits", [gi], headers=dict(AUTH), request_id="grpc-0")
    g.close()
    rest.close()
    wait_for(lambda: written(gw, "digits") >= 4, "four recorded lines")
    recorded = {line["id"]: line for line in lines(gw.traffic / "digits.jsonl")}
    assert set(recorded) >= {"rest-0", "rest-1", "rest-2", "grpc-0"}
    first, repeat, as_json, over_grpc = (recorded[k] for k in ("rest-0", "rest-1", "rest-2", "grpc-0"))
    for line in (first, repeat, as_json):
        assert line["v"] == 1 and line["route"] == "digits" and line["protocol"] == "rest"
        np.testing.assert_array_equal(decoded_input(line["inputs"][0]), x)
    np.testing.assert_array_equal(decoded_input(over_grpc["inputs"][0]), y)
    assert over_grpc["protocol"] == "grpc"
    assert (first["answer"]["cache"], repeat["answer"]["cache"]) == ("miss", "hit-l1")
    # The decision is the one the client saw.
    ref = Reference("digits-cheap")
    _, probs = ref.run("digits-cheap", x)
    # A request is as confident as its least confident row.
    assert first["answer"]["confidence"] == pytest.approx(float(probs.max(axis=1).min()), abs=1e-5)
    escalated = first["answer"]["reason"] == "cascade_escalate"
    assert first["answer"]["model"] == ("digits-heavy" if escalated else "digits-cheap")
    assert first["answer"]["pool"] == "cpu" and first["answer"]["device"] == "cpu"
    assert first["budget_ms"] == 400 and first["latency_us"] > 0 and first["error"] is None
    assert abs(first["arrived_ms"] / 1000 - time.time()) < 60
    assert first["tenant"] != "team-a" and len(first["tenant"]) == 16
    assert first["tenant"] == over_grpc["tenant"], "one tenant, one hash"
    assert KEY not in (gw.traffic / "digits.jsonl").read_text()


def test_a_share_of_requests_is_sampled(gw):
    rest = httpclient.InferenceServerClient(url=gw.url)
    for n in range(300):
        i = httpclient.InferInput("X", [1, 64], "FP32")
        i.set_data_from_numpy(rows(1, seed=100 + n), binary_data=True)
        rest.infer("half", [i])
    rest.close()
    time.sleep(0.5)
    count = len(lines(gw.traffic / "half.jsonl"))
    assert count == written(gw, "half")
    assert 100 <= count <= 200, f"{count} of 300 sampled at 0.5"


def test_files_rotate_and_stay_within_their_bound(gw):
    rest = httpclient.InferenceServerClient(url=gw.url)
    for n in range(60):  # ~800 bytes a line: several rotations of 4 KiB
        i = httpclient.InferInput("X", [1, 64], "FP32")
        i.set_data_from_numpy(rows(1, seed=500 + n), binary_data=True)
        rest.infer("tiny", [i], request_id=f"t{n:03d}")
    rest.close()
    wait_for(lambda: written(gw, "tiny") >= 60, "sixty recorded lines")
    current, older = gw.traffic / "tiny.jsonl", gw.traffic / "tiny.jsonl.1"
    assert current.exists() and older.exists()
    assert not (gw.traffic / "tiny.jsonl.2").exists(), "files = 2"
    assert current.stat().st_size <= 4096 and older.stat().st_size <= 4096
    ids = [line["id"] for line in lines(older) + lines(current)]
    assert ids == sorted(ids) and ids[-1] == "t059", "the newest lines are kept, in order"
    stats = admin(gw, "/admin/stats")["record"]["tiny"]
    assert stats["rotations"] >= 5 and stats["dropped"] == 0 and stats["failed"] == 0
    metrics = requests.get(f"{gw.admin}/metrics", timeout=5).text
    assert 'switchyard_record_lines_total{route="tiny"}' in metrics
    assert 'switchyard_record_rotations_total{route="tiny"}' in metrics


def test_routes_without_record_write_nothing_and_config_shows_the_settings(gw):
    rest = httpclient.InferenceServerClient(url=gw.url)
    i = httpclient.InferInput("X", [1, 64], "FP32")
    i.set_data_from_numpy(rows(1, seed=9), binary_data=True)
    rest.infer("unrecorded", [i])
    rest.close()
    assert "unrecorded" not in admin(gw, "/admin/stats")["record"]
    routes = {r["name"]: r for r in admin(gw, "/admin/config")["config"]["routes"]}
    assert routes["unrecorded"]["record"] is None
    assert routes["tiny"]["record"] == {"sample": 1.0, "path": str(gw.traffic / "tiny.jsonl"),
                                        "max_bytes": 4096, "files": 2, "max_line_bytes": 4096}


def test_invalid_record_settings_are_refused_with_their_field_paths(tmp_path):
    path = write_config(tmp_path, """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"

[[routes]]
name = "r"
models = ["digits-cheap"]
record = { sample = 1.5, path = "", max_bytes = 10, files = 0 }
""")
    binary = str(REPO / "target" / "debug" / "switchyard")
    out = subprocess.run([binary, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    for field in ("routes[0].record.sample", "routes[0].record.path", "routes[0].record.max_bytes",
                  "routes[0].record.files"):
        assert field in out.stderr, out.stderr
