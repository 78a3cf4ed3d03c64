"""The README's `openai` SDK call, run as written against the gateway
serving `deploy/examples/text-embeddings.toml` (what `make run-text`
serves; only the port differs): it prints the route, 384 dimensions, the
tokens the tokenizer counted and the two sentences' cosine similarity,
which equals the Python reference's."""

import re
import subprocess
import sys

import numpy as np
from tokenizers import Tokenizer

from conftest import REPO, Gateway
from test_openai_embeddings import pytestmark  # noqa: F401 (skips without the text models)
from test_text import Reference

SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument."]


def readme_openai_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    found = [b for b in blocks if "embeddings.create" in b]
    assert len(found) == 1, "the README shows one openai SDK call"
    return found[0]


def test_the_readmes_openai_call_works_against_the_run_text_config():
    snippet = readme_openai_snippet()
    assert 'base_url="http://127.0.0.1:8000/v1"' in snippet, "the address make run-text listens on"
    gw = Gateway(config=REPO / "deploy/examples/text-embeddings.toml")
    try:
        code = snippet.replace("http://127.0.0.1:8000/v1", f"{gw.base}/v1")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    finally:
        gw.stop()
    assert out.returncode == 0, out.stderr
    model, dims, tokens, cosine = out.stdout.split()
    assert (model, int(dims)) == ("minilm", 384)
    tokenizer = Tokenizer.from_file(str(REPO / "models/minilm-tokenizer.json"))
    tokenizer.no_padding()
    assert int(tokens) == sum(len(tokenizer.encode(s).ids) for s in SENTENCES) == 9 + 7
    want = Reference().embed("minilm-l6", SENTENCES)
    assert abs(float(cosine) - float(np.dot(want[0], want[1]))) < 2e-3, "L6 answers an unhurried call"
