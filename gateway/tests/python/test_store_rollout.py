"""New model versions from the S3 store through the route's rollout plan
(`[repository] rollout = "gated"`, issue 43 item 4), on the real binary
with a real S3-compatible server (moto): the poller finds version 2, the
serving version 1 keeps the model's name while version 2 is mirrored as the
route's candidate `digits-heavy@2`; a version that agrees is promoted and
then serves under the model's name, one that disagrees (digits-cheap's
weights uploaded as digits-heavy version 2) is held at its first step,
rolled back with the reason, and version 1 keeps serving, across reloads.

No timing asserts: every wait polls for a state with a generous deadline."""

import json

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from sse_util import admin, wait_for
from test_model_store import BUCKET, Moto

pytest.importorskip("moto", reason="moto[server] is not installed (scripts/setup.sh test)")

X = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
BATCH = 16
DEADLINE = 240.0


@pytest.fixture
def store():
    server = Moto()
    yield server
    server.stop()


def start(store, tmp_path, plan):
    config = tmp_path / "gated.toml"
    config.write_text(
        f'[repository]\nuri = "s3://{BUCKET}/repo"\nendpoint = "{store.endpoint}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\npoll_interval_ms = 200\n'
        f'rollout = "gated"\nrollout_plan = {plan}\n'
        '\n[[routes]]\nname = "digits"\nmodels = ["digits-heavy"]\nbudget_ms = { default = 5000, max = 10000 }\n'
    )
    return Gateway(config, env=store.env())


class Caller:
    """Calls the route with the test split, BATCH rows at a time, cycling."""

    def __init__(self, gw):
        self.gw, self.session, self.i = gw, requests.Session(), 0

    def call(self, model="digits"):
        start = (self.i * BATCH) % (len(X) - BATCH)
        rows = X[start:start + BATCH]
        self.i += 1
        body = {"inputs": [{"name": "X", "shape": list(rows.shape), "datatype": "FP32",
                            "data": rows.ravel().tolist()}]}
        r = self.session.post(f"{self.gw.base}/v2/models/{model}/infer", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r

    def until(self, predicate, what):
        def step():
            self.call()
            state = rollout(self.gw)
            return state if predicate(state) else None
        return wait_for(step, what, timeout=DEADLINE)


def rollout(gw):
    return admin(gw, "/admin/rollouts").get("digits")


def versions(gw):
    return requests.get(f"{gw.base}/v2/models/digits-heavy", timeout=10).json()["versions"]


def mirrored(gw):
    """Waits for the poller to find version 2 and mirror it."""
    state = wait_for(lambda: (r := rollout(gw)) and r["candidate"] == "digits-heavy@2" and not r["pending"] and r,
                     "version 2 mirrored as the route's candidate", timeout=DEADLINE)
    assert state["source"] == "store" and state["state"] == "mirroring" and state["step"] == 0, state
    assert state["in_force"]["models"] == ["digits-heavy"]
    assert versions(gw) == ["1"], "version 1 keeps the model's name while version 2 is a candidate"
    return state


def test_a_store_version_that_agrees_is_promoted_and_serves(store, tmp_path):
    store.upload_repo(tmp_path / "v1", "digits-heavy", 1)
    gw = start(store, tmp_path, "{ steps = [0.5, 1.0], min_rows = 100, cpu_ceiling = 1.0, "
                                "gate = { min_agreement = 0.99, max_p99_ratio = 1e6 } }")
    try:
        caller = Caller(gw)
        assert caller.call("digits-heavy").json()["model_version"] == "1"
        assert rollout(gw) is None, "nothing to roll out before a new version"
        store.upload_repo(tmp_path / "v2", "digits-heavy", 2)
        mirrored(gw)
        done = caller.until(lambda r: r["state"] != "mirroring" and not r["pending"], "version 2's promotion")
        assert done["state"] == "promoted" and done["by"] == "gate", done
        assert done["comparison"]["agreement"] == 1.0 and done["comparison"]["rows"] >= 100
        assert done["in_force"]["candidate"] is None and done["in_force"]["models"] == ["digits-heavy"]
        # Promoted: version 2 serves under the model's name, on the route too.
        assert versions(gw) == ["2"]
        assert caller.call("digits-heavy").json()["model_version"] == "2"
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
        # A reload keeps version 2 (the store's newest, now the serving one).
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert versions(gw) == ["2"]
    finally:
        gw.stop()


def test_a_store_version_that_disagrees_is_held_then_rolled_back(store, tmp_path):
    store.upload_repo(tmp_path / "v1", "digits-heavy", 1)
    gw = start(store, tmp_path, "{ steps = [0.5, 1.0], min_rows = 200, cpu_ceiling = 1.0, "
                                "gate = { min_agreement = 0.995, max_p99_ratio = 1e6 } }")
    try:
        caller = Caller(gw)
        # digits-cheap's weights uploaded as digits-heavy version 2.
        store.upload_repo(tmp_path / "cheap", "digits-cheap", 2)
        cheap = tmp_path / "cheap" / "digits-cheap" / "2" / "model.onnx"
        store.s3.upload_file(str(cheap), BUCKET, "repo/digits-heavy/2/model.onnx")
        mirrored(gw)
        caller.call()
        held = rollout(gw)
        assert held["state"] == "mirroring" and held["step"] == 0 and held["verdict"] in ("wait", "hold"), held
        done = caller.until(lambda r: r["state"] != "mirroring" and not r["pending"], "the gate's verdict")
        assert done["state"] == "rolled_back" and done["by"] == "gate" and done["step"] == 0, done
        assert "below the minimum 0.995" in done["reasons"][0], done["reasons"]
        assert done["in_force"]["candidate"] is None
        # Version 1 keeps serving, on the route and by name, and a reload
        # (the store unchanged, version 2 still its newest) keeps it.
        assert versions(gw) == ["1"]
        assert caller.call("digits-heavy").json()["model_version"] == "1"
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert versions(gw) == ["1"] and rollout(gw)["state"] == "rolled_back"
        assert caller.call("digits-heavy").json()["model_version"] == "1"
        wait_for(lambda: "candidate rolled back" in gw.whole_log(), "the \"candidate rolled back\" log line")
    finally:
        gw.stop()


def test_a_gated_rollout_needs_a_store(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[repository]\nrollout = "gated"\n')
    with pytest.raises(RuntimeError) as failed:
        Gateway(config)
    assert "repository.rollout" in str(failed.value), failed.value


def test_a_store_version_named_model_at_version_is_a_routes_candidate(store, tmp_path):
    """A route over store models, its candidate an older version the store
    serves beside the newest (`digits-heavy@1`, version_policy latest 2):
    both are known only once the store is listed, and checked then; the
    candidate is mirrored and compared (the same weights: agreement 1)."""
    store.upload_repo(tmp_path / "v1", "digits-heavy", 1)
    store.upload_repo(tmp_path / "v2", "digits-heavy", 2)
    pbtxt = store.s3.get_object(Bucket=BUCKET, Key="repo/digits-heavy/config.pbtxt")["Body"].read()
    store.s3.put_object(Bucket=BUCKET, Key="repo/digits-heavy/config.pbtxt",
                        Body=pbtxt + b"\nversion_policy: { latest: { num_versions: 2 } }\n")
    config = tmp_path / "versions.toml"
    config.write_text(
        f'[repository]\nuri = "s3://{BUCKET}/repo"\nendpoint = "{store.endpoint}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n'
        '\n[[routes]]\nname = "digits"\nmodels = ["digits-heavy"]\nbudget_ms = { default = 5000, max = 10000 }\n'
        'candidate = { model = "digits-heavy@1", share = 1.0, cpu_ceiling = 1.0 }\n')
    gw = Gateway(config, env=store.env())
    try:
        caller = Caller(gw)
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
        state = wait_for(lambda: (r := rollout(gw)) and r["comparison"]["candidate_calls"] >= 1 and r,
                         "a mirrored call", timeout=DEADLINE)
        assert state["candidate"] == "digits-heavy@1" and state["source"] == "file", state
        assert state["comparison"]["agreement"] == 1.0 and state["comparison"]["rows"] == BATCH
    finally:
        gw.stop()
    # A store name that is not there is refused at its field path.
    config.write_text(config.read_text().replace("digits-heavy@1", "digits-heavy@7"))
    with pytest.raises(RuntimeError) as failed:
        Gateway(config, env=store.env())
    assert "routes[0].candidate.model" in str(failed.value), failed.value
