"""The access log under concurrent load (issue 42): its lines are written
by hand into a buffer that one thread writes in bursts, so check, against
the real binary, that every request of many concurrent clients gets
exactly one whole line, in both formats, and that the lines of other
targets written meanwhile stay whole too."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import Gateway

CLIENTS = 8
PER_CLIENT = 60

ROW = [0.0] * 64


def post_all(gw):
    """CLIENTS keep-alive clients, PER_CLIENT requests each, ids c-i, plus
    one bad request per client (a 400 logged with its error label)."""

    def client(c):
        with requests.Session() as s:
            for i in range(PER_CLIENT):
                body = {"id": f"c{c}-{i}", "inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": ROW}]}
                r = s.post(f"{gw.base}/v2/models/digits-cheap/infer", json=body, timeout=30)
                assert r.status_code == 200, r.text
            r = s.post(f"{gw.base}/v2/models/digits-cheap/infer", data=b"{not json", timeout=30,
                       headers={"x-request-id": f"bad-{c}"})
            assert r.status_code == 400

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
def test_every_request_has_one_whole_line(json_lines):
    gw = Gateway(extra_args=["--log-json"] if json_lines else [])
    try:
        post_all(gw)
    finally:
        gw.stop()  # the guard writes what is pending
    text = gw.log_path.read_text()
    lines = text.splitlines()
    assert text.endswith("\n")
    if json_lines:
        parsed = [json.loads(l) for l in lines if l.startswith("{")]
        assert len(parsed) == len([l for l in lines if l.strip()]), "every line is one JSON object"
        access = [l for l in parsed if l["target"] == "switchyard::access"
                  and l["fields"]["path"] == "/v2/models/digits-cheap/infer"]
        ok = {l["request_id"] for l in access if l["fields"]["status"] == 200}
        bad = [l for l in access if l["fields"]["status"] == 400]
        assert all(l["fields"]["method"] == "POST" and l["fields"]["duration_us"] >= 0 for l in access)
        assert all(l["fields"]["request_bytes"] > 0 for l in access)
        assert sorted(l["request_id"] for l in bad) == sorted(f"bad-{c}" for c in range(CLIENTS))
        assert all(l["fields"]["error"] for l in bad), bad[:2]
        assert any(l["target"] == "switchyard::serve" for l in parsed), "other targets' lines too"
    else:
        line_re = re.compile(
            r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO switchyard::access: method=POST '
            r'path=/v2/models/digits-cheap/infer status=(\d+) error="([a-z_]*)" request_bytes=\d+ '
            r'duration_us=\d+ request_id=(\S+)$')
        access = [l for l in lines if " switchyard::access: method=POST path=/v2/models/digits-cheap/" in l]
        matched = [line_re.match(l) for l in access]
        assert all(matched), [l for l, m in zip(access, matched) if not m][:3]
        ok = {m.group(3) for m in matched if m.group(1) == "200"}
        bad = [m for m in matched if m.group(1) == "400"]
        assert sorted(m.group(3) for m in bad) == sorted(f"bad-{c}" for c in range(CLIENTS))
        assert all(m.group(2) for m in bad)
        assert all(re.match(r"^\d{4}-\d\d-\d\dT", l) for l in lines if l.strip()), "no torn line"
    assert ok == {f"c{c}-{i}" for c in range(CLIENTS) for i in range(PER_CLIENT)}
    assert len(access) == CLIENTS * (PER_CLIENT + 1), "one line per request"
