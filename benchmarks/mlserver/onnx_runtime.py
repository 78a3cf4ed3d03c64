"""A small MLServer inference runtime that serves one ONNX file with
onnxruntime: MLServer has no ONNX runtime of its own, so this is what a team
running MLServer would write (a custom `MLModel`).

model-settings.json: {"implementation": "onnx_runtime.OnnxModel",
                      "parameters": {"uri": "/abs/path/model.onnx",
                                     "extra": {"intra_op_threads": 1}}}

Requests are decoded with MLServer's own NumpyCodec (JSON or binary tensor
data), every model output is returned (or those the request names).
MLServer's adaptive batching (max_batch_size / max_batch_time in the model
settings) concatenates requests along the first dimension before `predict`.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


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
