"""A client certificate as a tenant (issue 40, item 1: mTLS as an
alternative to API keys) against the real binary, with certificates made
by the test: a route lists `{ client_cert_cn = "svc-a", tenant = "team-a" }`
beside its keys; on a listener with `client_ca`, a request without a key
from a client whose verified certificate has that CN is team-a's (its
tenant limits and its share of the cache apply), one whose CN the route
does not list gets 401 as a wrong key does, and a presented key still
wins. Over HTTP/1.1, HTTP/2 and gRPC."""

import ssl

import httpx
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import MODELS, Gateway
from routing_util import infer_body
from tls_util import issue, make_ca

KEY = "key-of-team-k-0123456789abcdef"

CONFIG = """
[server]
tls = {{ cert = "{cert}", key = "{key}", client_ca = "{client_ca}" }}
grpc_listen = "127.0.0.1:0"
grpc_tls = {{ cert = "{cert}", key = "{key}", client_ca = "{client_ca}" }}

[cache]
l1_max_bytes = "16MiB"

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
budget_ms = {{ default = 10000, max = 20000 }}
auth = {{ keys = [{{ client_cert_cn = "svc-a", tenant = "team-a" }}, {{ client_cert_cn = "svc-g", tenant = "team-g" }}, {{ key = "{api_key}", tenant = "team-k" }}] }}

[[tenants]]
name = "team-a"
limits = {{ requests_per_day = 4 }}
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("mtls")
    root, client_ca = make_ca("switchyard test root"), make_ca("switchyard test client CA")
    cert, key = issue(root, "gateway").write(d, "server")
    files = {
        "root": str(root.write_cert(d / "root.pem")),
        "svc-a": tuple(map(str, issue(client_ca, "svc-a", hosts=(), client=True).write(d, "svc-a"))),
        "svc-b": tuple(map(str, issue(client_ca, "svc-b", hosts=(), client=True).write(d, "svc-b"))),
        "svc-g": tuple(map(str, issue(client_ca, "svc-g", hosts=(), client=True).write(d, "svc-g"))),
    }
    config = d / "switchyard.toml"
    config.write_text(CONFIG.format(cert=cert, key=key, client_ca=client_ca.write_cert(d / "client-ca.pem"),
                                    models=MODELS, api_key=KEY))
    gw = Gateway(config, tls_ca=files["root"], client_cert=files["svc-a"])
    yield gw, files
    gw.stop()


def infer(gw, files, who, seed, headers=None):
    x = np.random.default_rng(seed).uniform(0, 16, size=(1, 64)).astype(np.float32)
    return requests.post(f"{gw.base}/v2/models/digits/infer", json=infer_body(x), headers=headers or {},
                         verify=str(files["root"]), cert=files[who], timeout=30)


def test_a_listed_certificate_is_its_tenant_and_another_is_401(setup):
    gw, files = setup
    first = infer(gw, files, "svc-a", 1)
    assert first.status_code == 200, first.text
    assert first.headers["x-cache"] == "miss"
    assert first.headers["ratelimit"] == '"daily";r=3;t=' + first.headers["ratelimit"].rsplit("t=", 1)[1], \
        "team-a's quota applies to the certificate's requests"
    again = infer(gw, files, "svc-a", 1)
    assert (again.status_code, again.headers["x-cache"]) == (200, "hit-l1")
    stranger = infer(gw, files, "svc-b", 1)
    assert stranger.status_code == 401, stranger.text
    assert "svc-b" in stranger.json()["error"]
    with_key = infer(gw, files, "svc-b", 1, headers={"x-api-key": KEY})
    assert with_key.status_code == 200, "a key still works on an mTLS listener"
    assert with_key.headers["x-cache"] == "miss", "team-k does not see team-a's cached answer"
    wrong_key = infer(gw, files, "svc-a", 1, headers={"x-api-key": KEY[:-1] + "0"})
    assert wrong_key.status_code == 401, "a presented key wins over the certificate"


def test_the_certificates_tenant_holds_over_http2_and_its_quota_runs_out(setup):
    gw, files = setup
    ctx = ssl.create_default_context(cafile=files["root"])
    ctx.load_cert_chain(*files["svc-a"])
    with httpx.Client(http2=True, verify=ctx, timeout=30) as client:
        answers = []
        for seed in range(10, 16):
            x = np.random.default_rng(seed).uniform(0, 16, size=(1, 64)).astype(np.float32)
            r = client.post(f"{gw.base}/v2/models/digits/infer", json=infer_body(x))
            assert r.http_version == "HTTP/2"
            answers.append(r)
    codes = [r.status_code for r in answers]
    assert codes[0] == 200, answers[0].text
    # 4 a day: the first answer says how many are left; then 429s.
    left = int(answers[0].headers["ratelimit"].split(";r=")[1].split(";")[0])
    assert codes == [200] * (left + 1) + [429] * (len(codes) - left - 1), codes
    assert answers[-1].headers["ratelimit"].startswith('"daily";r=0;t='), answers[-1].headers


def test_grpc_calls_take_the_certificates_tenant_too(setup):
    gw, files = setup
    x = np.random.default_rng(99).uniform(0, 16, size=(1, 64)).astype(np.float32)

    def call(who):
        cert, key = files[who]
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{gw.grpc_port}", ssl=True, root_certificates=files["root"],
                                                  private_key=key, certificate_chain=cert)
        try:
            inp = grpcclient.InferInput("X", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            return client.infer("digits", [inp], client_timeout=30)
        finally:
            client.close()

    with pytest.raises(InferenceServerException) as refused:
        call("svc-b")
    assert "svc-b" in str(refused.value) and "UNAUTHENTICATED" in str(refused.value), refused.value
    assert call("svc-g").as_numpy("label").shape == (1,)
