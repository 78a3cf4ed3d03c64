#!/usr/bin/env python3
"""Deterministic generator for Switchyard's test/benchmark models.

Writes (into models/ or --out DIR):

  digits-cheap.onnx   LogisticRegression on sklearn's bundled digits (skl2onnx)
  digits-heavy.onnx   MLPClassifier(512, 256) on the same data (skl2onnx)
  synth-heavy.onnx    4-layer transformer-like stack, compute-bound (~100 MFLOP/sample)
  synth-wide.onnx     wide 3-layer MLP, memory-bound (batching pays a lot on CPU)
  digits-test.npz     digits test split: X float32 [n,64], y int64 [n]
  digits-test.json    same, as {"X": [[...]], "y": [...]} for Rust tools

Every model: input `X` float32 [N,64] (dynamic N) -> outputs `label` int64 [N]
and `probabilities` float32 [N,10].

The same versions (models/requirements.txt) on the same kind of CPU give the
same bytes every run; models/checksums.sha256 pins them.

  python models/generate.py                   # generate into models/, compare with pins
  python models/generate.py --check           # regenerate into a temp dir, exit 1 on mismatch
  python models/generate.py --verify          # hash the existing files only (no regeneration)
  python models/generate.py --update-checksums   # generate and re-pin (after a deliberate change)
  python models/generate.py --bench           # also time each model with onnxruntime, 1 thread
"""

from __future__ import annotations

import os
import platform

# --- Determinism: pin numeric kernels BEFORE numpy/scipy/sklearn are imported. ---
# Floating-point results of BLAS and of numpy's SIMD exp/log depend on which CPU
# kernels are dispatched (AVX-512 vs AVX2 give different last bits, and MLP
# training amplifies them). Pin one thread and the AVX2 level on x86-64 so that
# any AVX2 machine produces the same bytes as the one that pinned the checksums.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
    os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL AVX512_SPR")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = Path(__file__).resolve().parent
CHECKSUMS = HERE / "checksums.sha256"
REQUIREMENTS = HERE / "requirements.txt"

OPSET = 17  # ai.onnx
ML_OPSET = 3  # ai.onnx.ml (LinearClassifier, ArrayFeatureExtractor, ...)
IR_VERSION = 8  # the IR version that goes with opset 17
PRODUCER = "switchyard-models"
PRODUCER_VERSION = "1"

N_FEATURES = 64
N_CLASSES = 10

# Data split and model hyper-parameters (changing any of them changes the bytes).
SPLIT_SEED = 0
TEST_SIZE = 0.25
CHEAP_C = 0.001  # strong L2: a calibrated-ish cheap model (~25-30% escalated at 0.8)
HEAVY_SEED = 0
SYNTH_HEAVY_SEED = 1234
SYNTH_WIDE_SEED = 5678

# synth-heavy: tokens, width, heads, MLP hidden, layers (~102 MFLOP/sample)
SH_T, SH_D, SH_H, SH_F, SH_L = 16, 256, 4, 1024, 4
# synth-wide: 64 -> W1 -> W2 -> 10
SW_H1, SW_H2 = 8192, 2048

CASCADE_THRESHOLD = 0.8
# The synthetic nets centre their input on this fixed value (the mean digit pixel is ~4.9)
# so that different inputs give different answers rather than one dominant class.
PIXEL_MEAN = 4.9
PIXEL_NORM = 48.0  # typical L2 norm of a centred digit
# Their heads are calibrated on the first N_CALIBRATION training digits (see _calibrated_head).
N_CALIBRATION = 256
SYNTH_LOGIT_STD = 2.5

FILES = [
    "digits-cheap.onnx",
    "digits-heavy.onnx",
    "synth-heavy.onnx",
    "synth-wide.onnx",
    "digits-test.npz",
    "digits-test.json",
]
MODEL_FILES = [f for f in FILES if f.endswith(".onnx")]


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- io


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _finish_model(model: onnx.ModelProto, name: str, doc: str) -> bytes:
    """Fix every field that could vary between runs or tool versions, check, serialize."""
    model.ir_version = IR_VERSION
    model.producer_name = PRODUCER
    model.producer_version = PRODUCER_VERSION
    model.domain = "dev.switchyard"
    model.model_version = 1
    model.doc_string = doc
    model.graph.name = name.replace("-", "_")
    model.graph.doc_string = ""
    for vi in list(model.graph.input) + list(model.graph.output):
        d0 = vi.type.tensor_type.shape.dim[0]
        if not d0.dim_value:
            d0.dim_param = "N"  # the dynamic batch dimension, named the same in every model
    del model.graph.value_info[:]  # inferred intermediate shapes (the version converter adds them)
    # skl2onnx collects opset imports in a set: their order follows Python's per-process
    # string hash seed. Sort them (ai.onnx first) so the bytes do not.
    imports = sorted(((o.domain, o.version) for o in model.opset_import), key=lambda dv: (dv[0] != "", dv[0]))
    del model.opset_import[:]
    for domain, version in imports:
        model.opset_import.append(helper.make_opsetid(domain, version))
    del model.metadata_props[:]
    for k, v in (
        ("switchyard.model", name),
        ("switchyard.contract", "X float32 [N,64] -> label int64 [N], probabilities float32 [N,10]"),
    ):
        p = model.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(model)
    assert {(o.domain or "ai.onnx"): o.version for o in model.opset_import}["ai.onnx"] == OPSET
    names_in = [i.name for i in model.graph.input]
    names_out = [o.name for o in model.graph.output]
    assert names_in == ["X"], names_in
    assert sorted(names_out) == ["label", "probabilities"], names_out
    return model.SerializeToString()


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like np.savez, but with a fixed timestamp in the zip (np.savez stamps 'now')."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, np.ascontiguousarray(arr), allow_pickle=False)
            zi = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_STORED
            zi.external_attr = 0o644 << 16
            zi.create_system = 3
            zf.writestr(zi, b.getvalue())
    _atomic_write(path, buf.getvalue())


# ----------------------------------------------------------------------- digits


def load_split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    y = y.astype(np.int64)
    return train_test_split(X, y, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=y)


def _to_onnx(clf, name: str, doc: str) -> bytes:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType

    onx = convert_sklearn(
        clf,
        name=name,
        initial_types=[("X", FloatTensorType([None, N_FEATURES]))],
        final_types=[
            ("label", Int64TensorType([None])),
            ("probabilities", FloatTensorType([None, N_CLASSES])),
        ],
        target_opset={"": OPSET, "ai.onnx.ml": ML_OPSET},
        options={id(clf): {"zipmap": False}},
    )
    # skl2onnx declares the smallest opset its operators need (9 or 16 here);
    # declare opset 17 like the other models (same operators, same outputs).
    from onnx import version_converter

    onx = version_converter.convert_version(onx, OPSET)
    return _finish_model(onx, name, doc)


def build_digits(out: Path, Xtr, ytr) -> None:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    t = time.perf_counter()
    cheap = LogisticRegression(C=CHEAP_C, max_iter=5000).fit(Xtr, ytr)
    _atomic_write(
        out / "digits-cheap.onnx",
        _to_onnx(
            cheap,
            "digits-cheap",
            f"LogisticRegression(C={CHEAP_C}) on sklearn load_digits (raw pixels 0..16), "
            f"train split test_size={TEST_SIZE} random_state={SPLIT_SEED}.",
        ),
    )
    log(f"  digits-cheap   trained+exported in {time.perf_counter() - t:.2f}s")

    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        heavy = MLPClassifier(hidden_layer_sizes=(512, 256), random_state=HEAVY_SEED, max_iter=200).fit(
            Xtr, ytr
        )
    _atomic_write(
        out / "digits-heavy.onnx",
        _to_onnx(
            heavy,
            "digits-heavy",
            f"MLPClassifier(hidden_layer_sizes=(512, 256), random_state={HEAVY_SEED}) on sklearn "
            f"load_digits (raw pixels 0..16), train split test_size={TEST_SIZE} "
            f"random_state={SPLIT_SEED}; {heavy.n_iter_} epochs.",
        ),
    )
    log(f"  digits-heavy   trained+exported in {time.perf_counter() - t:.2f}s ({heavy.n_iter_} epochs)")


def write_test_data(out: Path, Xte, yte) -> None:
    _write_npz(out / "digits-test.npz", {"X": Xte.astype(np.float32), "y": yte.astype(np.int64)})
    doc = {
        "description": "sklearn load_digits test split "
        f"(train_test_split test_size={TEST_SIZE}, random_state={SPLIT_SEED}, stratify=y)",
        "X_shape": [int(Xte.shape[0]), int(Xte.shape[1])],
        "X": [[float(v) for v in row] for row in Xte.astype(np.float32)],
        "y": [int(v) for v in yte],
    }
    _atomic_write(out / "digits-test.json", (json.dumps(doc, separators=(",", ":")) + "\n").encode())


# -------------------------------------------------------------- synthetic graphs


class GraphBuilder:
    """Small helper over onnx.helper with deterministic node/tensor names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.arrays: dict[str, np.ndarray] = {}
        self._n = 0

    def const(self, name: str, arr: np.ndarray) -> str:
        arr = np.ascontiguousarray(arr)
        self.arrays[name] = arr
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: list[str] | None = None, **attrs) -> str:
        self._n += 1
        name = f"{op_type.lower()}_{self._n}"
        outputs = outputs or [name]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, **attrs))
        return outputs[0]

    def linear(self, x: str, w: str, b: str | None) -> str:
        y = self.op("MatMul", [x, w])
        return self.op("Add", [y, b]) if b else y

    def head(self, logits: str) -> None:
        self.op("Softmax", [logits], ["probabilities"], axis=1)
        self.op("ArgMax", [logits], ["label"], axis=1, keepdims=0)  # int64

    def model(self, name: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", N_FEATURES])],
            [
                helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
                helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", N_CLASSES]),
            ],
            initializer=self.inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _normal(rng: np.random.Generator, shape, std: float) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def _calibrated_head(rng: np.random.Generator, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Random head whose logits, over calibration inputs, have zero mean per class and std
    SYNTH_LOGIT_STD, so that answers differ between inputs (no single dominant class) and
    the softmax is neither flat nor one-hot. Scale and bias are rounded so that last-bit
    differences in the numpy forward pass cannot change the bytes."""
    w = _normal(rng, (feats.shape[1], N_CLASSES), 1.0 / np.sqrt(feats.shape[1]))
    logits = feats.astype(np.float64) @ w.astype(np.float64)
    mu = logits.mean(0)
    scale = float(f"{SYNTH_LOGIT_STD / (logits - mu).std():.2g}")
    head_w = (w * np.float32(scale)).astype(np.float32)
    head_b = np.round(-mu * scale, 3).astype(np.float32)
    return head_w, head_b


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def _synth_heavy_features(W: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """numpy forward pass of synth-heavy up to the pooled features (for the head's calibration)."""
    from scipy.special import erf

    T, D, H, L = SH_T, SH_D, SH_H, SH_L
    Dh = D // H
    n = len(X)
    x = (X @ W["embed_w"] + W["embed_b"]).reshape(n, T, D) + W["pos"]
    for i in range(L):
        p = f"l{i}"
        h = _layer_norm(x, W[f"{p}_ln1_g"], W[f"{p}_ln1_b"])
        q, k, v = (
            (h @ W[f"{p}_w{t}"] + W[f"{p}_b{t}"]).reshape(n, T, H, Dh).transpose(0, 2, 1, 3) for t in "qkv"
        )
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(Dh)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(0, 2, 1, 3).reshape(n, T, D)
        x = x + o @ W[f"{p}_wo"] + W[f"{p}_bo"]
        h = _layer_norm(x, W[f"{p}_ln2_g"], W[f"{p}_ln2_b"])
        u = h @ W[f"{p}_w1"] + W[f"{p}_b1"]
        u = 0.5 * u * (1.0 + erf(u / np.sqrt(2.0)))
        x = x + u @ W[f"{p}_w2"] + W[f"{p}_b2"]
    return _layer_norm(x, W["final_ln_g"], W["final_ln_b"]).mean(1)


def synth_heavy_flops() -> int:
    T, D, F, L = SH_T, SH_D, SH_F, SH_L
    per_layer = 2 * T * D * 3 * D + 2 * 2 * T * T * D + 2 * T * D * D + 2 * 2 * T * D * F
    return 2 * N_FEATURES * T * D + L * per_layer + 2 * D * N_CLASSES


def build_synth_heavy(out: Path, Xcal: np.ndarray) -> None:
    """Pre-LN transformer encoder over 16 tokens made from the 64 inputs."""
    T, D, H, F, L = SH_T, SH_D, SH_H, SH_F, SH_L
    Dh = D // H
    rng = np.random.default_rng(SYNTH_HEAVY_SEED)
    g = GraphBuilder()
    c = g.const

    c("shape_tokens", np.array([-1, T, D], dtype=np.int64))
    c("shape_heads", np.array([0, 0, H, Dh], dtype=np.int64))
    c("shape_merge", np.array([0, 0, D], dtype=np.int64))
    c("attn_scale", np.array(1.0 / np.sqrt(Dh), dtype=np.float32))
    c("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    c("one", np.array(1.0, dtype=np.float32))
    c("half", np.array(0.5, dtype=np.float32))

    # Inputs are digit pixels 0..16: centre them (through the bias) and scale the
    # projection so that a typical digit gives unit-variance token features.
    w = _normal(rng, (N_FEATURES, T * D), 1.0 / PIXEL_NORM)
    c("embed_w", w)
    c("embed_b", (-PIXEL_MEAN * w.sum(0, dtype=np.float64) + _normal(rng, (T * D,), 0.02)).astype(np.float32))
    c("pos", _normal(rng, (T, D), 0.1))
    x = g.linear("X", "embed_w", "embed_b")
    x = g.op("Reshape", [x, "shape_tokens"])
    x = g.op("Add", [x, "pos"])

    resid_std = 1.0 / np.sqrt(2.0 * L)

    def layer_norm(x: str, p: str) -> str:
        c(f"{p}_g", (1.0 + _normal(rng, (D,), 0.05)).astype(np.float32))
        c(f"{p}_b", _normal(rng, (D,), 0.02))
        return g.op("LayerNormalization", [x, f"{p}_g", f"{p}_b"], axis=-1, epsilon=1e-5)

    for i in range(L):
        p = f"l{i}"
        # --- multi-head self-attention
        h = layer_norm(x, f"{p}_ln1")
        qkv = {}
        for k in ("q", "k", "v"):
            c(f"{p}_w{k}", _normal(rng, (D, D), 1.0 / np.sqrt(D)))
            c(f"{p}_b{k}", _normal(rng, (D,), 0.02))
            t = g.linear(h, f"{p}_w{k}", f"{p}_b{k}")
            qkv[k] = g.op("Reshape", [t, "shape_heads"])  # [N,T,H,Dh]
        q = g.op("Transpose", [qkv["q"]], perm=[0, 2, 1, 3])  # [N,H,T,Dh]
        kt = g.op("Transpose", [qkv["k"]], perm=[0, 2, 3, 1])  # [N,H,Dh,T]
        v = g.op("Transpose", [qkv["v"]], perm=[0, 2, 1, 3])  # [N,H,T,Dh]
        s = g.op("Mul", [g.op("MatMul", [q, kt]), "attn_scale"])  # [N,H,T,T]
        a = g.op("Softmax", [s], axis=-1)
        o = g.op("MatMul", [a, v])  # [N,H,T,Dh]
        o = g.op("Reshape", [g.op("Transpose", [o], perm=[0, 2, 1, 3]), "shape_merge"])  # [N,T,D]
        c(f"{p}_wo", _normal(rng, (D, D), resid_std / np.sqrt(D)))
        c(f"{p}_bo", _normal(rng, (D,), 0.02))
        x = g.op("Add", [x, g.linear(o, f"{p}_wo", f"{p}_bo")])
        # --- MLP with exact (erf) GELU
        h = layer_norm(x, f"{p}_ln2")
        c(f"{p}_w1", _normal(rng, (D, F), np.sqrt(2.0 / D)))
        c(f"{p}_b1", _normal(rng, (F,), 0.02))
        c(f"{p}_w2", _normal(rng, (F, D), resid_std / np.sqrt(F)))
        c(f"{p}_b2", _normal(rng, (D,), 0.02))
        u = g.linear(h, f"{p}_w1", f"{p}_b1")
        e = g.op("Add", [g.op("Erf", [g.op("Div", [u, "sqrt2"])]), "one"])
        u = g.op("Mul", [g.op("Mul", [u, e]), "half"])
        x = g.op("Add", [x, g.linear(u, f"{p}_w2", f"{p}_b2")])

    x = layer_norm(x, "final_ln")
    pooled = g.op("ReduceMean", [x], axes=[1], keepdims=0)  # [N,D]
    head_w, head_b = _calibrated_head(rng, _synth_heavy_features(g.arrays, Xcal))
    c("head_w", head_w)
    c("head_b", head_b)
    g.head(g.linear(pooled, "head_w", "head_b"))

    doc = (
        f"Synthetic compute-bound transformer-like stack (random weights, seed {SYNTH_HEAVY_SEED}): "
        f"64 -> {T} tokens x {D}, {L} pre-LN layers of {H}-head self-attention + GELU MLP {D}-{F}-{D}, "
        f"mean pool, linear head. ~{synth_heavy_flops() / 1e6:.1f} MFLOP per sample. Labels are arbitrary."
    )
    _atomic_write(out / "synth-heavy.onnx", _finish_model(g.model("synth-heavy"), "synth-heavy", doc))


def synth_wide_params() -> int:
    return N_FEATURES * SW_H1 + SW_H1 + SW_H1 * SW_H2 + SW_H2 + SW_H2 * N_CLASSES + N_CLASSES


def build_synth_wide(out: Path, Xcal: np.ndarray) -> None:
    """Memory-bound: ~17M weights, 2 FLOP per weight per sample."""
    rng = np.random.default_rng(SYNTH_WIDE_SEED)
    g = GraphBuilder()
    c = g.const
    w1 = _normal(rng, (N_FEATURES, SW_H1), np.sqrt(2.0) / PIXEL_NORM)
    c("w1", w1)  # centre the 0..16 pixels through the bias, as in synth-heavy
    c("b1", (-PIXEL_MEAN * w1.sum(0, dtype=np.float64) + _normal(rng, (SW_H1,), 0.1)).astype(np.float32))
    c("w2", _normal(rng, (SW_H1, SW_H2), np.sqrt(2.0 / SW_H1)))
    c("b2", _normal(rng, (SW_H2,), 0.1))
    A = g.arrays
    feats = np.maximum(np.maximum(Xcal @ A["w1"] + A["b1"], 0) @ A["w2"] + A["b2"], 0)
    w3, b3 = _calibrated_head(rng, feats)
    c("w3", w3)
    c("b3", b3)
    h = g.op("Relu", [g.linear("X", "w1", "b1")])
    h = g.op("Relu", [g.linear(h, "w2", "b2")])
    g.head(g.linear(h, "w3", "b3"))
    doc = (
        f"Synthetic memory-bound wide MLP (random weights, seed {SYNTH_WIDE_SEED}): "
        f"64 -> {SW_H1} -> {SW_H2} -> 10, Relu. {synth_wide_params() / 1e6:.1f}M fp32 parameters, "
        "2 FLOP per weight per sample: batching amortizes the weight reads. Labels are arbitrary."
    )
    _atomic_write(out / "synth-wide.onnx", _finish_model(g.model("synth-wide"), "synth-wide", doc))


# ------------------------------------------------------------------ evaluation


def _session(path: Path, threads: int = 1):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def evaluate(out: Path, Xte, yte) -> dict:
    res = {}
    outs = {}
    for name in ("digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"):
        sess = _session(out / f"{name}.onnx")
        label, prob = sess.run(["label", "probabilities"], {"X": Xte})
        assert label.dtype == np.int64 and label.shape == (len(Xte),), (label.dtype, label.shape)
        assert prob.dtype == np.float32 and prob.shape == (len(Xte), N_CLASSES), (prob.dtype, prob.shape)
        assert np.array_equal(label, prob.argmax(1)), name
        outs[name] = (label, prob)
    for name in ("digits-cheap", "digits-heavy"):
        res[f"{name}.accuracy"] = float((outs[name][0] == yte).mean())
    cl, cp = outs["digits-cheap"]
    hl, _ = outs["digits-heavy"]
    confident = cp.max(1) >= CASCADE_THRESHOLD
    casc = np.where(confident, cl, hl)
    res["cascade.threshold"] = CASCADE_THRESHOLD
    res["cascade.accuracy"] = float((casc == yte).mean())
    res["cascade.escalated_share"] = float(1.0 - confident.mean())
    for name in ("synth-heavy", "synth-wide"):
        lab, prob = outs[name]
        res[f"{name}.mean_max_prob"] = float(prob.max(1).mean())
        res[f"{name}.distinct_labels"] = int(len(np.unique(lab)))
    return res


def bench(out: Path, Xte, seconds: float = 1.0) -> dict:
    """Per-sample latency at batch 1 and 32, onnxruntime CPU, 1 intra-op thread."""
    res = {}
    for name in ("digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"):
        sess = _session(out / f"{name}.onnx", threads=1)
        for bs in (1, 32):
            X = np.ascontiguousarray(np.resize(Xte, (bs, N_FEATURES)).astype(np.float32))
            for _ in range(3):
                sess.run(None, {"X": X})
            best = []
            for _rep in range(3):  # best of 3 windows: the machine is shared
                n, t0 = 0, time.perf_counter()
                while True:
                    sess.run(None, {"X": X})
                    n += 1
                    dt = time.perf_counter() - t0
                    if dt >= seconds / 3 and n >= 3:
                        break
                best.append(dt / n)
            res[f"{name}.b{bs}_ms_per_batch"] = min(best) * 1e3
            res[f"{name}.b{bs}_ms_per_sample"] = min(best) * 1e3 / bs
        res[f"{name}.b32_vs_b1_throughput"] = res[f"{name}.b1_ms_per_sample"] / res[f"{name}.b32_ms_per_sample"]
    return res


# ------------------------------------------------------------------- checksums


def read_pins() -> dict[str, str]:
    pins = {}
    if CHECKSUMS.exists():
        for line in CHECKSUMS.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                digest, name = line.split(maxsplit=1)
                pins[name.lstrip("*")] = digest
    return pins


def write_pins(out: Path) -> None:
    lines = [f"{sha256_file(out / f)}  {f}" for f in FILES]
    CHECKSUMS.write_text("\n".join(lines) + "\n")
    log(f"pinned {len(lines)} checksums in {CHECKSUMS}")


def compare(out: Path, pins: dict[str, str]) -> list[str]:
    problems = []
    if not pins:
        return [f"no pinned checksums ({CHECKSUMS} missing or empty)"]
    for f in FILES:
        p = out / f
        if f not in pins:
            problems.append(f"{f}: not pinned in {CHECKSUMS.name}")
        elif not p.exists():
            problems.append(f"{f}: missing in {out}")
        else:
            got = sha256_file(p)
            if got != pins[f]:
                problems.append(f"{f}: sha256 {got} != pinned {pins[f]}")
    return problems


def version_drift() -> list[str]:
    """Installed versions that differ from models/requirements.txt (they change the bytes)."""
    from importlib.metadata import PackageNotFoundError, version

    drift = []
    if not REQUIREMENTS.exists():
        return drift
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" not in line:
            continue
        pkg, want = (s.strip() for s in line.split("==", 1))
        pkg = pkg.split("[", 1)[0]
        try:
            have = version(pkg)
        except PackageNotFoundError:
            have = "not installed"
        if have != want:
            drift.append(f"{pkg} {have} (pinned {want})")
    return drift


def explain_mismatch(problems: list[str]) -> str:
    lines = ["CHECKSUM MISMATCH:"] + [f"  - {p}" for p in problems]
    drift = version_drift()
    if drift:
        lines.append("  installed versions differ from models/requirements.txt: " + ", ".join(drift))
    lines.append(
        f"  platform: {platform.machine()} / Python {platform.python_version()}. The pins were made "
        "on x86-64 (AVX2 kernels forced) with the versions in models/requirements.txt; other "
        "versions or CPU architectures give different (still valid) bytes. If the change is "
        "deliberate, re-pin with: python models/generate.py --update-checksums"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------ main


def generate(out: Path, bench_models: bool = False) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    Xtr, Xte, ytr, yte = load_split()
    log(f"generating into {out} (train {len(Xtr)}, test {len(Xte)})")
    build_digits(out, Xtr, ytr)
    t = time.perf_counter()
    build_synth_heavy(out, Xtr[:N_CALIBRATION])
    log(f"  synth-heavy    built in {time.perf_counter() - t:.2f}s ({synth_heavy_flops() / 1e6:.1f} MFLOP/sample)")
    t = time.perf_counter()
    build_synth_wide(out, Xtr[:N_CALIBRATION])
    log(f"  synth-wide     built in {time.perf_counter() - t:.2f}s ({synth_wide_params() / 1e6:.1f}M params)")
    write_test_data(out, Xte, yte)
    gen_s = time.perf_counter() - t0
    log(f"generation took {gen_s:.1f}s")
    for f in FILES:
        log(f"  {f:20s} {(out / f).stat().st_size / 1e6:9.2f} MB")

    res = evaluate(out, Xte, yte)
    res["generation_s"] = gen_s
    log(
        f"test accuracy: digits-cheap {res['digits-cheap.accuracy']:.4f}, "
        f"digits-heavy {res['digits-heavy.accuracy']:.4f}"
    )
    log(
        f"cascade (cheap if max prob >= {CASCADE_THRESHOLD} else heavy): accuracy "
        f"{res['cascade.accuracy']:.4f}, escalated {res['cascade.escalated_share'] * 100:.1f}%"
    )
    log(
        f"synthetic outputs on the digits test set: synth-heavy mean max prob "
        f"{res['synth-heavy.mean_max_prob']:.3f} ({res['synth-heavy.distinct_labels']} labels seen), "
        f"synth-wide {res['synth-wide.mean_max_prob']:.3f} ({res['synth-wide.distinct_labels']} labels seen)"
    )
    if bench_models:
        b = bench(out, Xte)
        res.update(b)
        log("onnxruntime CPU, 1 intra-op thread (best of 3 windows):")
        for name in ("digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"):
            log(
                f"  {name:13s} batch 1: {b[f'{name}.b1_ms_per_sample']:8.3f} ms/sample   "
                f"batch 32: {b[f'{name}.b32_ms_per_sample']:8.3f} ms/sample   "
                f"(batch of 32: {b[f'{name}.b32_ms_per_batch']:.2f} ms)   "
                f"b32/b1 throughput x{b[f'{name}.b32_vs_b1_throughput']:.1f}"
            )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: models/)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare with the pins")
    mode.add_argument("--verify", action="store_true", help="only hash the files in --out against the pins")
    mode.add_argument("--update-checksums", action="store_true", help="generate into --out and re-pin")
    ap.add_argument("--bench", action="store_true", help="also time each model (onnxruntime, 1 thread)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when generated files differ from the pins")
    args = ap.parse_args(argv)
    pins = read_pins()

    if args.verify:
        problems = compare(args.out, pins)
        if problems:
            print(explain_mismatch(problems), file=sys.stderr)
            return 1
        log(f"OK: {len(FILES)} files in {args.out} match {CHECKSUMS.name}")
        return 0

    if args.check:
        tmp = Path(tempfile.mkdtemp(prefix="switchyard-models-check-"))
        try:
            generate(tmp, bench_models=args.bench)
            problems = compare(tmp, pins)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if problems:
            print(explain_mismatch(problems), file=sys.stderr)
            return 1
        log(f"OK: regenerated files match all {len(FILES)} pinned checksums")
        return 0

    generate(args.out, bench_models=args.bench)
    if args.update_checksums:
        write_pins(args.out)
        return 0
    problems = compare(args.out, pins)
    if problems:
        msg = explain_mismatch(problems)
        print(("ERROR: " if args.strict else "WARNING: ") + msg, file=sys.stderr)
        return 1 if args.strict else 0
    log(f"checksums: all {len(FILES)} files match {CHECKSUMS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
