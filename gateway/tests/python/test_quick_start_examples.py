"""The quick start's first requests run (issue 45): the `sh` (curl) and
`python` blocks of README.md's "Ask it something" part (the
`first-requests` anchor, which the book's Quick start page includes), read
from the Markdown, run against the real binary serving the built-in
config as `make run` does, on the port it bound instead of 8000. A curl
must exit 0 with HTTP 200 and the whole block with status 0 (pipes
included); a Python block must exit 0."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, Gateway
from docs_util import blocks

README = REPO / "README.md"
DOCUMENTED_PORT = 8000


def first_request_blocks():
    """The fenced blocks between `<!-- ANCHOR: first-requests -->` and its end."""
    lines = README.read_text().splitlines()
    start = lines.index("<!-- ANCHOR: first-requests -->") + 1
    end = lines.index("<!-- ANCHOR_END: first-requests -->") + 1
    return [b for b in blocks(README) if start < b.line < end and b.lang in ("sh", "python")]


BLOCKS = first_request_blocks()


@pytest.fixture(scope="module")
def built_in_gateway():
    gw = Gateway()  # no --config: the built-in config, as `make run` serves it
    yield gw
    gw.stop()


def on_port(text: str, port: int) -> str:
    """The example with the documented address swapped for the gateway's."""
    swapped = re.sub(rf"\b(localhost|127\.0\.0\.1):{DOCUMENTED_PORT}\b", f"127.0.0.1:{port}", text)
    assert swapped != text, f"the example names no localhost:{DOCUMENTED_PORT} to swap:\n{text}"
    return swapped


def test_the_quick_start_has_curl_and_python_examples():
    langs = [b.lang for b in BLOCKS]
    assert "sh" in langs and "python" in langs, [b.id for b in BLOCKS]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_quick_start_example_runs(block, built_in_gateway):
    code = on_port(block.text, built_in_gateway.port)
    if block.lang == "sh":
        # Every curl reports its HTTP status on stderr; pipes fail the block.
        curls = len(re.findall(r"(?m)(^|\|\s*)curl ", code))
        shim = "curl() { command curl --write-out '%{stderr}HTTP %{http_code}\\n' \"$@\"; }\n"
        out = subprocess.run(["bash", "-c", "set -eo pipefail\n" + shim + code], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        statuses = re.findall(r"^HTTP (\d+)$", out.stderr, re.M)
        assert out.returncode == 0, f"{block.id}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
        assert statuses == ["200"] * curls, f"{block.id}: HTTP statuses {statuses}\n{out.stdout}\n{out.stderr}"
    else:
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": ""})
        assert out.returncode == 0, f"{block.id}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    assert out.stdout.strip(), f"{block.id}: printed nothing"
