"""LangChain's `OpenAIEmbeddings` and LlamaIndex's `OpenAIEmbedding`,
unmodified (their own venv, `.venv-embed-clients`, run through
openai_clients.py), pointed at the gateway's `/v1` with `base_url`: their
document and query vectors equal the Python reference (test_text.Reference)."""

import json
import subprocess

import numpy as np
import pytest

from conftest import REPO, Gateway
from test_openai_embeddings import TEXTS, config_text, pytestmark  # noqa: F401 (skips without the text models)
from test_text import ATOL, Reference

VENV = REPO / ".venv-embed-clients"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    folder = tmp_path_factory.mktemp("openai-clients")
    path = folder / "gw.toml"
    path.write_text(config_text(folder))
    gw = Gateway(config=path)
    yield gw
    gw.stop()


def embed(client, gateway, model, texts):
    python = VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{VENV.name} is missing: run `scripts/setup.sh test` (part of `make test`)")
    out = subprocess.run([str(python), str(REPO / "gateway/tests/python/openai_clients.py"), client,
                          f"{gateway.base}/v1", model], input=json.dumps(texts), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("client", ["langchain", "llamaindex"])
def test_clients_embed_like_the_reference(gateway, client):
    got = embed(client, gateway, "minilm-l6", TEXTS)
    want = Reference().embed("minilm-l6", TEXTS)
    np.testing.assert_allclose(np.array(got["documents"], dtype=np.float32), want, atol=ATOL, rtol=0)
    np.testing.assert_allclose(np.array(got["query"], dtype=np.float32), want[0], atol=ATOL, rtol=0)
