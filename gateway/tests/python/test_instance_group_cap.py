"""`instance_group { count: 1000 }` in a Triton `config.pbtxt` does not
start a thousand ONNX Runtime sessions and threads (issue 37, item 16):
the count is clamped to one worker per core (at least 4) with a warning
that names the field, and the model serves."""

import os
import shutil

import requests

from conftest import MODELS, Gateway
from sse_util import admin, pool_stats

CONFIG_PBTXT = """
name: "digits"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "X", data_type: TYPE_FP32, dims: [ 64 ] } ]
output [
  { name: "label", data_type: TYPE_INT64, dims: [ 1 ], reshape: { shape: [ ] } },
  { name: "probabilities", data_type: TYPE_FP32, dims: [ 10 ] }
]
dynamic_batching { }
instance_group [ { kind: KIND_CPU, count: 1000 } ]
"""


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_thousand_instances_are_clamped_with_a_warning(tmp_path):
    version = tmp_path / "repo" / "digits" / "1"
    version.mkdir(parents=True)
    shutil.copy(MODELS / "digits-cheap.onnx", version / "model.onnx")
    (version.parent / "config.pbtxt").write_text(CONFIG_PBTXT)
    config = tmp_path / "store.toml"
    config.write_text(f'[repository]\nuri = "file://{tmp_path / "repo"}"\ncache_dir = "{tmp_path / "cache"}"\n')
    gw = Gateway(config=config)
    try:
        body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 64], "data": [0.0] * 64}]}
        r = requests.post(f"{gw.base}/v2/models/digits/infer", json=body, timeout=120)
        assert r.status_code == 200, r.text
        cap = max(os.cpu_count() or 1, 4)
        workers = pool_stats(gw, "digits")["workers"]
        assert 1 <= workers <= cap, workers
        # Generous: the gateway's own threads plus one per worker, with
        # the model loaded; 1,025 before the cap.
        assert threads(gw.proc.pid) < 100 + cap, threads(gw.proc.pid)
        warnings = admin(gw, "/admin/config")["config"]["repository"]["warnings"]["digits"]
        assert any(w.startswith(f"instance_group[0].count 1000: capped at {workers} workers") for w in warnings), \
            warnings
    finally:
        gw.stop()
