"""Spec-driven API testing: Schemathesis holds the real gateway to
gateway/openapi/open-inference-protocol.yaml (the Open Inference Protocol
REST API as Switchyard documents it).

Two runs over every operation of the document, against the real binary
serving the bundled example models (the embedded default config):

* `test_conforms_to_spec`: the document as committed, with valid and
  invalid data (examples, coverage and fuzzing phases, settings in
  gateway/openapi/schemathesis.toml, deterministic). Checks: no 5xx; every
  status, content type, header and body is one the document declares;
  invalid data is refused with a 4xx; undocumented methods get 405 with
  `Allow`. Model names come from the document's example (`digits`), from
  what Schemathesis learns from earlier responses, and from random
  strings (404s).
* `test_conforms_with_real_models`: the same document with the path
  parameters narrowed to the served names and versions and the body to the
  example models' signature (`X`: FP32 `[N, 64]`, outputs `label` and
  `probabilities` with their binary, classification, stream and budget
  options). Every case is then a valid request, and must be answered 2xx
  (`positive_data_acceptance`) with a conforming body: random bodies alone
  almost never fit a real signature, so without this run `infer` would be
  tested mostly through its 400s. The narrowing (openapi_util.model_aware)
  is applied here, not in the document, which describes any deployment.

Then the process must still be alive and answer a real inference
correctly, and every operation must have been exercised (case counts).

Where the document deliberately differs from KServe's published one, and
where the server accepts more than the protocol's text, is tabled in
gateway/openapi/README.md.
"""

import collections
import json

import numpy as np
import pytest
import requests
import schemathesis
from schemathesis.config import SchemathesisConfig

from conftest import MODELS, Gateway
from openapi_util import load_spec, model_aware, model_aware_settings, settings
from routing_util import Reference, infer_body, output

# Cases per operation in the fuzzing phase (the examples and coverage
# phases add their own: 10 for a bare GET, ~240 for infer).
MAX_EXAMPLES = 200
MODEL_AWARE_EXAMPLES = 100

INFER_OPERATIONS = {"POST /v2/models/{model_name}/infer",
                    "POST /v2/models/{model_name}/versions/{model_version}/infer"}

# (run, operation label) -> Counter of response statuses, filled as cases run.
SEEN = collections.defaultdict(collections.Counter)

# Reproducible in CI: the same cases every run (Hypothesis' derandomize).
schema = schemathesis.openapi.from_dict(
    load_spec(),
    config=SchemathesisConfig.from_dict(settings(generation={"max-examples": MAX_EXAMPLES, "deterministic": True})),
)
model_settings = model_aware_settings(MODEL_AWARE_EXAMPLES)
model_settings["generation"]["deterministic"] = True
real_models = schemathesis.openapi.from_dict(
    model_aware(load_spec()), config=SchemathesisConfig.from_dict(model_settings),
).include(path_regex="^/v2/models/")  # the bare GETs have nothing to narrow


@pytest.fixture(scope="module")
def gw():
    """The real binary on the example models, for this module alone (the
    fuzzing must not disturb other tests' shared gateway)."""
    g = Gateway()
    yield g
    g.stop()


def run(name, case, gw):
    try:
        response = case.call_and_validate(base_url=gw.base)
    except requests.RequestException as exc:  # a reset or a stall is a failure too
        pytest.fail(f"{case.method} {case.formatted_path}: no answer ({exc}); server alive: {gw.alive()}")
    SEEN[(name, case.operation.label)][response.status_code] += 1


@schema.parametrize()
def test_conforms_to_spec(case, gw):
    run("spec", case, gw)


@real_models.parametrize()
def test_conforms_with_real_models(case, gw):
    run("real-models", case, gw)


def summary() -> str:
    lines = [f"{'run':12} {'operation':62} {'cases':>5}  statuses"]
    for (name, label), statuses in sorted(SEEN.items()):
        counts = ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items()))
        lines.append(f"{name:12} {label:62} {sum(statuses.values()):5}  {counts}")
    return "\n".join(lines)


def test_every_operation_exercised_without_5xx(gw):
    """The runs above reached every operation with many cases, answered
    none with a 5xx, and really ran inference. (Runs after them: pytest
    keeps file order.)"""
    print("\n" + summary())
    labels = {op.ok().label for op in schema.get_all_operations()}
    assert len(labels) == 11
    for label in labels:
        # A bare GET has only a handful of distinct cases (no parameters, no body).
        if "{model_name}" in label:
            runs = (("spec", MAX_EXAMPLES // 2), ("real-models", MODEL_AWARE_EXAMPLES // 2))
        else:
            runs = (("spec", 3),)
        for name, wanted in runs:
            statuses = SEEN[(name, label)]
            assert sum(statuses.values()) >= wanted, f"{name} {label}: {dict(statuses)}\n{summary()}"
    server_errors = {key: s for key, c in SEEN.items() for s in c if s >= 500}
    assert not server_errors, summary()
    for label in INFER_OPERATIONS:
        ok = SEEN[("real-models", label)][200]
        assert ok >= MODEL_AWARE_EXAMPLES // 2, f"{label}: only {ok} answers 200\n{summary()}"
        statuses = SEEN[("spec", label)]
        assert statuses[400] > 0 and statuses[404] > 0, f"{label}: {dict(statuses)}"


def test_alive_and_correct_afterwards(gw):
    assert gw.alive()
    assert requests.get(f"{gw.base}/v2/health/live", timeout=10).status_code == 200
    assert requests.get(f"{gw.base}/v2/health/ready", timeout=10).status_code == 200
    x = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"][:8], np.float32)
    label, probs = Reference("digits-heavy").run("digits-heavy", x)
    resp = requests.post(f"{gw.base}/v2/models/digits-heavy/infer", json=infer_body(x), timeout=30)
    assert resp.status_code == 200, resp.text
    assert output(resp.json(), "label") == label.tolist()
    np.testing.assert_allclose(np.asarray(output(resp.json(), "probabilities")).reshape(-1, 10), probs,
                               rtol=1e-5, atol=1e-6)
