"""A canary (`routes[].candidate` with `serve = true`, issue 43) on the
real gateway: the plan's step is a share of the route's calls *answered*
by the candidate (reason `canary`, sticky per client with the route's
`sticky` key, never cached), compared with a background run of the live
model; the gate promotes it or rolls it back through a reload; a canary
call that fails is answered by the live model. Background runs also wait
for spare CPU (`cpu_ceiling`).

No timing asserts: every wait polls for a state with a generous deadline."""

import os
import re
import shutil
import subprocess

import requests

from conftest import REPO, Gateway
from routing_util import Reference, write_config
from sse_util import admin, pool_stats, wait_for
from test_rollout import BATCH, DEADLINE, X, models, rollout, start

ROUTE = '\n[[routes]]\nname = "digits"\nmodels = ["{live}"]\nbudget_ms = {{ default = 5000, max = 10000 }}\n' \
        'sticky = {{ header = "x-user" }}\ncandidate = {candidate}\n'


def route(live, candidate):
    """The sticky `digits` route on `live` with `candidate` (CPU check off
    unless the candidate sets `cpu_ceiling`, as in test_rollout.py)."""
    if "cpu_ceiling" not in candidate:
        candidate = candidate.rstrip()[:-1].rstrip() + ", cpu_ceiling = 1.0 }"
    return ROUTE.format(live=live, candidate=candidate)


def call(gw, session, i, user=None, rows=None):
    """One call of BATCH rows (the i-th slice of the test split, or `rows`)."""
    if rows is None:
        start = (i * BATCH) % (len(X) - BATCH)
        rows = X[start:start + BATCH]
    body = {"inputs": [{"name": "X", "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}]}
    headers = {"x-user": user} if user else {}
    r = session.post(f"{gw.base}/v2/models/digits/infer", json=body, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r


def served_by(r):
    return r.headers["x-switchyard-model"], r.headers["x-switchyard-reason"]


def test_a_canary_identical_to_live_serves_its_share_sticky_uncached_then_is_promoted(tmp_path):
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy",
        "{ model = 'digits-heavy-twin', steps = [0.5, 1.0], serve = true, min_rows = 100000, "
        "gate = { min_agreement = 0.99, max_p99_ratio = 1e6 } }")
    token = "canary-console-test-token-0123456789"
    body = '[cache]\nl1_max_bytes = "16MiB"\n' + body
    gw = Gateway(config=write_config(tmp_path, body), env={"SWITCHYARD_ADMIN_TOKEN": token})
    auth = {"authorization": f"Bearer {token}"}

    def state():
        r = requests.get(f"{gw.admin}/admin/stats", headers=auth, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["rollouts"]["digits"]

    try:
        first = state()
        assert (first["mode"], first["state"], first["share"]) == ("canary", "mirroring", 0.5), first
        session = requests.Session()
        # Sticky: each user is answered by one model for the whole step.
        sides = {}
        for i in range(80):
            user = f"user-{i % 40}"
            model, reason = served_by(call(gw, session, i, user))
            assert (model, reason) in {("digits-heavy", "fixed"), ("digits-heavy-twin", "canary")}, (model, reason)
            assert sides.setdefault(user, model) == model, f"{user} saw two models in one step"
        on_canary = [u for u, m in sides.items() if m == "digits-heavy-twin"]
        assert 0 < len(on_canary) < 40, f"{len(on_canary)} of 40 users on the canary at share 0.5"
        live_user = next(u for u, m in sides.items() if m == "digits-heavy")
        # A canary answer is not cached: the same rows again are computed
        # again for the canary's client, and the route's clients get the
        # live model's answer, not the canary's.
        rows = X[3:3 + BATCH] * 0.5
        canary_user = on_canary[0]
        assert served_by(call(gw, session, 0, canary_user, rows)) == ("digits-heavy-twin", "canary")
        again = call(gw, session, 0, canary_user, rows)
        assert served_by(again) == ("digits-heavy-twin", "canary") and not again.headers.get("x-cache", "").startswith("hit")
        live = call(gw, session, 0, live_user, rows)
        assert served_by(live) == ("digits-heavy", "fixed") and not live.headers.get("x-cache", "").startswith("hit")
        hit = call(gw, session, 0, live_user, rows)
        assert served_by(hit)[0] == "digits-heavy" and hit.headers.get("x-cache", "").startswith("hit"), "the cache is on"
        # The comparison: the canary's answers against background runs of the live model.
        c = wait_for(lambda: (c := state()["comparison"])["rows"] >= 64 and c, "canary rows compared",
                     timeout=DEADLINE)
        assert c["agreement"] == 1.0 and c["candidate_errors"] == 0, c
        assert c["candidate_calls"] >= len(on_canary) and c["live_calls"] >= 80 - 2 * len(on_canary), c
        assert c["candidate_p99_ms"] is not None and c["live_p99_ms"] is not None, "served latency of both sides"
        metrics = requests.get(f"{gw.admin}/metrics", headers=auth, timeout=10).text
        canary = re.search(r'^switchyard_routing_decisions_total\{[^}]*reason="canary"[^}]*\} (\S+)', metrics, re.M)
        assert canary and float(canary.group(1)) == c["candidate_calls"], "the decisions count the canary's answers"
        # The console shows the canary's step (headless Chromium), then promotes it.
        node = shutil.which("node")
        assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
        browser_dir = REPO / "gateway" / "tests" / "browser"
        shots = tmp_path / "screenshots"
        shots.mkdir()
        run = subprocess.run([node, str(browser_dir / "rollout_browser.mjs"), gw.admin, token, "digits",
                              "digits-heavy-twin", str(shots), "canary"], cwd=browser_dir, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}\n{gw.log_text()}"
        done = state()
        assert done["state"] == "promoted" and done["events"][-1]["by"] == "operator", done
        assert served_by(call(gw, session, 1, live_user)) == ("digits-heavy-twin", "fixed"), "promoted: serves all"
    finally:
        gw.stop()


def test_the_gate_promotes_an_agreeing_canary_on_its_own(tmp_path):
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy",
        "{ model = 'digits-heavy-twin', steps = [0.5, 1.0], serve = true, min_rows = 100, "
        "gate = { min_agreement = 0.99, max_p99_ratio = 1e6 } }")
    gw = start(tmp_path, body)
    try:
        session = requests.Session()
        done = wait_for(lambda: call(gw, session, next(COUNTER)) and (r := rollout(gw))["state"] != "mirroring"
                        and not r["pending"] and r, "the canary's promotion", timeout=DEADLINE)
        assert done["state"] == "promoted" and done["events"][-1]["by"] == "gate", done
        assert done["comparison"]["agreement"] == 1.0 and done["comparison"]["rows"] >= 381, done["comparison"]
        assert done["in_force"]["models"] == ["digits-heavy-twin"]
    finally:
        gw.stop()


COUNTER = iter(range(10**9))


def test_a_disagreeing_canary_is_rolled_back_and_the_route_answers_alone(tmp_path):
    """digits-cheap as the canary of digits-heavy: it disagrees on a known
    share of the test split, so its first step is held, then rolled back
    with the agreement reason; afterwards no call is the canary's."""
    ref = Reference("digits-cheap", "digits-heavy")
    disagree = (ref.run("digits-cheap", X)[0] != ref.run("digits-heavy", X)[0]).mean()
    assert disagree > 0.01, "the split has a known share of disagreement"
    body = models(("digits-cheap", "digits-cheap", ""), ("digits-heavy", "digits-heavy", "")) + route(
        "digits-heavy",
        "{ model = 'digits-cheap', steps = [0.3, 1.0], serve = true, min_rows = 300, "
        "gate = { min_agreement = 0.999, max_p99_ratio = 1e6 } }")
    gw = start(tmp_path, body)
    try:
        session = requests.Session()
        done = wait_for(lambda: call(gw, session, next(COUNTER)) and (r := rollout(gw))["state"] != "mirroring"
                        and not r["pending"] and r, "the canary's rollback", timeout=DEADLINE)
        assert done["state"] == "rolled_back" and done["step"] == 0, done
        assert any("agreement" in reason for reason in done["reasons"]), done["reasons"]
        assert done["comparison"]["agreement"] < 0.999
        assert done["in_force"]["candidate"] is None
        for i in range(30):
            assert served_by(call(gw, session, i, f"user-{i}")) == ("digits-heavy", "fixed")
    finally:
        gw.stop()


def test_a_failing_canary_call_is_answered_by_the_route_and_fails_the_error_gate(tmp_path):
    """The canary is an upstream model; once its upstream is gone, the
    canary's calls fail, are answered by the live model (every client gets
    200), count as candidate errors, and the error gate rolls it back."""
    (tmp_path / "upstream").mkdir()
    (tmp_path / "front").mkdir()
    upstream = start(tmp_path / "upstream", models(("digits-heavy", "digits-heavy", "")))
    gw = None
    try:
        body = models(("digits-heavy", "digits-heavy", "")) + (
            f'\n[[upstreams]]\nname = "remote"\nkind = "v2"\naddrs = ["{upstream.url}"]\n'
            'health = { interval_ms = 200 }\nmodels = [{ name = "remote-heavy", model = "digits-heavy" }]\n'
        ) + route("digits-heavy", "{ model = 'remote-heavy', steps = [0.5, 1.0], serve = true, min_rows = 20, "
                                  "gate = { min_agreement = 0.999, max_p99_ratio = 1e6 } }")
        gw = start(tmp_path / "front", body)
        session = requests.Session()
        models_seen = {served_by(call(gw, session, i))[0] for i in range(12)}
        assert "remote-heavy" in models_seen, f"the canary answered some calls: {models_seen}"
        assert pool_stats(upstream, "digits-heavy")["requests"] > 0
        upstream.stop()
        done = wait_for(lambda: served_by(call(gw, session, next(COUNTER)))[0] == "digits-heavy"
                        and (r := rollout(gw))["state"] != "mirroring" and not r["pending"] and r,
                        "the error gate's rollback", timeout=DEADLINE)
        assert done["state"] == "rolled_back", done
        assert any("error rate" in reason for reason in done["reasons"]), done["reasons"]
        c = done["comparison"]
        assert c["candidate_errors"] > 0 and c["live_errors"] == 0, c
    finally:
        if gw:
            gw.stop()
        upstream.stop()


def test_background_runs_wait_for_spare_cpu(tmp_path):
    """A mirror with a CPU ceiling no serving process is below: past the
    first window (which reads as idle), drawn calls are skipped for CPU
    and not run; every draw is run or counted skipped; /metrics counts the
    same."""
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy", "{ model = 'digits-heavy-twin', share = 1.0, cpu_ceiling = 1e-9 }").replace(
        'sticky = { header = "x-user" }\n', "")
    gw = start(tmp_path, body)
    try:
        session = requests.Session()
        n = wait_for(lambda: (i := next(COUNTER)) >= 0 and call(gw, session, i) and rollout(gw)["comparison"][
            "skipped_cpu"] >= 10 and rollout(gw)["comparison"]["live_calls"], "calls skipped for CPU", timeout=DEADLINE)
        c = wait_for(lambda: (c := rollout(gw)["comparison"])["candidate_calls"] + c["skipped_busy"]
                     + c["skipped_cpu"] >= n and c, "every draw run or skipped", timeout=60)
        assert c["live_calls"] == n and c["candidate_calls"] + c["skipped_busy"] + c["skipped_cpu"] == n, c
        assert pool_stats(gw, "digits-heavy-twin")["requests"] == c["candidate_calls"]
        metrics = requests.get(f"{gw.admin}/metrics", timeout=10).text
        skipped = re.search(r'^switchyard_rollout_skipped_cpu_total\{[^}]*\} (\S+)', metrics, re.M)
        assert skipped and float(skipped.group(1)) == c["skipped_cpu"], metrics
    finally:
        gw.stop()


def test_sticky_needs_a_weighted_split_or_a_serving_candidate(tmp_path):
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    body = models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", "")) + route(
        "digits-heavy", "{ model = 'digits-heavy-twin', steps = [0.5, 1.0] }")
    config = tmp_path / "switchyard.toml"
    config.write_text(body.replace("{models}", str(REPO / "models")))
    out = subprocess.run([binary, "check-config", str(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "routes[0].sticky" in out.stdout + out.stderr, out.stdout + out.stderr
    config.write_text(config.read_text().replace("steps = [0.5, 1.0]", "steps = [0.5, 1.0], serve = true"))
    out = subprocess.run([binary, "check-config", str(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
