"""The console's Tenants view in headless Chromium
(gateway/tests/browser/tenants_browser.mjs), on the real binary: a
tenant's configured limits are shown, and its "limited" count rises after
its requests are refused with 429 (issue 41, visibility)."""

import shutil
import subprocess

from conftest import REPO, Gateway
from routing_util import write_config

KEY = "key-of-team-a-0123456789"
TOKEN = "tenants-console-test-token-0123456789"

CONFIG = f"""
[[models]]
name = "digits-cheap"
path = "{{models}}/digits-cheap.onnx"

[[routes]]
name = "keyed"
models = ["digits-cheap"]
cache = {{ enabled = false }}
auth = {{ keys = [{{ key = "{KEY}", tenant = "team-a" }}] }}

[[tenants]]
name = "team-a"
limits = {{ requests_per_s = 1, burst = 2, requests_per_day = 1000 }}
"""


def test_the_console_shows_a_tenants_limits_and_its_refusals(tmp_path):
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
    browser_dir = REPO / "gateway" / "tests" / "browser"
    assert (browser_dir / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    gw = Gateway(config=write_config(tmp_path, CONFIG), env={"SWITCHYARD_ADMIN_TOKEN": TOKEN})
    try:
        shots = tmp_path / "screenshots"
        shots.mkdir()
        run = subprocess.run([node, str(browser_dir / "tenants_browser.mjs"), gw.admin, TOKEN,
                              f"{gw.base}/v2/models/keyed/infer", KEY, "team-a", str(shots)],
                             cwd=browser_dir, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}\n{gw.log_text()}"
        assert " passed, 0 failed" in run.stdout
        assert (shots / "console-tenants.png").stat().st_size > 10_000
    finally:
        gw.stop()
