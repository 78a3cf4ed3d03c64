"""Text models for the FastAPI baseline: what most teams write to serve a
sentence-embedding ONNX model in Python. The HuggingFace `tokenizers`
package tokenises the request's strings (padding to the longest string of
the request, truncating to --text-max-length), onnxruntime runs the model.

The public contract is Switchyard's: one BYTES input `text` ([N] or [N, 1]
UTF-8 strings, declared [-1, 1], JSON or Triton binary) -> the model's outputs (`embedding`
FP32 [N, 384] for models/minilm-*.onnx, which pool and normalise in-graph).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
from tokenizers import Tokenizer

TOKEN_INPUTS = {"input_ids", "attention_mask", "token_type_ids"}


class BadRequest(Exception):
    pass


def is_text_model(input_names) -> bool:
    """A graph that takes only token tensors, input_ids and attention_mask among them."""
    names = set(input_names)
    return {"input_ids", "attention_mask"} <= names <= TOKEN_INPUTS


def load_tokenizer(path: str, max_length: int) -> Tokenizer:
    tok = Tokenizer.from_file(path)
    tok.enable_truncation(max_length)
    tok.enable_padding()  # to the longest text of each call
    return tok


def parse_strings(body: bytes, header_len: str | None) -> tuple[dict[str, Any], list[str]]:
    """The request JSON and the strings of its single BYTES input."""
    try:
        if header_len is not None:
            n = int(header_len)
            req, binary = json.loads(body[:n]), memoryview(body)[n:]
        else:
            req, binary = json.loads(body), memoryview(b"")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"malformed JSON request: {e}") from None
    inputs = req.get("inputs") if isinstance(req, dict) else None
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise BadRequest("expected one input, 'text'")
    inp = inputs[0]
    if inp.get("name") != "text" or inp.get("datatype") != "BYTES":
        raise BadRequest("input must be 'text' with datatype BYTES")
    shape = inp.get("shape")
    if not isinstance(shape, list) or len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] != 1):
        raise BadRequest("input 'text' must have shape [N] or [N, 1]")
    params = inp.get("parameters") or {}
    if "binary_data_size" in params:
        raw, items, off = binary[: int(params["binary_data_size"])], [], 0
        while off < len(raw):
            (size,) = struct.unpack_from("<I", raw, off)
            items.append(bytes(raw[off + 4 : off + 4 + size]))
            off += 4 + size
        try:
            texts = [b.decode("utf-8") for b in items]
        except UnicodeDecodeError as e:
            raise BadRequest(f"text is not UTF-8: {e}") from None
    else:
        texts = inp.get("data")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise BadRequest("'data' must be a list of strings")
    if len(texts) != shape[0] or not texts:
        raise BadRequest(f"{len(texts)} strings for shape {shape}")
    return req, texts


class TextModel:
    """Wraps a baseline `Model` whose graph takes token tensors."""

    def __init__(self, model, tokenizer: Tokenizer) -> None:
        self.model = model
        self.name = model.name
        self.session = model.session
        self.tokenizer = tokenizer
        self.token_inputs = list(model.inputs)
        self.inputs = {"text": ("BYTES", [-1, 1])}
        self.outputs = model.outputs
        self.output_names = model.output_names

    def metadata(self) -> dict[str, Any]:
        meta = self.model.metadata()
        meta["inputs"] = [{"name": "text", "datatype": "BYTES", "shape": [-1, 1]}]
        return meta

    def config(self, max_batch_size: int) -> dict[str, Any]:
        cfg = self.model.config(max_batch_size)
        cfg["input"] = [{"name": "text", "data_type": "TYPE_STRING", "dims": [1] if max_batch_size > 0 else [-1, 1]}]
        return cfg

    def decode(self, body: bytes, header_len: str | None):
        """-> (request id, texts, [(output, binary?)] or None, binary default)."""
        req, texts = parse_strings(body, header_len)
        binary_default = bool((req.get("parameters") or {}).get("binary_data_output", False))
        outputs = None
        if req.get("outputs"):
            outputs = [(o["name"], bool((o.get("parameters") or {}).get("binary_data", binary_default)))
                       for o in req["outputs"] if isinstance(o, dict) and o.get("name") in self.outputs]
        return req.get("id"), texts, outputs, binary_default

    def run(self, names: list[str], texts: list[str]):
        """Tokenise and run (called in the threadpool)."""
        encs = self.tokenizer.encode_batch(texts)
        feeds = {
            "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
        }
        return self.session.run(names, {k: v for k, v in feeds.items() if k in self.token_inputs})
