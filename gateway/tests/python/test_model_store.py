"""The model store through the real binary: a Triton-layout repository in a
real S3-compatible server (moto, started on a free loopback port and
stopped by PID) served by `[repository] uri = "s3://..."`, checked with
unmodified tritonclient; the store going down (cached model serves,
uncached model 503); a new version hot-swapped by `POST /admin/reload`;
credentials never shown."""

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import requests

from conftest import REPO, Gateway

moto = pytest.importorskip("moto", reason="moto[server] is not installed (scripts/setup.sh test)")
boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (scripts/setup.sh test)")
httpclient = pytest.importorskip("tritonclient.http")

BUCKET = "models"


class Moto:
    """A moto S3 server with authentication on and one key."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        self.endpoint = None
        while self.endpoint is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("moto exited")
            found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", line)
            if found:
                self.endpoint = found.group(1)
        setup = subprocess.run(
            [sys.executable, str(REPO / "runtime/tests/store_support/moto_setup.py"), self.endpoint, BUCKET],
            capture_output=True,
            text=True,
            check=True,
        )
        keys = json.loads(setup.stdout)
        self.key_id, self.secret = keys["key_id"], keys["secret"]
        self.s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )

    def env(self):
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret}

    def upload_repo(self, out, models, version, prefix="repo"):
        subprocess.run(
            [sys.executable, str(REPO / "models/triton_repo.py"), "--out", str(out), "--models", models,
             "--version", str(version)],
            check=True,
            capture_output=True,
        )
        for path in sorted(out.rglob("*")):
            if path.is_file():
                self.s3.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(out).as_posix()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def store():
    server = Moto()
    yield server
    server.stop()


def write_config(tmp_path, endpoint):
    config = tmp_path / "store.toml"
    config.write_text(
        f'[repository]\nuri = "s3://{BUCKET}/repo"\nendpoint = "{endpoint}"\n'
        f'cache_dir = "{tmp_path / "cache"}"\n'
    )
    return config


def digits(rows=2):
    data = np.load(REPO / "models/digits-test.npz")
    return data["X"][:rows].astype(np.float32)


def infer(base, model, x):
    body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}
    return requests.post(f"{base}/v2/models/{model}/infer", json=body, timeout=30)


def test_a_triton_repository_in_s3_is_served_and_checked_with_tritonclient(store, tmp_path):
    store.upload_repo(tmp_path / "repo", "digits-cheap,digits-heavy", 1)
    gw = Gateway(write_config(tmp_path, store.endpoint), env=store.env())
    try:
        client = httpclient.InferenceServerClient(url=gw.url)
        assert client.is_model_ready("digits-cheap") and client.is_model_ready("digits-heavy")
        x = digits(4)
        inp = httpclient.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        out = client.infer("digits-heavy", [inp], outputs=[httpclient.InferRequestedOutput("probabilities")])
        probs = out.as_numpy("probabilities")
        assert probs.shape == (4, 10) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
        # The config.pbtxt settings reached the pools (instance_group count 2).
        admin = requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]
        heavy = next(m for m in admin["models"] if m["name"] == "digits-heavy")
        assert json.dumps(heavy).count('"workers": 2') >= 1, heavy
        repo = admin["repository"]
        assert repo["uri"] == f"s3://{BUCKET}/repo" and repo["from_cache"] is False, repo
        # The secret is in neither the admin view nor the log.
        assert store.secret not in json.dumps(admin)
        assert store.secret not in gw.log_text()
    finally:
        gw.stop()


def test_store_down_cached_model_serves_uncached_model_is_503(store, tmp_path):
    store.upload_repo(tmp_path / "one", "digits-cheap", 1)
    config = write_config(tmp_path, store.endpoint)
    first = Gateway(config, env=store.env())
    try:
        assert infer(first.base, "digits-cheap", digits()).status_code == 200
    finally:
        first.stop()
    store.upload_repo(tmp_path / "two", "digits-heavy", 1)
    store.stop()
    gw = Gateway(config, env=store.env())
    try:
        cached = infer(gw.base, "digits-cheap", digits())
        assert cached.status_code == 200, cached.text
        uncached = infer(gw.base, "digits-heavy", digits())
        assert uncached.status_code == 503, uncached.text
        assert "not cached and the model store s3://models/repo is unreachable" in uncached.json()["error"]
        repo = requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]["repository"]
        assert repo["from_cache"] is True, repo
    finally:
        gw.stop()


def test_a_new_version_is_swapped_in_by_admin_reload(store, tmp_path):
    store.upload_repo(tmp_path / "v1", "digits-cheap", 1)
    gw = Gateway(write_config(tmp_path, store.endpoint), env=store.env())
    try:
        meta = requests.get(f"{gw.base}/v2/models/digits-cheap", timeout=5).json()
        assert meta["versions"] == ["1"], meta
        store.upload_repo(tmp_path / "v2", "digits-cheap", 2)
        reload = requests.post(f"{gw.admin}/admin/reload", timeout=60)
        assert reload.status_code == 200, reload.text
        meta = requests.get(f"{gw.base}/v2/models/digits-cheap", timeout=5).json()
        assert meta["versions"] == ["2"], meta
        assert infer(gw.base, "digits-cheap", digits()).status_code == 200
    finally:
        gw.stop()


def test_wrong_credentials_fail_start_up_with_a_clear_error(store, tmp_path):
    store.upload_repo(tmp_path / "repo", "digits-cheap", 1)
    env = {**store.env(), "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    with pytest.raises(RuntimeError) as failed:
        Gateway(write_config(tmp_path, store.endpoint), env=env)
    text = str(failed.value)
    assert "repository.uri" in text and "SignatureDoesNotMatch" in text, text
    assert "not-the-secret" not in text


def test_a_version_uploaded_under_load_is_polled_and_swapped_with_no_failed_request(store, tmp_path):
    store.upload_repo(tmp_path / "v1", "digits-cheap", 1)
    config = write_config(tmp_path, store.endpoint)
    config.write_text(config.read_text() + "poll_interval_ms = 200\n")
    gw = Gateway(config, env=store.env())
    try:
        x, statuses, versions = digits(), [], set()
        store.upload_repo(tmp_path / "v2", "digits-cheap", 2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = infer(gw.base, "digits-cheap", x)
            statuses.append(answer.status_code)
            versions.add(answer.json().get("model_version"))
            if "2" in versions and len(statuses) > 20:
                break
        assert set(statuses) == {200}, statuses
        assert "2" in versions, (versions, gw.log_text())
        assert requests.get(f"{gw.base}/v2/models/digits-cheap", timeout=5).json()["versions"] == ["2"]
    finally:
        gw.stop()
