"""Real V2 servers for the upstream tests, each run from its own venv as a
separate process on loopback, on ports the harness reserves (conftest),
stopped by PID:

- MLServer 1.7 (`.venv-mlserver`), through the benchmark suite's launcher
  and its onnxruntime `MLModel` (`benchmarks/mlserver/`);
- KServe's Python model server (`.venv-kserve`, `kserve_digits.py`).

Both venvs are installed by `scripts/setup.sh test` (so by `make test`). A
missing one is a test failure that says how to install it, never a skip."""

from pathlib import Path

import numpy as np
import requests

from conftest import MODELS, REPO, reserve_port
from proxy_util import Process

HERE = Path(__file__).resolve().parent
MLSERVER_VENV = REPO / ".venv-mlserver"
KSERVE_VENV = REPO / ".venv-kserve"


def venv_python(venv: Path) -> str:
    python = venv / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{venv.name} is missing: run `scripts/setup.sh test` (part of `make test`)")
    return str(python)


def _ready(model):
    def check(p):
        return requests.get(f"{p.base}/v2/models/{model}/ready", timeout=1).status_code == 200
    return check


def mlserver(workdir: Path, model: str = "digits-heavy") -> Process:
    """MLServer serving models/`model`.onnx under its own name (REST; its
    gRPC and metrics listeners on reserved loopback ports too)."""
    http, grpc, metrics = reserve_port(), reserve_port(), reserve_port()
    args = [venv_python(MLSERVER_VENV), str(REPO / "benchmarks" / "mlserver" / "serve.py"),
            "--models-dir", str(MODELS), "--only", model, "--workdir", str(workdir),
            "--port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    return Process(args, http, "mlserver", _ready(model))


def kserve(model: str = "digits-heavy") -> Process:
    """KServe's model server serving models/`model`.onnx under its own name
    (REST only)."""
    port = reserve_port()
    args = [venv_python(KSERVE_VENV), str(HERE / "kserve_digits.py"), "--model_name", model,
            "--model_path", str(MODELS / f"{model}.onnx"), "--http_port", str(port)]
    return Process(args, port, "kserve", _ready(model))


def infer_json(base: str, model: str, x: np.ndarray) -> dict:
    """A JSON V2 call (what both servers take) of rows `x` of the digits contract."""
    body = {"inputs": [{"name": "X", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    r = requests.post(f"{base}/v2/models/{model}/infer", json=body, timeout=30)
    assert r.status_code == 200, f"{base} {model}: {r.status_code} {r.text[:300]}"
    return r.json()


def outputs(doc: dict) -> dict:
    """A V2 answer's outputs as {name: (datatype, array)}; floats as FP32,
    so a value printed by Python (float64 text) and by Switchyard (float32
    text) compare equal when they are the same FP32 number."""
    dtypes = {"FP32": np.float32, "INT64": np.int64}
    return {o["name"]: (o["datatype"], np.asarray(o["data"], dtypes[o["datatype"]]).reshape(o["shape"]))
            for o in doc["outputs"]}
