"""Claims of the documentation (once the README, now the book under
docs/src) held by a test each (issue 38, item 5), against the real
binary: the admin token rotated by a reload; a console route edit on a
read-only config file answered with the diff, not applied; the gRPC calls
Switchyard does not serve answering UNIMPLEMENTED; and every `endpoint`
label value of the request metrics listed on the Metrics page
(docs/src/reference/metrics.md)."""

import re
import stat

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import REPO, Gateway
from routing_util import DIGITS_MODELS, write_config

OLD_TOKEN = "old-admin-token-0123456789"
NEW_TOKEN = "new-admin-token-9876543210"
NO_ENV_TOKEN = {"SWITCHYARD_ADMIN_TOKEN": ""}  # the variable would win over the file

CASCADE = DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
"""


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_a_reload_rotates_the_admin_token(tmp_path):
    """docs/src/reference/admin-api.md: "The token can be rotated by a reload"."""
    config = write_config(tmp_path, f'[admin]\ntoken = "{OLD_TOKEN}"\n[reload]\nwatch = false\n' + CASCADE)
    gw = Gateway(config=config, env=NO_ENV_TOKEN)
    try:
        assert requests.get(f"{gw.admin}/admin/stats", headers=bearer(OLD_TOKEN), timeout=10).status_code == 200
        config.write_text(config.read_text().replace(OLD_TOKEN, NEW_TOKEN))
        r = requests.post(f"{gw.admin}/admin/reload", headers=bearer(OLD_TOKEN), timeout=60)
        assert r.status_code == 200, r.text
        old = requests.get(f"{gw.admin}/admin/stats", headers=bearer(OLD_TOKEN), timeout=10)
        assert old.status_code == 401, old.text
        assert requests.get(f"{gw.admin}/admin/stats", headers=bearer(NEW_TOKEN), timeout=10).status_code == 200
        assert OLD_TOKEN not in gw.log_text() and NEW_TOKEN not in gw.log_text()
    finally:
        gw.stop()


def test_a_route_edit_on_a_read_only_config_file_answers_with_the_diff(tmp_path):
    """docs/src/how-to/console.md: a gateway "whose file is read-only ... answers with
    the diff to apply where the config is kept". The file is replaced by a
    rename, which only the folder's permissions rule, so a read-only file
    in a writable folder was overwritten and reloaded."""
    config = write_config(tmp_path, CASCADE)
    text = config.read_text()
    config.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    gw = Gateway(config=config)
    try:
        r = requests.post(f"{gw.admin}/admin/config/edit", timeout=60,
                          json={"route": "digits", "threshold": 0.6, "apply": True})
        assert r.status_code == 409, r.text
        answer = r.json()
        assert answer["applied"] is False and "read-only" in answer["error"], answer
        assert "+policy = " in answer["diff"] and "threshold = 0.6" in answer["diff"], answer["diff"]
        assert config.read_text() == text
        assert stat.S_IMODE(config.stat().st_mode) == 0o444
        doc = requests.get(f"{gw.admin}/admin/config", timeout=10).json()
        assert doc["generation"] == 1, doc
    finally:
        gw.stop()
        config.chmod(0o644)


UNSERVED = [
    ("get_model_repository_index", {}),
    ("load_model", {"model_name": "digits-cheap"}),
    ("unload_model", {"model_name": "digits-cheap"}),
    ("get_system_shared_memory_status", {}),
    ("register_system_shared_memory", {"name": "region", "key": "/switchyard-test", "byte_size": 64}),
    ("unregister_system_shared_memory", {}),
    ("get_cuda_shared_memory_status", {}),
    ("register_cuda_shared_memory", {"name": "region", "raw_handle": b"\0" * 64, "device_id": 0,
                                     "byte_size": 64}),
    ("unregister_cuda_shared_memory", {}),
    ("get_trace_settings", {}),
    ("update_trace_settings", {"settings": {"trace_level": ["TIMESTAMPS"]}}),
    ("get_log_settings", {}),
    ("update_log_settings", {"settings": {"log_info": True}}),
]


@pytest.fixture(scope="module")
def grpc_gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("claims"), METRICS_CONFIG),
                 extra_args=["--grpc-listen", "127.0.0.1:0"])
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def grpc_client(grpc_gw):
    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{grpc_gw.grpc_port}")
    yield client
    client.close()


@pytest.mark.parametrize("call,kwargs", UNSERVED, ids=[c for c, _ in UNSERVED])
def test_unserved_grpc_calls_answer_unimplemented(grpc_client, call, kwargs):
    """docs/src/reference/grpc-api.md: repository control, shared memory (system and CUDA)
    and trace/log settings answer UNIMPLEMENTED."""
    with pytest.raises(InferenceServerException) as e:
        getattr(grpc_client, call)(**kwargs)
    assert e.value.status() == "StatusCode.UNIMPLEMENTED", (call, e.value.status(), e.value.message())


METRICS_CONFIG = CASCADE + """
[[upstreams]]
name = "app"
addrs = ["127.0.0.1:1"]

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
"""


METRICS_PAGE = REPO / "docs" / "src" / "reference" / "metrics.md"


def documented_endpoint_labels() -> set:
    """The `endpoint` values the Metrics page lists."""
    text = METRICS_PAGE.read_text()
    listed = re.search(r"`endpoint` is one of (.*?);\s+`status`", text, re.S)
    assert listed, f"{METRICS_PAGE} no longer says which values `endpoint` takes"
    return set(re.findall(r"`([a-z_]+)`", listed.group(1)))


def x_input(n=1):
    x = np.random.default_rng(5).uniform(0, 16, size=(n, 64)).astype(np.float32)
    i = grpcclient.InferInput("X", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def test_every_endpoint_label_is_on_the_metrics_page(grpc_gw, grpc_client):
    """Every REST endpoint, a prefix route, a path that is none of them,
    the OpenAI-compatible API and every gRPC call are made; the `endpoint` values they leave in
    `/metrics` are exactly the Metrics page's list."""
    base = grpc_gw.base
    body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": [1.0] * 64}]}
    for path in ["/v2", "/v2/health/live", "/v2/models/digits", "/v2/models/digits/ready",
                 "/v2/models/digits/config", "/v2/models/digits/stats", "/favicon.ico", "/apps/app/x"]:
        requests.get(f"{base}{path}", timeout=30)
    assert requests.post(f"{base}/v2/models/digits/infer", json=body, timeout=30).status_code == 200
    # The OpenAI-compatible API (digits is no text model: a 400, labelled all the same).
    assert requests.get(f"{base}/v1/models", timeout=30).status_code == 200
    assert requests.post(f"{base}/v1/embeddings", json={"model": "digits", "input": "a"}, timeout=30).status_code == 400
    c = grpc_client
    c.is_server_live(), c.is_model_ready("digits"), c.get_server_metadata(), c.get_model_metadata("digits")
    c.get_model_config("digits"), c.get_inference_statistics("digits"), c.infer("digits", [x_input()])
    answers = []
    c.start_stream(callback=lambda result, error: answers.append((result, error)))
    c.async_stream_infer("digits", [x_input()])
    c.stop_stream()
    assert answers and all(error is None for _, error in answers), answers  # a draft, then the final
    metrics = requests.get(f"{grpc_gw.admin}/metrics", timeout=10).text
    seen = set(re.findall(r'^switchyard_requests_total\{[^}]*endpoint="([^"]+)"', metrics, re.M))
    listed = documented_endpoint_labels()
    assert seen - listed == set(), f"endpoint labels missing from the Metrics page: {sorted(seen - listed)}"
    assert listed - seen == set(), f"the Metrics page lists endpoints no call made: {sorted(listed - seen)}"
