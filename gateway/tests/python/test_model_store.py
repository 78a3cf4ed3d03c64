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
            [sys.executable, str(REPO / "runtime/store/tests/store_support/moto_setup.py"), self.endpoint, BUCKET],
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


MINILM = REPO / "models/minilm-l6.onnx"
needs_minilm = pytest.mark.skipif(not MINILM.is_file(), reason="models/minilm-l6.onnx missing (scripts/setup.sh text)")


def token_inputs(rows=3, length=12):
    """INT64 token tensors as a Triton client of the bare graph sends them."""
    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 20000, size=(rows, length), dtype=np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def triton_inputs(tensors):
    inputs = []
    for name, array in tensors.items():
        inp = httpclient.InferInput(name, list(array.shape), "INT64")
        inp.set_data_from_numpy(array, binary_data=True)
        inputs.append(inp)
    return inputs


@needs_minilm
def test_minilm_from_a_triton_repository_keeps_its_batching_and_instance_groups(store, tmp_path):
    """MiniLM-L6's config.pbtxt (max_batch_size 32, dynamic_batching with a
    1 ms delay and a 256-request queue, instance_group KIND_CPU count 2)
    shows in the model's Triton config as applied, and the bare graph
    answers tritonclient with onnxruntime's embeddings."""
    import onnxruntime as ort

    store.upload_repo(tmp_path / "repo", "digits-cheap,minilm-l6", 1)
    gw = Gateway(write_config(tmp_path, store.endpoint), env=store.env())
    try:
        client = httpclient.InferenceServerClient(url=gw.url)
        config = client.get_model_config("minilm-l6")
        assert config["max_batch_size"] == 32, config
        batching = config["dynamic_batching"]
        assert batching["max_queue_delay_microseconds"] == 1000, batching
        assert batching["default_queue_policy"]["max_queue_size"] == 256, batching
        assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)], config
        assert [i["name"] for i in config["input"]] == ["input_ids", "attention_mask", "token_type_ids"]
        cheap = client.get_model_config("digits-cheap")
        assert cheap["dynamic_batching"]["max_queue_delay_microseconds"] == 200, cheap
        assert [(g["kind"], g["count"]) for g in cheap["instance_group"]] == [("KIND_CPU", 1)], cheap

        tensors = token_inputs()
        out = client.infer("minilm-l6", triton_inputs(tensors)).as_numpy("embedding")
        session = ort.InferenceSession(str(MINILM), providers=["CPUExecutionProvider"])
        expected = session.run(["embedding"], tensors)[0]
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    finally:
        gw.stop()


@needs_minilm
def test_two_gateways_sharing_a_cache_pull_the_same_model_at_once(store, tmp_path):
    """Two replicas on one cache folder (a shared volume) start at the same
    moment and pull MiniLM-L6 (90 MB, in ranged parts) together: both come
    up and serve the same embeddings, and the cache holds one complete copy
    with no download folder left behind."""
    import concurrent.futures

    store.upload_repo(tmp_path / "repo", "minilm-l6", 1)
    config = write_config(tmp_path, store.endpoint)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        starts = [pool.submit(Gateway, config, env=store.env()) for _ in range(2)]
        gateways, errors = [], []
        for start in starts:
            try:
                gateways.append(start.result())
            except RuntimeError as e:
                errors.append(str(e))
    try:
        assert not errors, errors
        tensors = token_inputs(rows=2)
        answers = []
        for gw in gateways:
            client = httpclient.InferenceServerClient(url=gw.url)
            answers.append(client.infer("minilm-l6", triton_inputs(tensors)).as_numpy("embedding"))
        np.testing.assert_array_equal(answers[0], answers[1])
        copies = sorted(p for p in (tmp_path / "cache").rglob("model.onnx"))
        assert len(copies) == 1 and copies[0].stat().st_size == MINILM.stat().st_size, copies
        assert not any((tmp_path / "cache" / "tmp").iterdir()), list((tmp_path / "cache" / "tmp").iterdir())
        stats = [requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]["repository"] for gw in gateways]
        assert all(s["from_cache"] is False for s in stats), stats
    finally:
        for gw in gateways:
            gw.stop()


@needs_minilm
def test_with_warmup_off_a_model_is_pulled_by_its_first_request(store, tmp_path):
    """`warmup = false`: start-up lists the store and registers the models
    from their config.pbtxt without downloading a byte; the first requests
    for MiniLM-L6 (eight at once) share one download and all answer; the
    model nobody asked for is never pulled; once the store is down, the
    uncached model answers 503 (every time: it is tried again, not marked
    failed) while the pulled one keeps serving."""
    import concurrent.futures

    store.upload_repo(tmp_path / "repo", "digits-cheap,minilm-l6", 1)
    config = write_config(tmp_path, store.endpoint)
    config.write_text(config.read_text() + "warmup = false\n")
    gw = Gateway(config, env=store.env())

    def repository():
        return requests.get(f"{gw.admin}/admin/config", timeout=5).json()["config"]["repository"]

    try:
        assert not list((tmp_path / "cache").rglob("model.onnx"))
        assert repository()["stats"]["versions_downloaded"] == 0
        client = httpclient.InferenceServerClient(url=gw.url)
        assert client.is_model_ready("minilm-l6")
        meta = client.get_model_metadata("minilm-l6")
        assert [(i["name"], i["datatype"], i["shape"]) for i in meta["inputs"]][0] == ("input_ids", "INT64", [-1, -1])

        tensors = token_inputs(rows=2)

        def first(_):
            c = httpclient.InferenceServerClient(url=gw.url)
            return c.infer("minilm-l6", triton_inputs(tensors)).as_numpy("embedding")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(first, range(8)))
        for answer in answers[1:]:
            np.testing.assert_array_equal(answer, answers[0])
        pulled = list((tmp_path / "cache").rglob("model.onnx"))
        assert [p.parent.parent.name for p in pulled] == ["minilm-l6"], pulled
        stats = repository()["stats"]
        assert stats["versions_downloaded"] == 1, stats

        store.stop()
        for _ in range(2):
            down = infer(gw.base, "digits-cheap", digits())
            assert down.status_code == 503, down.text
            assert "model store" in down.json()["error"], down.text
        assert client.infer("minilm-l6", triton_inputs(tensors)).as_numpy("embedding").shape == (2, 384)
    finally:
        gw.stop()
