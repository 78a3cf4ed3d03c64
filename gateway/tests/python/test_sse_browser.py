"""A browser sees both events: headless Chromium (Debian's `chromium`,
driven by `playwright-core` from npm, both installed by
`scripts/setup.sh test`) runs a small page that streams an infer call with
`fetch` and a streaming reader, and shows the draft, then the final. See
gateway/tests/browser/sse_browser.mjs for the checks."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from conftest import MODELS, REPO, Gateway
from routing_util import Reference, infer_body, write_config
from sse_util import FIXTURES
from test_sse import CONFIG

BROWSER_DIR = REPO / "gateway" / "tests" / "browser"


def test_a_browser_renders_the_draft_then_the_final(tmp_path):
    node = shutil.which("node")
    assert node, "node is missing: scripts/setup.sh test installs what the browser test needs"
    assert (BROWSER_DIR / "node_modules" / "playwright-core").is_dir(), "run scripts/setup.sh test (npm ci)"
    chromium = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    assert Path(chromium).exists(), f"{chromium} is missing: run scripts/setup.sh test (apt chromium)"
    data = json.loads((MODELS / "digits-test.json").read_text())
    x = np.asarray(data["X"], np.float32)
    _, probs = Reference("digits-cheap").run("digits-cheap", x)
    i = int(np.flatnonzero(probs.max(axis=1) <= 0.6)[0])
    body_file = tmp_path / "body.json"
    body_file.write_text(json.dumps(infer_body(x[i : i + 1], outputs=["label"])))
    gw = Gateway(config=write_config(tmp_path, CONFIG.replace("{fixtures}", str(FIXTURES))))
    try:
        admin = f"http://127.0.0.1:{gw.admin_port}"
        args = [node, str(BROWSER_DIR / "sse_browser.mjs"), gw.base, admin, "digits", "digits-heavy",
                str(body_file), str(tmp_path)]
        run = subprocess.run(args, cwd=BROWSER_DIR, capture_output=True, text=True, timeout=120)
    finally:
        gw.stop()
    assert run.returncode == 0, f"browser test failed:\n{run.stdout}\n{run.stderr}"
    assert "1 passed, 0 failed" in run.stdout
    assert (tmp_path / "sse-draft.png").exists() and (tmp_path / "sse-final.png").exists()
