"""A whole candidate table posted to the admin API (`POST
/admin/rollouts/{route}`, issue 43 item 1) on the real gateway: checked as
the file's would be, every problem named by its field path with a 400 and
nothing changed; a valid one goes in force through the same reload path as
every rollout move, and its plan runs to promotion; it outlasts a reload of
the file; `DELETE` withdraws it.

No timing asserts: every wait polls for a state with a generous deadline."""

import requests

from sse_util import admin
from test_rollout import Caller, models, rollout, start

TOML = {"content-type": "application/toml"}
JSON = {"content-type": "application/json"}


def body():
    return models(("digits-heavy", "digits-heavy", ""), ("digits-heavy-twin", "digits-heavy", ""),
                  ("digits-cheap", "digits-cheap", ""),
                  ("minilm-l3", "minilm-l3", 'tokenizer = { path = "{models}/minilm-tokenizer.json", max_length = 128 }')) + (
        '\n[[routes]]\nname = "digits"\nmodels = ["digits-heavy"]\nbudget_ms = { default = 5000, max = 10000 }\n')


def paths(response):
    return [i["path"] for i in response.json()["issues"]]


def test_a_bad_posted_candidate_is_refused_with_field_paths_and_nothing_changes(tmp_path):
    gw = start(tmp_path, body())
    try:
        url = f"{gw.admin}/admin/rollouts/digits"
        r = requests.post(url, json={"model": "nope", "steps": [0.5, 0.25]}, timeout=30)
        assert r.status_code == 400, r.text
        assert paths(r) == ["routes[0].candidate.model", "routes[0].candidate.steps",
                            "routes[0].candidate.steps[1]"], r.text
        r = requests.post(url, json={"model": "digits-cheap", "share": "lots"}, timeout=30)
        assert r.status_code == 400 and paths(r) == ["routes[0].candidate.share"], r.text
        r = requests.post(url, json={"model": "digits-cheap", "share": 0.1, "colour": "red"}, timeout=30)
        assert r.status_code == 400 and "colour" in r.text, r.text
        r = requests.post(url, data="model = 'digits-cheap'\nshare = 2\n", headers=TOML, timeout=30)
        assert r.status_code == 400 and paths(r) == ["routes[0].candidate.share"], r.text
        for junk in [b"", b"\xff\xfe", b"{not json"]:
            r = requests.post(url, data=junk, headers=JSON, timeout=30)
            assert r.status_code == 400, (junk, r.text)
        assert requests.post(f"{gw.admin}/admin/rollouts/nope", json={"model": "digits-cheap", "share": 0.1},
                             timeout=30).status_code == 404
        assert requests.delete(url, timeout=30).status_code == 404, "nothing posted to withdraw"
        # Another signature: caught by the reload's checks, 400, nothing in force.
        r = requests.post(url, json={"model": "minilm-l3", "share": 0.1}, timeout=60)
        assert r.status_code == 400 and "routes[0].candidate.model" in paths(r), r.text
        assert r.json()["trigger"] == "rollout"
        assert rollout(gw) is None
        assert Caller(gw).call().headers["x-switchyard-model"] == "digits-heavy"
    finally:
        gw.stop()


def test_a_posted_candidate_goes_through_its_plan_outlasts_a_reload_and_is_withdrawn(tmp_path):
    gw = start(tmp_path, body())
    try:
        url = f"{gw.admin}/admin/rollouts/digits"
        r = requests.post(url, json={"model": "digits-heavy-twin", "steps": [0.5, 1.0], "min_rows": 100,
                                     "gate": {"min_agreement": 0.99, "max_p99_ratio": 1e6}, "cpu_ceiling": 1.0},
                          timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["reload"]["trigger"] == "rollout" and r.json()["reload"]["status"] == "applied"
        posted = r.json()["rollout"]
        assert posted["source"] == "admin" and posted["state"] == "mirroring", posted
        assert posted["in_force"]["candidate"] == {"model": "digits-heavy-twin", "share": 0.5, "step": 0}
        # A reload of the unchanged file keeps the posted candidate.
        assert requests.post(f"{gw.admin}/admin/reload", timeout=60).status_code == 200
        assert rollout(gw)["in_force"]["candidate"]["model"] == "digits-heavy-twin"
        caller = Caller(gw)
        done = caller.until(lambda r: r["state"] != "mirroring" and not r["pending"], "the twin's promotion")
        assert done["state"] == "promoted" and done["comparison"]["agreement"] == 1.0, done
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy-twin"
        # Posting again starts a fresh rollout (TOML this time).
        r = requests.post(url, data="model = 'digits-cheap'\nshare = 1.0\n", headers=TOML, timeout=60)
        assert r.status_code == 200, r.text
        again = r.json()["rollout"]
        assert again["candidate"] == "digits-cheap" and again["state"] == "mirroring" and again["plan"] is False
        assert again["in_force"]["models"] == ["digits-heavy"], "the file's route, the new candidate mirrored"
        # Withdrawn: the file's route, no candidate.
        r = requests.delete(url, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["rollout"] is None or r.json()["rollout"] == {}
        assert "digits" not in admin(gw, "/admin/rollouts")
        assert caller.call().headers["x-switchyard-model"] == "digits-heavy"
    finally:
        gw.stop()
