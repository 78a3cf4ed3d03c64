"""Candidates on a route (`routes[].candidate`, issue 43) on the real
gateway: a drawn share of the calls also runs on the candidate in the
background, only on idle capacity; the comparison with the live answers
(agreement with its Wilson interval, latency, errors, rows) is in
/admin/stats and /metrics; a rollout plan moves the candidate step by step
while its gate holds and rolls it back, with the reason, when it fails,
through a config reload; operators promote or roll back by hand.

No timing asserts: every wait polls for a state with a generous deadline.
The tests about agreement set `max_p99_ratio` out of reach: on a busy
machine one stalled mirrored call is the p99 of a few dozen."""

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import requests

from conftest import MODELS, REPO, Gateway
from routing_util import Reference, write_config
from sse_util import admin, pool_stats, wait_for

X = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
BATCH = 16
DEADLINE = 240.0


def models(*entries):
    """`[[models]]` entries: (name, file stem, extra TOML) each."""
    out = ""
    for name, stem, extra in entries:
        out += f'\n[[models]]\nname = "{name}"\npath = "{{models}}/{stem}.onnx"\nwarmup = true\n{extra}\n'
    return out


def route(live, candidate):
    """The `digits` route on `live` with `candidate`; the candidate's CPU
    check is off (`cpu_ceiling = 1.0`) unless it sets one: these tests count
    mirrors, which must not depend on how busy the machine is (the check is
    tested in test_rollout_canary.py)."""
    if "cpu_ceiling" not in candidate:
        candidate = candidate.rstrip()[:-1].rstrip() + ", cpu_ceiling = 1.0 }"
    return f'\n[[routes]]\nname = "digits"\nmodels = ["{live}"]\nbudget_ms = {{ default = 5000, max = 10000 }}\ncandidate = {candidate}\n'


def start(tmp_path, body):
    return Gateway(config=write_config(tmp_path, body))


def rollout(gw):
    return admin(gw, "/admin/stats")["rollouts"].get("digits")


class Caller:
    """Calls the route with the test split, BATCH rows at a time, cycling."""

    def __init__(self, gw):
        self.gw, self.session, self.i = gw, requests.Session(), 0

    def call(self):
        start = (self.i * BATCH) % (len(X) - BATCH)
        rows = X[start:start + BATCH]
        self.i += 1
        body = {"inputs": [{"name": "X", "shape": list(rows.shape), "datatype": "FP32",
                            "data": rows.ravel().tolist()}]}
        r = self.session.post(f"{self.gw.base}/v2/models/digits/infer", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r

    def until(self, predicate, what, timeout=DEADLINE):
        """Calls until `predicate(rollout)` holds."""
        def step():
            self.call()
            state = rollout(self.gw)
            return state if predicate(state) else None
        return wait_for(step, what, timeout=timeout)


def test_a_candidate_identical_to_live_is_promoted_with_agreement_1(tmp_path):
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy",
        "{ model = 'digits-heavy-twin', steps = [0.5, 0.75, 1.0], min_rows = 100, "
        "gate = { min_agreement = 0.99, max_p99_ratio = 1e6 } }")
    gw = start(tmp_path, body)
    try:
        first = rollout(gw)
        assert first["state"] == "mirroring" and first["step"] == 0 and first["share"] == 0.5
        assert first["in_force"]["candidate"] == {"model": "digits-heavy-twin", "share": 0.5, "step": 0}
        caller = Caller(gw)
        done = caller.until(lambda r: r["state"] != "mirroring" and not r["pending"], "the twin's promotion")
        assert done["state"] == "promoted", done
        assert done["comparison"]["agreement"] == 1.0
        assert done["comparison"]["rows"] >= 2 * 381, "each mirrored step proved 0.99 (381 perfect rows)"
        assert done["comparison"]["candidate_errors"] == 0
        assert [e["what"] for e in done["events"]] == ["advanced", "promoted"]
        assert all(e["by"] == "gate" for e in done["events"])
        # In force: the twin serves the route alone, through a reload.
        assert done["in_force"]["models"] == ["digits-heavy-twin"] and done["in_force"]["candidate"] is None
        assert done["in_force"]["generation"] >= 3, "one reload per move"
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy-twin"
        wait_for(lambda: "candidate promoted" in gw.whole_log(), "the \"candidate promoted\" log line")
    finally:
        gw.stop()


def test_the_comparison_counts_the_known_disagreement_of_the_test_split(tmp_path):
    """digits-cheap mirrored beside digits-heavy on every call (share 1,
    no plan): the rows and agreeing rows are those onnxruntime gives
    offline, in /admin/stats and /metrics, with a Wilson interval."""
    body = models(("digits-cheap", "digits-cheap", "cost = 1"), ("digits-heavy", "digits-heavy", "cost = 4")) + route(
        "digits-heavy", "{ model = 'digits-cheap', share = 1.0 }")
    ref = Reference("digits-cheap", "digits-heavy")
    cheap_label, cheap_p = ref.run("digits-cheap", X)
    heavy_label, heavy_p = ref.run("digits-heavy", X)
    agrees = (cheap_label == heavy_label) & (cheap_p.argmax(1) == heavy_p.argmax(1))
    assert 0 < (~agrees).sum() < len(X) // 10, "the split has a known, small share of disagreement"
    gw = start(tmp_path, body)
    try:
        session = requests.Session()
        for i in range(0, len(X), BATCH):
            rows = X[i:i + BATCH]
            r = session.post(f"{gw.base}/v2/models/digits/infer", timeout=30, json={"inputs": [
                {"name": "X", "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}]})
            assert r.status_code == 200 and r.headers["x-switchyard-model"] == "digits-heavy"
            n = i // BATCH + 1
            wait_for(lambda: rollout(gw)["comparison"]["candidate_calls"]
                     + rollout(gw)["comparison"]["skipped_busy"] >= n, f"mirror of call {n}", timeout=60)
        c = rollout(gw)["comparison"]
        assert c["skipped_busy"] == 0, "one call at a time: the candidate is always idle"
        assert c["rows"] == len(X) and c["agreeing"] == int(agrees.sum())
        assert c["live_calls"] == c["candidate_calls"] and c["live_errors"] == c["candidate_errors"] == 0
        low, high = c["agreement_interval"]
        assert low < c["agreement"] < high < 1.0
        assert c["live_p99_ms"] > 0 and c["candidate_p99_ms"] > 0
        assert (c["live_cost_per_call"], c["candidate_cost_per_call"]) == (4.0, 1.0)
        assert rollout(gw)["state"] == "mirroring" and rollout(gw)["verdict"] is None, "no plan: never moved"
        metrics = requests.get(f"{gw.admin}/metrics", timeout=10).text
        labels = '{route="digits",candidate="digits-cheap"}'
        assert f"switchyard_rollout_rows_total{labels} {len(X)}" in metrics
        assert f"switchyard_rollout_agreeing_rows_total{labels} {int(agrees.sum())}" in metrics
        assert re.search(r'switchyard_rollout_agreement_bound\{route="digits",candidate="digits-cheap",bound="low"\} 0\.9', metrics)
        assert 'switchyard_rollout_state{route="digits",candidate="digits-cheap",state="mirroring"} 1' in metrics
        assert 'switchyard_rollout_cost_per_call{route="digits",candidate="digits-cheap",side="candidate"} 1' in metrics
    finally:
        gw.stop()


def test_a_disagreeing_candidate_is_held_at_its_first_step_then_rolled_back(tmp_path):
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-heavy", "digits-heavy", "")) + route(
        "digits-heavy",
        "{ model = 'digits-cheap', steps = [0.5, 1.0], min_rows = 200, "
        "gate = { min_agreement = 0.995, max_p99_ratio = 1e6 } }")
    gw = start(tmp_path, body)
    try:
        caller = Caller(gw)
        caller.call()
        held = rollout(gw)
        assert held["state"] == "mirroring" and held["step"] == 0 and held["verdict"] == "wait"
        done = caller.until(lambda r: r["state"] != "mirroring" and not r["pending"], "the gate's verdict")
        assert done["state"] == "rolled_back" and done["by"] == "gate" and done["step"] == 0
        assert len(done["reasons"]) == 1 and done["reasons"][0].startswith("agreement 0.9"), done["reasons"]
        assert "below the minimum 0.995" in done["reasons"][0]
        assert done["comparison"]["rows"] >= 200 and done["comparison"]["agreement_interval"][1] < 0.995
        # In force after the rollback: the file's route without its candidate.
        assert done["in_force"]["models"] == ["digits-heavy"] and done["in_force"]["candidate"] is None
        wait_for(lambda: "candidate rolled back" in gw.whole_log(), "the rollback's log line")
        assert "below the minimum 0.995" in gw.log_text()
        mirrored = rollout(gw)["comparison"]["candidate_calls"]
        for _ in range(5):
            assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
        assert rollout(gw)["comparison"]["candidate_calls"] == mirrored, "no more mirroring"
        # A reload of the unchanged file keeps the rollback in force.
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert rollout(gw)["state"] == "rolled_back" and rollout(gw)["in_force"]["candidate"] is None
    finally:
        gw.stop()


def test_a_slow_candidate_fails_the_latency_gate(tmp_path):
    """The same model under another name, waiting 500 ms for company in
    each batch: it agrees on every row, and is rolled back for latency."""
    slow = "batching = { max_batch_size = 64, max_queue_delay_us = 500000, idle_dispatch = false, inline_max_us = 0 }"
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-cheap-slow", "digits-cheap", slow)) + route(
        "digits-cheap",
        "{ model = 'digits-cheap-slow', steps = [0.5, 1.0], min_rows = 50, gate = { min_agreement = 0.9 } }")
    gw = start(tmp_path, body)
    try:
        done = Caller(gw).until(lambda r: r["state"] != "mirroring" and not r["pending"], "the gate's verdict")
        assert done["state"] == "rolled_back", done
        assert len(done["reasons"]) == 1 and done["reasons"][0].startswith("latency p99"), done["reasons"]
        assert done["comparison"]["agreement"] == 1.0
        assert done["comparison"]["candidate_p99_ms"] >= 500
    finally:
        gw.stop()


def test_a_busy_candidate_is_skipped_and_never_queued(tmp_path):
    """Mirrors use idle capacity only: while the candidate's one pool is
    paused (not idle), every drawn call is counted as skipped and nothing
    is queued on it; live answers are unaffected. Resumed, calls are
    mirrored again."""
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-heavy", "digits-heavy", "")) + route(
        "digits-cheap", "{ model = 'digits-heavy', share = 1.0 }")
    gw = start(tmp_path, body)
    try:
        admin(gw, "/admin/models/digits-heavy/pools/cpu/pause", method="POST")
        caller = Caller(gw)
        for _ in range(10):
            assert caller.call().headers["x-switchyard-model"] == "digits-cheap"
        c = rollout(gw)["comparison"]
        assert (c["skipped_busy"], c["candidate_calls"], c["live_calls"]) == (10, 0, 10)
        heavy = pool_stats(gw, "digits-heavy")
        assert heavy["queue_depth"] == 0 and heavy["requests"] == 0, heavy
        admin(gw, "/admin/models/digits-heavy/pools/cpu/resume", method="POST")
        caller.until(lambda r: r["comparison"]["candidate_calls"] > 0, "a mirrored call once resumed", timeout=60)
    finally:
        gw.stop()


def test_operators_promote_and_roll_back_by_hand(tmp_path):
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-heavy", "digits-heavy", "")) + route(
        "digits-cheap", "{ model = 'digits-heavy', steps = [0.05, 0.25, 1.0] }")
    gw = start(tmp_path, body)
    try:
        url = f"{gw.admin}/admin/rollouts"
        assert requests.post(f"{url}/nope/promote", timeout=10).status_code == 404
        r = requests.post(f"{url}/digits/promote", timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["reload"]["trigger"] == "rollout"
        promoted = r.json()["rollout"]
        assert promoted["state"] == "promoted" and promoted["by"] == "operator"
        assert promoted["in_force"]["models"] == ["digits-heavy"]
        assert Caller(gw).call().headers["x-switchyard-model"] == "digits-heavy"
        assert requests.post(f"{url}/digits/rollback", timeout=10).status_code == 409
        assert admin(gw, "/admin/rollouts")["digits"]["state"] == "promoted"
    finally:
        gw.stop()
    gw = start(tmp_path, body)
    try:
        r = requests.post(f"{gw.admin}/admin/rollouts/digits/rollback", timeout=60)
        assert r.status_code == 200, r.text
        back = r.json()["rollout"]
        assert back["state"] == "rolled_back" and back["reasons"] == ["rolled back by an operator"]
        assert back["in_force"]["models"] == ["digits-cheap"] and back["in_force"]["candidate"] is None
    finally:
        gw.stop()


def test_a_bad_candidate_is_refused_with_its_field_path(tmp_path):
    body = models(("digits-cheap", "digits-cheap", ""), ("minilm-l3", "minilm-l3",
                  'tokenizer = { path = "{models}/minilm-tokenizer.json", max_length = 128 }')) + route(
        "digits-cheap", "{ model = 'nope', steps = [0.5, 0.25] }")
    config = write_config(tmp_path, body)
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    out = subprocess.run([binary, "check-config", str(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    for path in ["routes[0].candidate.model", "routes[0].candidate.steps", "routes[0].candidate.steps[1]"]:
        assert path in out.stdout + out.stderr, out.stdout + out.stderr
    # A candidate of another signature is caught where the models are loaded.
    config.write_text(config.read_text().replace("model = 'nope', steps = [0.5, 0.25]", "model = 'minilm-l3', share = 0.1"))
    out = subprocess.run([binary, "check-config", str(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "routes[0].candidate.model" in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_console_shows_a_rollout_and_promotes_it(tmp_path):
    """The console's Rollouts view in headless Chromium
    (gateway/tests/browser/rollout_browser.mjs): the comparison with its
    interval, the plan's step and the gate's verdict, then Promote."""
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
    browser_dir = REPO / "gateway" / "tests" / "browser"
    assert (browser_dir / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    token = "rollout-console-test-token-0123456789"
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy", "{ model = 'digits-heavy-twin', steps = [0.5, 1.0], min_rows = 100000 }")
    gw = Gateway(config=write_config(tmp_path, body), env={"SWITCHYARD_ADMIN_TOKEN": token})
    try:
        caller = Caller(gw)
        auth = {"authorization": f"Bearer {token}"}
        stats = lambda: requests.get(f"{gw.admin}/admin/stats", headers=auth, timeout=10).json()["rollouts"]["digits"]
        wait_for(lambda: caller.call() and stats()["comparison"]["rows"] >= 64, "rows compared", timeout=DEADLINE)
        shots = tmp_path / "screenshots"
        shots.mkdir()
        run = subprocess.run([node, str(browser_dir / "rollout_browser.mjs"), gw.admin, token, "digits",
                              "digits-heavy-twin", str(shots)], cwd=browser_dir, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}\n{gw.log_text()}"
        assert " passed, 0 failed" in run.stdout
        for name in ["console-rollout", "console-rollout-promoted"]:
            assert (shots / f"{name}.png").stat().st_size > 10_000, name
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy-twin"
    finally:
        gw.stop()


def test_an_upstream_model_as_candidate_is_mirrored_over_v2(tmp_path):
    """The candidate is an upstream member: another gateway serving the
    same digits-heavy over V2. Drawn calls are mirrored to it (or skipped
    while this gateway has a call in flight there), compared, agreeing on
    every row; the upstream ran exactly the mirrored calls."""
    (tmp_path / "upstream").mkdir()
    (tmp_path / "front").mkdir()
    upstream = start(tmp_path / "upstream", models(("digits-heavy", "digits-heavy", ""), ("minilm-l3", "minilm-l3",
                     'tokenizer = { path = "{models}/minilm-tokenizer.json", max_length = 128 }')))
    try:
        body = models(("digits-heavy", "digits-heavy", "")) + (
            f'\n[[upstreams]]\nname = "remote"\nkind = "v2"\naddrs = ["{upstream.url}"]\n'
            'health = { interval_ms = 200 }\nmodels = [{ name = "remote-heavy", model = "digits-heavy" }]\n'
        ) + route("digits-heavy", "{ model = 'remote-heavy', share = 1.0 }")
        gw = start(tmp_path / "front", body)
        try:
            caller = Caller(gw)
            for n in range(1, 11):
                assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
                wait_for(lambda: (c := rollout(gw)["comparison"])["candidate_calls"] + c["skipped_busy"] >= n,
                         f"mirror of call {n}", timeout=60)
            c = rollout(gw)["comparison"]
            assert rollout(gw)["candidate"] == "remote-heavy"
            assert c["candidate_calls"] == 10 and c["skipped_busy"] == 0, "one call at a time: always idle"
            assert c["agreement"] == 1.0 and c["rows"] == 10 * BATCH and c["candidate_errors"] == 0, c
            assert pool_stats(upstream, "digits-heavy")["requests"] == 10, "the upstream ran the mirrored calls"
        finally:
            gw.stop()
        # An upstream candidate of another signature is refused at its field path.
        text = body.replace('model = "digits-heavy" }]', 'model = "minilm-l3" }]')
        with pytest.raises(RuntimeError) as failed:
            start(tmp_path / "front", text)
        assert "routes[0].candidate.model" in str(failed.value), failed.value
    finally:
        upstream.stop()
