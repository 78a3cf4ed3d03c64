"""`routes[].record.path` on the real binary (issue 37, item 10): a
traffic sample may only be written to a file the gateway can append to
without harm. The config file itself, a model file, a folder or
`/proc/self/mem` are refused by check-config, at start and on reload;
before, a sample pointed at the config appended a JSON line to it at the
first recorded request, and the next start failed."""

import os
import subprocess

import pytest
import requests

from conftest import MODELS, REPO, Gateway

ROUTE = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"

[[routes]]
name = "r"
models = ["digits-cheap"]
"""

ROW = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}


def binary():
    return os.environ.get("SWITCHYARD_BIN", str(REPO / "target" / "debug" / "switchyard"))


def config_recording_to(tmp_path, record_path, name="switchyard.toml"):
    path = tmp_path / name
    record = record_path if record_path is not None else path
    text = ROUTE.replace("{models}", str(MODELS)) + f'record = {{ sample = 1.0, path = "{record}" }}\n'
    path.write_text(text)
    return path


def check_config(path):
    return subprocess.run([binary(), "check-config", str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", ["config", "model", "folder", "proc"])
def test_check_config_refuses_a_sample_written_where_it_must_not_be(tmp_path, case):
    target = {
        "config": None,
        "model": MODELS / "digits-cheap.onnx",
        "folder": tmp_path,
        "proc": "/proc/self/mem",
    }[case]
    path = config_recording_to(tmp_path, target)
    before = path.read_text()
    out = check_config(path)
    assert out.returncode != 0, out.stderr
    assert "routes[0].record.path" in out.stderr, out.stderr
    assert path.read_text() == before


def test_a_sample_in_a_writable_folder_is_accepted(tmp_path):
    out = check_config(config_recording_to(tmp_path, tmp_path / "traffic" / "r.jsonl"))
    assert out.returncode == 0, out.stderr


def test_serve_refuses_to_start_recording_into_its_own_config(tmp_path):
    path = config_recording_to(tmp_path, None)
    before = path.read_text()
    try:
        gw = Gateway(config=path)
    except RuntimeError as refused:
        assert "routes[0].record.path" in str(refused)
    else:
        gw.stop()
        pytest.fail("the gateway started recording into its own config")
    assert path.read_text() == before


def test_a_reload_that_would_record_into_the_config_is_refused(tmp_path):
    path = config_recording_to(tmp_path, tmp_path / "r.jsonl")
    gw = Gateway(config=path)
    try:
        path.write_text(path.read_text().replace(str(tmp_path / "r.jsonl"), str(path)))
        edited = path.read_text()
        r = requests.post(f"{gw.admin}/admin/reload", timeout=60)
        assert r.status_code == 400, r.text
        assert "routes[0].record.path" in r.text
        assert requests.post(f"{gw.base}/v2/models/r/infer", json=ROW, timeout=30).status_code == 200
        assert path.read_text() == edited, "nothing was appended to the config"
    finally:
        gw.stop()
