"""Triton's perf_analyzer, unmodified, against the real binary over HTTP
and over gRPC (`-i grpc`): a short run in request-count mode (a fixed
number of requests at concurrency 2, no stability search, so it ends the
same way on a busy machine) on digits-cheap with `--shape X:1,64`. It must
exit 0, print no error, have sent every request, and the model config it
read and printed (`-v -v`) must be the one the gateway serves. Speed is
not asserted.

perf_analyzer is the copy inside tritonclient 2.50 (`.venv-perf`,
installed with Debian's libb64-0d by `scripts/setup.sh test`); it links
against the CUDA runtime library from its wheel (no GPU is used)."""

import json
import re
import subprocess

import pytest
import requests
import tritonclient.grpc as grpcclient
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2, service_pb2

from conftest import REPO, Gateway

VENV = REPO / ".venv-perf"
PERF = VENV / "bin" / "perf_analyzer"
MODEL = "digits-cheap"
REQUESTS = 60


@pytest.fixture(scope="module")
def gw():
    gateway = Gateway(extra_args=["--grpc-listen", "127.0.0.1:0"])
    yield gateway
    gateway.stop()


def perf_analyzer(protocol: str, port: int) -> str:
    """Runs perf_analyzer; returns its output (stdout and stderr), after
    checking it exited 0 and printed no error."""
    if not PERF.exists():
        raise RuntimeError(f"{PERF} is missing: run `scripts/setup.sh test` (part of `make test`)")
    cudart = next(VENV.glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib"))
    args = [str(PERF), "-i", protocol, "-u", f"127.0.0.1:{port}", "-m", MODEL, "--shape", "X:1,64",
            "--concurrency-range", "2", "--request-count", str(REQUESTS), "-v", "-v"]
    out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240,
                         env={"LD_LIBRARY_PATH": str(cudart), "PATH": "/usr/bin:/bin"})
    text = out.stdout
    assert out.returncode == 0, f"perf_analyzer -i {protocol} exited {out.returncode}:\n{text[-3000:]}"
    # Its verbose output echoes the server's documents (the statistics'
    # "fail" counters, JSON or protobuf text): look for its own words.
    problems = [line for line in text.splitlines()
                if re.search(r"\berror\b|\bfailed\b|\bunable\b|\binvalid\b", line, re.I)]
    assert not problems, problems[:5]
    assert f"Sending {REQUESTS} benchmark requests" in text, text[-2000:]
    assert re.search(rf"^\s*Request count: {REQUESTS}$", text, re.M), text[-2000:]
    assert "Concurrency: 2, throughput:" in text, text[-2000:]
    return text


def test_perf_analyzer_over_http_runs_on_the_served_config(gw):
    text = perf_analyzer("http", gw.port)
    # -v -v prints each exchange: the request line and headers (stderr),
    # the body (stdout). perf_analyzer cannot run without the config (it
    # fails on MLServer, which serves none).
    assert f"GET /v2/models/{MODEL}/config HTTP/1.1" in text, "perf_analyzer did not read the model config"
    bodies = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"max_batch_size"' in line]
    assert len(bodies) == 1, f"{len(bodies)} config bodies printed"
    reported = bodies[0]
    served = requests.get(f"{gw.base}/v2/models/{MODEL}/config", timeout=5).json()
    assert reported == served
    assert reported["max_batch_size"] > 0 and [i["name"] for i in reported["input"]] == ["X"]
    assert text.count(f"POST /v2/models/{MODEL}/infer") >= REQUESTS


def test_perf_analyzer_over_grpc_runs_on_the_served_config(gw):
    assert gw.grpc_port, "the gateway reported no gRPC port"
    text = perf_analyzer("grpc", gw.grpc_port)
    # -v -v prints the ModelConfigResponse as protobuf text: `config {...}`.
    found = re.search(r"^config \{\n.*?^\}$", text, re.M | re.S)
    assert found, "perf_analyzer did not print the model config"
    reported = text_format.Parse(found.group(0), service_pb2.ModelConfigResponse()).config
    served = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}").get_model_config(MODEL).config
    assert reported == served
    rest = requests.get(f"{gw.base}/v2/models/{MODEL}/config", timeout=5).json()
    assert reported.max_batch_size == rest["max_batch_size"]
    assert [(i.name, model_config_pb2.DataType.Name(i.data_type), list(i.dims))
            for i in reported.input] == [(i["name"], i["data_type"], i["dims"]) for i in rest["input"]]
    assert [o.name for o in reported.output] == [o["name"] for o in rest["output"]]
