"""The V2 OpenAPI document and Schemathesis settings, shared by
test_openapi_schemathesis.py and the long CLI run (gateway/openapi/long_run.py):
the document as committed, its model-aware narrowing, the settings file
with overrides, and a reader of Schemathesis' NDJSON report."""

import collections
import copy
import json
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
OPENAPI = REPO / "gateway" / "openapi"
SPEC_PATH = OPENAPI / "open-inference-protocol.yaml"
SETTINGS_PATH = OPENAPI / "schemathesis.toml"

# What the embedded default config serves: every name has version 1 and the
# example models' contract (models/README.md): X FP32 [N, 64] -> label
# INT64 [N], probabilities FP32 [N, 10].
SERVED = ["digits", "digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"]


def load_spec() -> dict:
    return yaml.safe_load(SPEC_PATH.read_text())


def load_settings() -> dict:
    return tomllib.loads(SETTINGS_PATH.read_text())


def settings(generation=None, checks=None) -> dict:
    """The settings file as a dict, with `[generation]` and `[checks]` keys
    overridden."""
    data = load_settings()
    data["generation"].update(generation or {})
    data["checks"].update(checks or {})
    return data


def model_aware_settings(max_examples: int) -> dict:
    """Valid data only, each case of which must be accepted with a 2xx."""
    return settings(
        generation={"mode": "positive", "max-examples": max_examples},
        checks={"positive_data_acceptance": {"enabled": True, "expected-statuses": ["2xx"]}},
    )


def model_aware(spec: dict) -> dict:
    """`spec` with the path parameters narrowed to the served names and
    versions and the infer body to the example models' signature, so that
    every generated case is a request the server must answer with a 2xx.
    The document itself stays general (it describes any deployment)."""
    spec = copy.deepcopy(spec)
    components = spec["components"]
    components["parameters"]["ModelName"]["schema"] = {"type": "string", "enum": SERVED}
    components["parameters"]["ModelVersion"]["schema"] = {"type": "string", "enum": ["1"]}
    # The binary extension's header and body need bytes a JSON schema cannot
    # tie to the JSON part; test_tritonclient.py and test_malformed.py cover them.
    for item in spec["paths"].values():
        if "post" in item:
            item["post"]["parameters"] = [p for p in item["post"]["parameters"]
                                          if not p["$ref"].endswith("/HeaderLength")]
    components["requestBodies"]["Inference"]["content"].pop("application/octet-stream")
    components["parameters"]["LatencyBudget"]["schema"]["maximum"] = 60_000

    def x_input(rows):
        return {
            "type": "object", "additionalProperties": False,
            "required": ["name", "shape", "datatype", "data"],
            "properties": {
                "name": {"const": "X"},
                "shape": {"const": [rows, 64]},
                "datatype": {"const": "FP32"},
                "data": {"type": "array", "minItems": rows * 64, "maxItems": rows * 64,
                         "items": {"type": "number", "minimum": 0, "maximum": 16}},
            },
        }

    def requested(name):
        return {
            "type": "object", "additionalProperties": False, "required": ["name"],
            "properties": {
                "name": {"const": name},
                "parameters": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"binary_data": {"type": "boolean"},
                                   "classification": {"type": "integer", "minimum": 1, "maximum": 10}},
                },
            },
        }

    components["schemas"]["InferenceRequest"] = {
        "type": "object", "additionalProperties": False, "required": ["inputs"],
        "properties": {
            "id": {"type": "string", "maxLength": 32},
            "parameters": {
                "type": "object", "additionalProperties": False,
                "properties": {"binary_data_output": {"type": "boolean"},
                               "stream": {"type": "boolean"},
                               "timeout": {"type": "integer", "minimum": 0, "maximum": 60_000_000}},
            },
            "inputs": {"type": "array", "minItems": 1, "maxItems": 1,
                       "items": {"oneOf": [x_input(rows) for rows in (1, 2, 3)]}},
            "outputs": {"oneOf": [
                {"type": "array", "maxItems": 0},
                {"type": "array", "minItems": 1, "maxItems": 1,
                 "items": {"oneOf": [requested("label"), requested("probabilities")]}},
                {"type": "array", "minItems": 2, "maxItems": 2,
                 "prefixItems": [requested("label"), requested("probabilities")]},
            ]},
        },
    }
    return spec


def to_toml(data: dict, prefix: str = "") -> str:
    """A settings dict back to TOML (tables, strings, numbers, booleans,
    lists of those): what the CLI reads with --config-file."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"cannot write {v!r} as TOML")

    lines = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            name = f"{prefix}{k}"
            lines += ["", f"[{name}]", to_toml(v, name + ".")]
    return "\n".join(lines)


def report_counts(ndjson: Path) -> dict:
    """Per operation, from a CLI NDJSON report: cases per phase and the
    statuses answered."""
    phases = collections.defaultdict(collections.Counter)
    statuses = collections.defaultdict(collections.Counter)
    for line in ndjson.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished["recorder"]
        for case_id in recorder.get("cases") or {}:
            label = recorder["label"]
            phases[label][finished["phase"]] += 1
            interaction = (recorder.get("interactions") or {}).get(case_id) or {}
            response = interaction.get("response")
            statuses[label][response["status_code"] if response else "no answer"] += 1
    return {label: {"phases": dict(phases[label]), "statuses": dict(statuses[label])} for label in phases}
