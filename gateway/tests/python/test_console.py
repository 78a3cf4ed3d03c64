"""The operator console (`/console/` on the admin listener) and the route
edit endpoint behind its tuning form (`POST /admin/config/edit`), against
the real binary with the real digits models.

The browser test drives headless Chromium (Debian's `chromium` through
`playwright-core`, both installed by `scripts/setup.sh test`) with
gateway/tests/browser/console_browser.mjs while this file sends traffic:
sign-in refused without the token, live numbers that move, charts, the
calibration curve, then a threshold edit previewed (diff and replay of the
recorded traffic) and applied. Screenshots land in the test's tmp folder
(kept by pytest; one is in the book, docs/src/images/console.png)."""

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import MODELS, REPO, Gateway
from routing_util import DIGITS_MODELS, write_config
from sse_util import wait_for

BROWSER_DIR = REPO / "gateway" / "tests" / "browser"
TOKEN = "console-test-admin-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}

CONFIG = "# The console test's config: the console edits this file in place." + DIGITS_MODELS + """
[[routes]]
name = "digits"   # the cascade under test
models = ["digits-cheap", "digits-heavy"]
budget_ms = { default = 2000, max = 5000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
record = { sample = 1.0, path = "{traffic}" }
calibrate = { shadow = 0.5, target = 0.99 }

[[routes]]
name = "heavy"
models = ["digits-heavy"]
"""


def rows():
    data = json.loads((MODELS / "digits-test.json").read_text())
    return np.asarray(data["X"], np.float32)


def body(row, i):
    return {"id": f"row-{i}", "inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row.tolist()}]}


def start(tmp_path, text=CONFIG):
    traffic = tmp_path / "traffic.jsonl"
    config = write_config(tmp_path, text.replace("{traffic}", str(traffic)))
    gw = Gateway(config=config, env={"SWITCHYARD_ADMIN_TOKEN": TOKEN})
    return gw, config


def edit(gw, **fields):
    return requests.post(f"{gw.admin}/admin/config/edit", json=fields, headers=AUTH, timeout=60)


def served_route(gw, name):
    doc = requests.get(f"{gw.admin}/admin/config", headers=AUTH, timeout=10).json()
    return next(r for r in doc["config"]["routes"] if r["name"] == name)


class Load:
    """Sends the test split round and round at about `rate` calls/s until stopped."""

    def __init__(self, gw, x, rate=60.0):
        self.stop_event = threading.Event()
        self.sent = 0
        self.failed = []
        self.thread = threading.Thread(target=self.run, args=(gw, x, 1.0 / rate), daemon=True)
        self.thread.start()

    def run(self, gw, x, pause):
        session = requests.Session()
        i = 0
        while not self.stop_event.wait(pause):
            r = session.post(f"{gw.base}/v2/models/digits/infer", json=body(x[i % len(x)], i), timeout=30)
            if r.status_code != 200:
                self.failed.append(r.status_code)
            self.sent += 1
            i += 1

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=30)


def test_the_console_in_a_browser(tmp_path):
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
    assert (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    chromium = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    assert Path(chromium).exists(), f"{chromium} is missing: run scripts/setup.sh test (apt chromium)"
    gw, config = start(tmp_path)
    x = rows()
    load = None
    try:
        session = requests.Session()
        for i, row in enumerate(x[:150]):
            assert session.post(f"{gw.base}/v2/models/digits/infer", json=body(row, i), timeout=30).status_code == 200
        load = Load(gw, x)
        shots = tmp_path / "screenshots"
        shots.mkdir()
        run = subprocess.run([node, str(BROWSER_DIR / "console_browser.mjs"), gw.admin, TOKEN, "digits", "0.7",
                              str(shots)], cwd=BROWSER_DIR, capture_output=True, text=True, timeout=300)
        load.stop()
        assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}\n{gw.log_text()}"
        assert " passed, 0 failed" in run.stdout
        for name in ["console-refused", "console-live", "console-preview", "console-applied"]:
            assert (shots / f"{name}.png").stat().st_size > 10_000, name
        assert not load.failed, f"calls failed while the console applied the edit: {load.failed[:5]}"
        text = config.read_text()
        assert "threshold = 0.7 }" in text and "# The console test's config" in text
        assert 'name = "digits"   # the cascade under test' in text, "the operator's comments are kept"
        assert served_route(gw, "digits")["policy"]["threshold"] == pytest.approx(0.7)
        reload = requests.get(f"{gw.admin}/admin/config", headers=AUTH, timeout=10).json()["last_reload"]
        assert reload["trigger"] == "console"
    finally:
        if load:
            load.stop()
        gw.stop()


def test_a_preview_changes_nothing_and_apply_reloads(tmp_path):
    gw, config = start(tmp_path)
    try:
        before = config.read_text()
        r = edit(gw, route="digits", threshold=0.6, budget_ms=80, ttl_s=45)
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["applied"] is False and config.read_text() == before
        assert "-policy = { type = \"cascade\", confidence_output = \"probabilities\", threshold = 0.8 }" in doc["diff"]
        assert "+policy = { type = \"cascade\", confidence_output = \"probabilities\", threshold = 0.6 }" in doc["diff"]
        assert "+budget_ms = { default = 80, max = 5000 }" in doc["diff"]
        assert "+cache = { ttl_s = 45 }" in doc["diff"]
        assert served_route(gw, "digits")["policy"]["threshold"] == pytest.approx(0.8)

        r = edit(gw, route="digits", threshold=0.6, budget_ms=80, ttl_s=45, apply=True, base=doc["base"])
        assert r.status_code == 200, r.text
        assert r.json()["applied"] is True and r.json()["reload"]["status"] == "applied"
        route = served_route(gw, "digits")
        assert route["policy"]["threshold"] == pytest.approx(0.6)
        assert (route["budget_ms"]["default"], route["cache"]["ttl_s"]) == (80, 45)
        assert config.read_text() == doc["candidate"]

        # The base is the preview's file: once the file moved on, apply refuses.
        r = edit(gw, route="digits", threshold=0.9, apply=True, base=doc["base"])
        assert r.status_code == 409 and "changed since the preview" in r.json()["error"]
        assert served_route(gw, "digits")["policy"]["threshold"] == pytest.approx(0.6)
    finally:
        gw.stop()


@pytest.mark.parametrize(
    "fields, status, path",
    [
        ({"route": "digits", "threshold": 1.5}, 400, "routes[0].policy.threshold"),
        ({"route": "heavy", "threshold": 0.5}, 400, "routes[1].policy"),
        ({"route": "nope", "ttl_s": 5}, 400, "routes"),
        ({"route": "digits", "budget_ms": 0}, 400, "routes[0].budget_ms"),
        ({"route": "digits"}, 400, None),
        ({"route": "digits", "threshold": 0.5, "colour": "red"}, 400, None),
        ({"route": "digits", "threshold": "high"}, 400, None),
    ],
)
def test_bad_edits_name_the_field_and_apply_nothing(tmp_path, fields, status, path):
    gw, config = start(tmp_path)
    try:
        before = config.read_text()
        r = edit(gw, **fields, apply=True)
        assert r.status_code == status, r.text
        if path:
            paths = [i["path"] for i in r.json()["issues"]]
            assert any(p.startswith(path) for p in paths), paths
        assert config.read_text() == before
        assert served_route(gw, "digits")["policy"]["threshold"] == pytest.approx(0.8)
        assert gw.alive()
    finally:
        gw.stop()


def test_edits_need_the_token_and_the_page_does_not(tmp_path):
    gw, _ = start(tmp_path)
    try:
        r = requests.post(f"{gw.admin}/admin/config/edit", json={"route": "digits", "threshold": 0.5}, timeout=10)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        r = requests.post(f"{gw.admin}/admin/config/edit", data=b"{not json", headers=AUTH, timeout=10)
        assert r.status_code == 400 and "not a route edit" in r.json()["error"]
        moved = requests.get(f"{gw.admin}/console", allow_redirects=False, timeout=10)
        assert moved.status_code == 308 and moved.headers["location"] == "/console/"
        page = requests.get(f"{gw.admin}/console/", timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        for asset, kind in [("console.js", "javascript"), ("console.css", "css"), ("uplot.js", "javascript")]:
            r = requests.get(f"{gw.admin}/console/{asset}", timeout=10)
            assert r.status_code == 200 and kind in r.headers["content-type"] and len(r.content) > 1000, asset
        assert requests.get(f"{gw.admin}/console/../admin/stats", timeout=10).status_code in (401, 404)
        assert requests.get(f"{gw.admin}/admin/stats", timeout=10).status_code == 401
    finally:
        gw.stop()


def test_the_built_in_config_previews_but_cannot_apply():
    gw = Gateway()
    try:
        r = requests.post(f"{gw.admin}/admin/config/edit", json={"route": "digits", "budget_ms": 75}, timeout=60)
        assert r.status_code == 200, r.text
        assert "+budget_ms" in r.json()["diff"] or "default = 75" in r.json()["diff"]
        r = requests.post(f"{gw.admin}/admin/config/edit", json={"route": "digits", "budget_ms": 75, "apply": True},
                          timeout=60)
        assert r.status_code == 409 and "--config" in r.json()["error"]
        assert "default = 75" in r.json()["diff"], "the diff to apply by hand comes with the refusal"
    finally:
        gw.stop()


def test_budget_misses_are_counted_per_route(tmp_path):
    gw, _ = start(tmp_path)
    try:
        x = rows()
        session = requests.Session()
        for i in range(5):
            assert session.post(f"{gw.base}/v2/models/heavy/infer", json=body(x[i], i), timeout=30).status_code == 200
        stats = requests.get(f"{gw.admin}/admin/stats", headers=AUTH, timeout=10).json()
        assert stats["budgets"]["heavy"] == {"answered": 5, "missed": 0}
        metrics = requests.get(f"{gw.admin}/metrics", timeout=10).text
        assert 'switchyard_route_answers_total{route="heavy"} 5' in metrics
        assert 'switchyard_route_budget_misses_total{route="heavy"} 0' in metrics
    finally:
        gw.stop()
