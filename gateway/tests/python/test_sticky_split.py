"""Sticky weighted splits (`routes[].sticky`, issue 43): a weighted
route's draw comes from a hash of a request header (or the caller's
tenant), so one client sees one model while the weights stay the same;
clients spread over the models by the weights; a call without the header
draws afresh, as without `sticky`."""

import os
import subprocess

import numpy as np
import pytest
import requests

from conftest import REPO, Gateway
from routing_util import DIGITS_MODELS, infer_body, write_config

CONFIG = DIGITS_MODELS + """
[[routes]]
name = "split"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "weighted", weights = [{ model = "digits-cheap", weight = 1 }, { model = "digits-heavy", weight = 1 }] }
sticky = { header = "x-user-id" }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("sticky"), CONFIG))
    yield gw
    gw.stop()


def model(session, gw, user, i):
    rows = np.random.default_rng(i).uniform(0, 16, size=(1, 64))
    headers = {"x-user-id": user} if user is not None else {}
    r = session.post(f"{gw.base}/v2/models/split/infer", json=infer_body(rows), headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.headers["x-switchyard-model"]


def test_each_client_sees_one_model_and_clients_spread(gw):
    session = requests.Session()
    seen = {}
    for user in [f"user-{n}" for n in range(24)]:
        seen[user] = {model(session, gw, user, i) for i in range(5)}
    assert all(len(models) == 1 for models in seen.values()), seen
    chosen = [next(iter(m)) for m in seen.values()]
    assert set(chosen) == {"digits-cheap", "digits-heavy"}, "24 clients over a 50/50 split use both models"


def test_a_call_without_the_header_draws_afresh(gw):
    session = requests.Session()
    assert {model(session, gw, None, i) for i in range(40)} == {"digits-cheap", "digits-heavy"}


def test_sticky_needs_a_weighted_route(tmp_path):
    config = write_config(tmp_path, DIGITS_MODELS + """
[[routes]]
name = "heavy"
models = ["digits-heavy"]
sticky = { header = "x-user-id" }
""")
    binary = os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))
    out = subprocess.run([binary, "check-config", str(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "routes[0].sticky: needs a weighted policy" in out.stdout + out.stderr, (
        out.stdout + out.stderr)
