"""Hot reload against the real binary: settings change under load with zero
failed requests, invalid files are rejected with field paths while the old
config keeps answering, and a model replaced on disk is served at its new
version after a reload, never mixed with the old one inside a response."""

import json
import shutil
import signal
import threading
import time

import numpy as np
import pytest
import requests

from conftest import MODELS, Gateway
from routing_util import Reference, infer_body

CONFIG = """
[repository]
path = "{models}"

[reload]
interval_ms = 100

[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{cheap_path}"
version = {cheap_version}
batching = {{ max_batch_size = 32, max_queue_delay_us = 200 }}

[[models]]
name = "digits-heavy"
path = "digits-heavy.onnx"
batching = {{ max_batch_size = 32, max_queue_delay_us = 200 }}

[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
budget_ms = {{ default = 5000, max = 10000 }}
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = {threshold} }}
cache = {{ ttl_s = {ttl} }}

[[routes]]
name = "cheap"
models = ["digits-cheap"]
budget_ms = {{ default = 5000, max = 10000 }}
cache = {{ enabled = false }}
"""


def render(models=MODELS, cheap_path="digits-cheap.onnx", cheap_version=1, threshold=0.0, ttl=300):
    return CONFIG.format(models=models, cheap_path=cheap_path, cheap_version=cheap_version,
                         threshold=threshold, ttl=ttl)


@pytest.fixture(scope="module")
def digits():
    data = json.loads((MODELS / "digits-test.json").read_text())
    return np.asarray(data["X"], np.float32)


class Load:
    """A thread pool of clients sending distinct rows of `x` to `route`
    until stopped; keeps every response's status, headers and body, and
    (in `sent`, same order) when each request was sent."""

    def __init__(self, gw, route, x, clients=6, headers=None):
        self.gw, self.route, self.x, self.headers = gw, route, x, headers or {}
        self.results, self.sent, self.lock, self.stop_flag = [], [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(i,)) for i in range(clients)]
        for t in self.threads:
            t.start()

    def _client(self, k):
        session = requests.Session()
        i = k
        for _ in range(20000):  # bounded; stopped long before
            if self.stop_flag.is_set():
                return
            row = self.x[i % len(self.x)] + np.float32(i // len(self.x))  # distinct inputs
            sent = time.monotonic()
            try:
                r = session.post(f"{self.gw.base}/v2/models/{self.route}/infer", json=infer_body(row[None, :]),
                                 headers=self.headers, timeout=30)
                item = (row, r.status_code, dict(r.headers), r.json() if r.status_code == 200 else r.text)
            except requests.RequestException as e:
                item = (row, None, {}, repr(e))
            with self.lock:
                self.results.append(item)
                self.sent.append(sent)
            i += 6

    def count(self):
        with self.lock:
            return len(self.results)

    def wait_for(self, n, timeout=60):
        deadline = time.monotonic() + timeout
        target = self.count() + n
        while self.count() < target:
            assert time.monotonic() < deadline, "the load stalled"
            time.sleep(0.01)

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)
        return self.results


def admin_reload(gw):
    return requests.post(f"{gw.admin}/admin/reload", timeout=60)


def admin_config(gw):
    return requests.get(f"{gw.admin}/admin/config", timeout=10).json()


def wait_generation(gw, generation, timeout=30):
    deadline = time.monotonic() + timeout
    while admin_config(gw)["generation"] < generation:
        assert time.monotonic() < deadline, f"generation {generation} never came: {admin_config(gw)['last_reload']}"
        time.sleep(0.05)


def one(gw, route, row, headers=None):
    return requests.post(f"{gw.base}/v2/models/{route}/infer", json=infer_body(row[None, :]),
                         headers=headers or {}, timeout=30)


def test_threshold_and_ttl_change_under_load_with_zero_failures(tmp_path, digits):
    path = tmp_path / "switchyard.toml"
    path.write_text(render(threshold=0.0, ttl=300))
    gw = Gateway(config=path)
    try:
        probe = digits[0] + 1000.0  # not sent by the load
        assert one(gw, "digits", probe).headers["x-cache"] == "miss"
        load = Load(gw, "digits", digits)
        load.wait_for(50)
        # 1. File change (watcher): threshold 1.0 escalates everything, TTL 1 s.
        path.write_text(render(threshold=1.0, ttl=1))
        wait_generation(gw, 2)
        load.wait_for(50)
        # 2. SIGHUP: back to threshold 0.0.
        path.write_text(render(threshold=0.0, ttl=1).replace("[reload]\ninterval_ms = 100", "[reload]\nwatch = false"))
        time.sleep(0.3)  # the watcher may or may not see it first; either way generation 3 arrives
        gw.proc.send_signal(signal.SIGHUP)
        wait_generation(gw, 3)
        load.wait_for(50)
        # 3. Admin API: threshold 1.0 again.
        path.write_text(render(threshold=1.0, ttl=1).replace("[reload]\ninterval_ms = 100", "[reload]\nwatch = false"))
        r = admin_reload(gw)
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["status"] == "applied" and doc["generation"] >= 4
        assert sorted(doc["models"]["reused"]) == ["digits-cheap", "digits-heavy"], doc
        load.wait_for(50)
        results = load.stop()
        # Threshold 1.0 now: rows the cheap model is not certain of escalate.
        _, probs = Reference("digits-cheap").run("digits-cheap", digits[:20])
        unsure = [i for i in range(20) if probs[i].max() < 0.999]
        final = [one(gw, "digits", digits[i]).headers["x-switchyard-model"] for i in unsure]
    finally:
        gw.stop()
    failed = [(status, body) for _, status, _, body in results if status != 200]
    assert not failed, f"{len(failed)} of {len(results)} requests failed: {failed[:3]}"
    models = [headers["x-switchyard-model"] for _, _, headers, _ in results]
    # Threshold 0.0 -> the cheap model answers; 1.0 -> the heavy one. Both phases were seen.
    assert "digits-cheap" in models and "digits-heavy" in models
    assert unsure and final == ["digits-heavy"] * len(unsure), final


def test_ttl_change_takes_effect(tmp_path, digits):
    path = tmp_path / "switchyard.toml"
    path.write_text(render(threshold=0.0, ttl=300))
    gw = Gateway(config=path)
    try:
        row = digits[1]
        assert one(gw, "digits", row).headers["x-cache"] == "miss"
        time.sleep(1.3)
        assert one(gw, "digits", row).headers["x-cache"] == "hit-l1", "TTL 300 s keeps the entry"
        path.write_text(render(threshold=0.0, ttl=1))
        assert admin_reload(gw).status_code == 200
        assert admin_config(gw)["config"]["routes"][0]["cache"]["ttl_s"] == 1
        row = digits[2]
        assert one(gw, "digits", row).headers["x-cache"] == "miss"
        assert one(gw, "digits", row).headers["x-cache"] == "hit-l1"
        time.sleep(1.3)
        assert one(gw, "digits", row).headers["x-cache"] == "miss", "TTL 1 s expired the entry"
    finally:
        gw.stop()


def test_invalid_file_is_rejected_and_the_old_config_keeps_answering(tmp_path, digits):
    path = tmp_path / "switchyard.toml"
    good = render(threshold=0.0)
    path.write_text(good)
    gw = Gateway(config=path)
    try:
        bad = good.replace("threshold = 0.0", "threshold = 7.5").replace(
            'path = "digits-heavy.onnx"', 'path = "digits-heavy.onnx"\npools = [{ device = "tpu" }]')
        path.write_text(bad)
        r = admin_reload(gw)
        assert r.status_code == 400, r.text
        doc = r.json()
        paths = {i["path"] for i in doc["issues"]}
        assert "models[1].pools[0].device" in paths, doc
        assert any(p.startswith("routes[0].policy") for p in paths), doc
        assert doc["generation"] == 1 and "keeps serving" in doc["error"]
        # The watcher saw the same file: rejected too, and nothing changed.
        time.sleep(0.5)
        assert admin_config(gw)["generation"] == 1
        assert admin_config(gw)["last_reload"]["status"] == "rejected"
        r = one(gw, "digits", digits[3])
        assert r.status_code == 200 and r.headers["x-switchyard-model"] == "digits-cheap", "threshold 0.0 still"
        # A file whose model cannot be loaded is rejected with the model's path.
        path.write_text(good.replace('path = "digits-heavy.onnx"', 'path = "missing.onnx"'))
        r = admin_reload(gw)
        assert r.status_code == 400 and r.json()["issues"][0]["path"] == "models[1]", r.text
        path.write_text(good)
        assert admin_reload(gw).status_code == 200
    finally:
        gw.stop()


def test_an_empty_or_half_written_file_never_replaces_the_config(tmp_path, digits):
    """What the watcher sees while a writer truncates the file and writes it
    again: an empty file is refused (it would leave nothing to serve), and
    the gateway answers throughout; the full file then applies."""
    path = tmp_path / "switchyard.toml"
    good = render(threshold=0.0)
    path.write_text(good)
    gw = Gateway(config=path)
    try:
        path.write_text("\n  \n")
        r = admin_reload(gw)
        assert r.status_code == 400 and "empty" in r.json()["issues"][0]["message"], r.text
        time.sleep(0.5)  # the watcher polls every 100 ms: it refuses it too
        assert admin_config(gw)["generation"] == 1
        assert one(gw, "digits", digits[3]).status_code == 200
        # Many truncate-then-write cycles under load: not one request misses its route.
        load = Load(gw, "digits", digits)
        for i in range(40):
            path.write_text(render(threshold=0.0, ttl=300 + i))
            time.sleep(0.03)
        load.wait_for(50)
        results = load.stop()
        failed = [(status, body) for _, status, _, body in results if status != 200]
        assert not failed, f"{len(failed)} of {len(results)} requests failed: {failed[:3]}"
        wait_generation(gw, 2)
    finally:
        gw.stop()


def test_model_replaced_on_disk_is_served_at_its_new_version_never_mixed(tmp_path, digits):
    shutil.copy(MODELS / "digits-cheap.onnx", tmp_path / "served.onnx")
    path = tmp_path / "switchyard.toml"
    text = render(cheap_path=str(tmp_path / "served.onnx"), cheap_version=1)
    path.write_text(text.replace("interval_ms = 100", "watch = false"))
    ref = Reference("digits-cheap", "digits-heavy")
    gw = Gateway(config=path)
    try:
        cached = digits[5]
        before = one(gw, "cheap", cached)
        assert before.json()["parameters"]["switchyard_model_version"] == 1
        load = Load(gw, "cheap", digits)
        load.wait_for(40)
        # Deploy: write the new file beside, rename over (atomic), bump the version, reload.
        shutil.copy(MODELS / "digits-heavy.onnx", tmp_path / "next.onnx")
        (tmp_path / "next.onnx").rename(tmp_path / "served.onnx")
        path.write_text(path.read_text().replace("version = 1", "version = 2", 1))
        r = admin_reload(gw)
        swapped = time.monotonic()
        assert r.status_code == 200, r.text
        changed = {c["name"]: c["why"] for c in r.json()["models"]["changed"]}
        assert changed == {"digits-cheap": "SpecChanged"}, r.json()
        assert [m["name"] for m in r.json()["models"]["loaded"]] == ["digits-cheap"], "loaded before the swap"
        load.wait_for(40)
        results = load.stop()
        after = one(gw, "cheap", cached)
    finally:
        gw.stop()
    assert after.json()["parameters"]["switchyard_model_version"] == 2
    versions = []
    for row, status, _, body in results:
        assert status == 200, body
        version = body["parameters"]["switchyard_model_version"]
        expected_model = {1: "digits-cheap", 2: "digits-heavy"}[version]
        _, probs = ref.run(expected_model, row[None, :])
        got = np.asarray(next(o for o in body["outputs"] if o["name"] == "probabilities")["data"], np.float32)
        np.testing.assert_allclose(got, probs.ravel(), rtol=1e-4, atol=1e-5,
                                   err_msg=f"version {version} answered with another model's outputs")
        versions.append(version)
    assert versions[0] == 1 and versions[-1] == 2
    # Every request sent after the reload answered gets the new version
    # (completion order says nothing: a client thread may be descheduled
    # between its answer and its record).
    after_swap = [v for v, sent in zip(versions, load.sent) if sent > swapped]
    assert after_swap and all(v == 2 for v in after_swap), "a request sent after the swap got v1"


def test_a_replaced_file_gets_new_cache_keys(tmp_path, digits):
    shutil.copy(MODELS / "digits-cheap.onnx", tmp_path / "served.onnx")
    path = tmp_path / "switchyard.toml"
    path.write_text(render(cheap_path=str(tmp_path / "served.onnx"), threshold=0.0).replace(
        "interval_ms = 100", "watch = false"))
    ref = Reference("digits-cheap", "digits-heavy")
    gw = Gateway(config=path)
    try:
        row = digits[7]
        assert one(gw, "digits", row).headers["x-cache"] == "miss"
        assert one(gw, "digits", row).headers["x-cache"] == "hit-l1"
        # Same config, same version: only the file changes (renamed over).
        shutil.copy(MODELS / "digits-heavy.onnx", tmp_path / "next.onnx")
        (tmp_path / "next.onnx").rename(tmp_path / "served.onnx")
        r = admin_reload(gw)
        assert r.status_code == 200, r.text
        assert {c["name"]: c["why"] for c in r.json()["models"]["changed"]} == {"digits-cheap": "FileChanged"}
        after = one(gw, "digits", row)
        assert after.headers["x-cache"] == "miss", "the old file's answer must not be served for the new file"
        got = next(o for o in after.json()["outputs"] if o["name"] == "probabilities")["data"]
        _, heavy = ref.run("digits-heavy", row[None, :])
        np.testing.assert_allclose(got, heavy.ravel(), rtol=1e-4, atol=1e-5)
    finally:
        gw.stop()


def test_reload_without_a_config_file_says_so():
    gw = Gateway()
    try:
        r = admin_reload(gw)
        assert r.status_code == 409
        assert "--config" in r.json()["error"]
        gw.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        assert gw.alive(), "SIGHUP must not end the process"
        assert requests.get(f"{gw.base}/v2/health/ready", timeout=5).status_code == 200
    finally:
        gw.stop()
