"""A small MLServer inference runtime that serves one ONNX file with
onnxruntime: MLServer has no ONNX runtime of its own, so this is what a team
running MLServer would write (a custom `MLModel`).

model-settings.json: {"implementation": "onnx_runtime.OnnxModel",
                      "parameters": {"uri": "/abs/path/model.onnx",
                                     "extra": {"intra_op_threads": 1}}}

The model's signature (the inputs and outputs in `GET /v2/models/{m}`) is
read from the ONNX file at load time, as MLServer lets a runtime do: a
gateway that reads upstream signatures (Switchyard's `[[upstreams]]`) needs
it, and without it MLServer publishes empty lists.

Requests are decoded with MLServer's own NumpyCodec (JSON tensors over REST,
where MLServer 1.7 has no binary tensor extension; raw contents over gRPC),
every model output is returned (or those the request names).
MLServer's adaptive batching (max_batch_size / max_batch_time in the model
settings) concatenates requests along the first dimension before `predict`.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor

# ONNX element types -> V2 datatypes (those the project's models use, and a few more).
V2_TYPES = {
    "tensor(float)": "FP32", "tensor(double)": "FP64", "tensor(float16)": "FP16",
    "tensor(int64)": "INT64", "tensor(int32)": "INT32", "tensor(int8)": "INT8", "tensor(uint8)": "UINT8",
    "tensor(bool)": "BOOL", "tensor(string)": "BYTES",
}


def signature(args) -> list:
    """Each ONNX input or output as a V2 metadata tensor (symbolic or
    unknown dimensions are -1)."""
    return [MetadataTensor(name=a.name, datatype=V2_TYPES.get(a.type, a.type),
                           shape=[d if isinstance(d, int) else -1 for d in a.shape]) for a in args]


class OnnxModel(MLModel):
    """One onnxruntime session per model, run in MLServer's event loop
    thread pool."""

    async def load(self) -> bool:
        params = self.settings.parameters
        extra = (params.extra or {}) if params else {}
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(extra.get("intra_op_threads", 1))
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(params.uri, options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._outputs = [o.name for o in self._session.get_outputs()]
        self.inputs = signature(self._session.get_inputs())
        self.outputs = signature(self._session.get_outputs())
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {}
        for request_input in payload.inputs:
            if request_input.name not in self._inputs:
                raise ValueError(f"unknown input {request_input.name!r}")
            feeds[request_input.name] = NumpyCodec.decode_input(request_input)
        wanted = [o.name for o in payload.outputs] if payload.outputs else self._outputs
        results = self._session.run(wanted, feeds)
        outputs = [NumpyCodec.encode_output(name, np.asarray(value)) for name, value in zip(wanted, results)]
        return InferenceResponse(model_name=self.name, model_version=self.version, id=payload.id, outputs=outputs)
