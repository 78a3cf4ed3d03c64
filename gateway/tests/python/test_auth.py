"""Access control against the real binary: the admin API's bearer token,
per-route API keys, tenant-scoped caching (with a real redis-server), and
secrets never shown by /admin/config."""

import os
import subprocess

import numpy as np
import pytest
import requests

from conftest import REPO, Gateway
from routing_util import infer_body, write_config

ADMIN_TOKEN = "admin-token-for-tests-0123"
KEY_A = "team-a-key-0123456789"
KEY_B = "team-b-key-0123456789"

CONFIG = """
[admin]
token = "{token}"

[cache]
l1_max_bytes = "16MiB"
{redis}

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"

[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"

[[routes]]
name = "private"
models = ["digits-cheap"]
auth = { keys = [{ key = "%s", tenant = "team-a" }, { key_env = "SY_TEST_KEY_B", tenant = "team-b" }] }

[[routes]]
name = "public"
models = ["digits-heavy"]
""" % KEY_A


def start(tmp_path, token=ADMIN_TOKEN, redis="", env=None):
    text = CONFIG.replace("{token}", token).replace("{redis}", redis)
    path = write_config(tmp_path, text)
    return Gateway(config=path, env={"SY_TEST_KEY_B": KEY_B, **(env or {})})


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = start(tmp_path_factory.mktemp("auth"))
    yield g
    g.stop()


def row(seed):
    return np.random.default_rng(seed).uniform(0, 16, size=(1, 64)).astype(np.float32)


def infer(gw, route, headers=None, seed=0):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=infer_body(row(seed)),
                         headers=headers or {}, timeout=30)


def test_admin_without_or_with_a_wrong_token_is_401(gw):
    for headers in [{}, {"authorization": "Bearer wrong-token-0000000000"}, {"authorization": ADMIN_TOKEN},
                    {"authorization": f"Basic {ADMIN_TOKEN}"}]:
        for method, path in [("GET", "/admin/stats"), ("GET", "/admin/config"), ("POST", "/admin/reload"),
                             ("GET", "/admin/models"), ("POST", "/admin/models/digits-cheap/unload")]:
            r = requests.request(method, f"{gw.admin}{path}", headers=headers, timeout=10)
            assert r.status_code == 401, (headers, path, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert "error" in r.json()
    assert requests.get(f"{gw.admin}/healthz", timeout=10).status_code == 200, "health stays open"
    ok = requests.get(f"{gw.admin}/admin/stats", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and "models" in ok.json()


def test_admin_models_and_config_without_secrets(gw):
    auth = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    text = requests.get(f"{gw.admin}/admin/config", headers=auth, timeout=10).text
    for secret in [ADMIN_TOKEN, KEY_A, KEY_B]:
        assert secret not in text
    doc = requests.get(f"{gw.admin}/admin/config", headers=auth, timeout=10).json()
    keys = doc["config"]["routes"][0]["auth"]["keys"]
    assert keys == [{"tenant": "team-a", "key": "[redacted]"}, {"tenant": "team-b", "key_env": "SY_TEST_KEY_B"}]
    assert doc["config"]["admin"] == {"token": "[redacted]", "token_source": "config"}
    r = requests.post(f"{gw.admin}/admin/models/digits-heavy/load", headers=auth, timeout=60)
    assert r.status_code == 200 and r.json()["state"] == "ready", r.text
    models = requests.get(f"{gw.admin}/admin/models", headers=auth, timeout=10).json()["models"]
    heavy = next(m for m in models if m["name"] == "digits-heavy")
    assert heavy["state"] == "ready" and heavy["routes"] == ["public"]
    r = requests.post(f"{gw.admin}/admin/models/digits-heavy/unload", headers=auth, timeout=10)
    assert r.status_code == 200
    models = requests.get(f"{gw.admin}/admin/models", headers=auth, timeout=10).json()["models"]
    assert next(m for m in models if m["name"] == "digits-heavy")["state"] == "unloaded"
    assert requests.post(f"{gw.admin}/admin/models/nope/load", headers=auth, timeout=10).status_code == 404
    assert requests.get(f"{gw.admin}/admin/models/digits-heavy/load", headers=auth, timeout=10).status_code == 405


def test_route_without_a_valid_key_is_401(gw):
    for headers in [{}, {"x-api-key": "not-a-key-0123456789"}, {"authorization": "Bearer not-a-key-0123456789"}]:
        r = infer(gw, "private", headers)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
        for suffix in ["", "/ready", "/config"]:
            assert requests.get(f"{gw.base}/v2/models/private{suffix}", headers=headers,
                                timeout=10).status_code == 401, suffix
    assert infer(gw, "private", {"x-api-key": KEY_A}).status_code == 200
    assert infer(gw, "private", {"authorization": f"Bearer {KEY_B}"}).status_code == 200
    assert requests.get(f"{gw.base}/v2/models/private", headers={"x-api-key": KEY_A}, timeout=10).status_code == 200
    assert infer(gw, "public").status_code == 200, "open routes need no key"
    assert requests.get(f"{gw.base}/v2/health/ready", timeout=10).status_code == 200


def test_models_of_protected_routes_are_protected_when_addressed_directly(gw):
    assert infer(gw, "digits-cheap").status_code == 401
    assert infer(gw, "digits-cheap", {"x-api-key": KEY_B}).status_code == 200
    assert infer(gw, "digits-heavy").status_code == 200, "used only by an open route"


def test_two_tenants_never_share_cache_entries(tmp_path, redis_server):
    redis = f'redis = {{ url = "{redis_server.url}", timeout_ms = 500, write_timeout_ms = 1000 }}'
    gw = start(tmp_path, redis=redis)
    try:
        a, b = {"x-api-key": KEY_A}, {"x-api-key": KEY_B}
        for seed in [11, 12, 13]:
            first_a = infer(gw, "private", a, seed)
            assert first_a.headers["x-cache"] == "miss"
            assert infer(gw, "private", a, seed).headers["x-cache"] == "hit-l1"
            first_b = infer(gw, "private", b, seed)
            assert first_b.headers["x-cache"] == "miss", "team-b must not get team-a's entry (L1 or L2)"
            assert infer(gw, "private", b, seed).headers["x-cache"] == "hit-l1"
            assert first_a.json()["outputs"] == first_b.json()["outputs"], "same model, same answer"
    finally:
        gw.stop()
    # Each tenant's answers are separate Redis entries too.
    assert redis_server.dbsize() == 6


def test_admin_token_from_the_environment_wins(tmp_path):
    env_token = "env-admin-token-0123456789"
    gw = start(tmp_path, env={"SWITCHYARD_ADMIN_TOKEN": env_token})
    try:
        stats = f"{gw.admin}/admin/stats"
        assert requests.get(stats, headers={"authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).status_code == 401
        assert requests.get(stats, headers={"authorization": f"Bearer {env_token}"}, timeout=10).status_code == 200
    finally:
        gw.stop()


def test_admin_off_loopback_without_a_token_refuses_to_start(tmp_path):
    path = write_config(tmp_path, '[[models]]\nname = "m"\npath = "{models}/digits-cheap.onnx"\n')
    # 192.0.2.1 (TEST-NET-1) is on no interface: nothing could listen there even if the check failed.
    out = subprocess.run(
        [os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard")), "serve", "--config", str(path),
         "--listen", "127.0.0.1:0", "--admin-listen", "192.0.2.1:9000"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode != 0
    assert "not a loopback address" in out.stderr and "SWITCHYARD_ADMIN_TOKEN" in out.stderr, out.stderr
