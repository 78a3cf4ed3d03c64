"""Every TOML example of the documentation goes through `switchyard
check-config` (issue 45): each ```toml block of README.md and of the book
(docs/src/**/*.md), one test per block named `page:line`, and every file of
deploy/examples/. A block is a whole config unless the line before it marks
it (an HTML comment, invisible in the rendered page):

    <!-- check-config: fragment -->      laid over BASE (two digits models), then checked
    <!-- check-config: invalid -->       check-config must refuse it (may be combined: `invalid fragment`)
    <!-- check-config: parse-only; why --> only parsed as TOML, for a block whose check needs
                                         something a test cannot have (the reason is required)

Configs are written to a temp folder that links `models` to this
checkout's models, and check-config runs from the repository root, so a
block's `models/...` paths resolve either way."""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import MODELS, REPO
from docs_util import all_blocks, markers_without_a_block, merge, to_toml

MARKS = {"fragment", "invalid", "parse-only"}

# What a fragment is laid over: the smallest config its routes can name models of.
BASE = {
    "models": [
        {"name": "digits-cheap", "path": "digits-cheap.onnx"},
        {"name": "digits-heavy", "path": "digits-heavy.onnx"},
    ],
}

EXAMPLES = sorted((REPO / "deploy" / "examples").glob("*.toml"))
# Host names of deploy/examples that exist only inside the cluster they are
# written for (check-config resolves upstream addresses): each is checked
# as this loopback address instead.
CLUSTER_HOSTS = {"switchyard-runtime": "127.0.0.1"}

TOML_BLOCKS = all_blocks("toml")


def binary() -> str:
    return os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


def check_config(text: str, folder: Path) -> subprocess.CompletedProcess:
    """`switchyard check-config` on `text`, written in `folder` (which links `models`)."""
    (folder / "models").symlink_to(MODELS, target_is_directory=True)
    config = folder / "switchyard.toml"
    config.write_text(text)
    return subprocess.run([binary(), "check-config", str(config)], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def test_the_docs_have_toml_blocks_and_every_marker_has_its_block():
    """The extractor finds the blocks (a test over none would pass
    whatever the docs say), and no marker has lost the block it was for."""
    assert len(TOML_BLOCKS) >= 5, [b.id for b in TOML_BLOCKS]
    assert markers_without_a_block() == []


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[b.id for b in TOML_BLOCKS])
def test_doc_toml_block_passes_check_config(block, tmp_path):
    assert block.marks <= MARKS, f"{block.id}: unknown check-config marks {sorted(block.marks - MARKS)}"
    try:
        parsed = tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as e:
        assert "invalid" in block.marks, f"{block.id}: not TOML: {e}\n{block.text}"
        return
    if "parse-only" in block.marks:
        assert block.reason, f"{block.id}: a parse-only block must say why it cannot be checked"
        return
    text = to_toml(merge(BASE, parsed)) if "fragment" in block.marks else block.text
    out = check_config(text, tmp_path)
    log = out.stdout + out.stderr
    if "invalid" in block.marks:
        assert out.returncode != 0, f"{block.id}: marked invalid, but check-config accepts it:\n{text}"
    else:
        assert out.returncode == 0, f"{block.id}: check-config refuses it:\n{log}\n--- checked:\n{text}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_deploy_example_passes_check_config(example, tmp_path):
    """Checked in place (its paths are relative to its folder), or, when it
    names cluster-only hosts, as a copy with loopback instead and its
    repository path made absolute."""
    text = example.read_text()
    local = text
    for host, addr in CLUSTER_HOSTS.items():
        local = re.sub(rf'"{re.escape(host)}:(\d+)"', rf'"{addr}:\1"', local)
    config = example
    if local != text:
        config = tmp_path / example.name
        config.write_text(local.replace('path = "../../models"', f'path = "{MODELS}"'))
    out = subprocess.run([binary(), "check-config", str(config)], cwd=REPO, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, f"{example}: check-config refuses it:\n{out.stdout}{out.stderr}"
