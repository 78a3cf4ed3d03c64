"""Concurrent `POST /admin/config/edit` applies without `base` (the Console
page's curl example, docs/src/how-to/console.md, leaves it out): they are applied one after another, each
told "applied" with its own reload, none fails on the file system, and
the value left in force is the last applied one. Against the real
binary. Issue 37 item 9."""

import threading

import pytest
import requests

from conftest import Gateway
from routing_util import DIGITS_MODELS, write_config

CONFIG = DIGITS_MODELS + """
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
"""

WRITERS = 16
POLICY = 'type = "cascade", confidence_output = "probabilities"'


def test_concurrent_applies_are_serialised(tmp_path):
    config = write_config(tmp_path, CONFIG)
    gw = Gateway(config=config)
    try:
        thresholds = [round(0.5 + i / 100, 2) for i in range(WRITERS)]
        answers = [None] * WRITERS
        start = threading.Barrier(WRITERS)

        def apply(i):
            start.wait()
            answers[i] = requests.post(f"{gw.admin}/admin/config/edit", timeout=120,
                                       json={"route": "digits", "threshold": thresholds[i], "apply": True})

        threads = [threading.Thread(target=apply, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, r in enumerate(answers):
            assert r.status_code == 200 and r.json()["applied"] is True, (thresholds[i], r.status_code, r.text)
        # One reload per apply, in the order they were applied: no two
        # share a generation, so none ran over another.
        applied = sorted((r.json()["reload"]["generation"], thresholds[i]) for i, r in enumerate(answers))
        generations = [g for g, _ in applied]
        assert len(set(generations)) == WRITERS, generations
        # Each apply edited the file as the previous one left it: its diff
        # starts from the previous apply's value.
        by_generation = {r.json()["reload"]["generation"]: r.json() for r in answers}
        previous = 0.8
        for generation, value in applied:
            diff = by_generation[generation]["diff"]
            assert f"-policy = {{ {POLICY}, threshold = {previous} }}" in diff, diff
            assert f"+policy = {{ {POLICY}, threshold = {value} }}" in diff, diff
            previous = value
        last = applied[-1][1]
        doc = requests.get(f"{gw.admin}/admin/config", timeout=10).json()
        route = next(r for r in doc["config"]["routes"] if r["name"] == "digits")
        assert route["policy"]["threshold"] == pytest.approx(last)
        assert f"threshold = {last} }}" in config.read_text()
        leftovers = [p.name for p in tmp_path.iterdir() if p.name != "switchyard.toml"]
        assert leftovers == [], f"temporary files left beside the config: {leftovers}"
        assert gw.alive()
    finally:
        gw.stop()
