"""Helpers shared by the routing tests: temp configs over the real models,
V2 request bodies, and the models' own onnxruntime outputs to compare with."""

from pathlib import Path

import numpy as np
import onnxruntime as ort

from conftest import MODELS


# The two digits models, sessions built at start-up: the opening of the
# cascade tests' configs (`{models}` expands in write_config).
DIGITS_MODELS = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true
[[models]]
name = "digits-heavy"
path = "{models}/digits-heavy.onnx"
warmup = true
"""

# The cheap digits model alone behind the route "digits": the end of the
# configs of tests about listeners and connections rather than routing.
DIGITS_ROUTE = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"

[[routes]]
name = "digits"
models = ["digits-cheap"]
"""


def write_config(tmp_path: Path, body: str) -> Path:
    """A config file whose model paths are absolute (`{models}` expands)."""
    path = tmp_path / "switchyard.toml"
    path.write_text(body.replace("{models}", str(MODELS)))
    return path


def infer_body(rows, outputs=None, parameters=None):
    x = np.asarray(rows, dtype=np.float32).reshape(-1, 64)
    body = {"inputs": [{"name": "X", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    if outputs:
        body["outputs"] = [{"name": n} for n in outputs]
    if parameters:
        body["parameters"] = parameters
    return body


def output(response_json, name):
    return next(o for o in response_json["outputs"] if o["name"] == name)["data"]


class Reference:
    """The models run directly with onnxruntime, for expected outputs."""

    def __init__(self, *names):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.sessions = {n: ort.InferenceSession(str(MODELS / f"{n}.onnx"), opts) for n in names}

    def run(self, name, rows):
        label, probs = self.sessions[name].run(["label", "probabilities"], {"X": np.asarray(rows, np.float32)})
        return label, probs
