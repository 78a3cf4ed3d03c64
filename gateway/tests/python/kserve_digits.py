"""KServe's Python model server (`kserve.ModelServer`, REST only) serving
one ONNX model with the digits contract, for the upstream tests. Run with
the KServe venv's Python (`.venv-kserve`, installed by `scripts/setup.sh
test`):

    .venv-kserve/bin/python kserve_digits.py --model_name NAME --model_path FILE --http_port PORT

It is what a KServe user writes for a model KServe has no runtime for: a
`kserve.Model` subclass whose `predict` takes a V2 `InferRequest` and runs
the model (onnxruntime, one thread), and whose input and output types are
the model's V2 signature (`GET /v2/models/{m}`). Requests and answers may
use KServe's own binary tensor support.

KServe's REST server always binds 0.0.0.0 (uvicorn `host` is fixed in
`kserve.protocol.rest.server.RESTServer`); the tests bind nothing but
loopback, so the uvicorn config is set to 127.0.0.1 before it starts.
KServe's gRPC server (`[::]:port`) is turned off: Switchyard calls its
upstreams over REST only.
"""

import argparse
import uuid

import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve import model_server
from kserve.errors import InvalidInput
from kserve.protocol.rest import server as rest_server

V2_TYPES = {"tensor(float)": "FP32", "tensor(int64)": "INT64"}


def signature(args):
    return [{"name": a.name, "datatype": V2_TYPES[a.type],
             "shape": [d if isinstance(d, int) else -1 for d in a.shape]} for a in args]


class OnnxDigits(Model):
    """One onnxruntime session; `predict` answers every output (or those asked for)."""

    def __init__(self, name: str, path: str):
        super().__init__(name)
        self.path = path
        self.session = None
        self.load()

    def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(self.path, options, providers=["CPUExecutionProvider"])
        self.ready = True
        return self.ready

    def get_input_types(self):
        return signature(self.session.get_inputs())

    def get_output_types(self):
        return signature(self.session.get_outputs())

    async def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        names = {i.name for i in self.session.get_inputs()}
        feeds = {}
        for tensor in payload.inputs:
            if tensor.name not in names:
                raise InvalidInput(f"unknown input {tensor.name!r}")
            feeds[tensor.name] = tensor.as_numpy()
        wanted = [o.name for o in self.session.get_outputs()]
        results = self.session.run(wanted, feeds)
        outputs = []
        for name, value, meta in zip(wanted, results, self.get_output_types()):
            value = np.asarray(value)
            out = InferOutput(name=name, shape=list(value.shape), datatype=meta["datatype"])
            out.set_data_from_numpy(value, binary_data=False)
            outputs.append(out)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=outputs,
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)


def loopback_only():
    """Makes KServe's REST server bind 127.0.0.1 instead of 0.0.0.0."""
    original = rest_server.RESTServer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.config.host = "127.0.0.1"

    rest_server.RESTServer.__init__ = init


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[model_server.parser])
    parser.add_argument("--model_path", required=True)
    args, _ = parser.parse_known_args()
    loopback_only()
    model = OnnxDigits(args.model_name, args.model_path)
    ModelServer(http_port=args.http_port, enable_grpc=False, workers=1).start([model])
