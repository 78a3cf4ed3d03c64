"""The soak's request mix and the client-side ledger.

Every request the clients send is one `Kind`: it knows how to build the
request, which status it expects, and how to check the answer. The ledger
counts each outcome as `ok` (the expected status and a correct answer),
`rejected` (429/503 with `Retry-After`: retryable, but the soak drives no
overload, so the verdict counts them too) or `unexpected` (anything else:
a wrong status, a transport error, a malformed or inconsistent answer), and
keeps the first few unexpected ones for the report.

Answers are checked for consistency across the whole run: the first answer
to each repeated input is remembered, and a later answer that differs
(from the cache, after a reload, from another model placement) is wrong.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from services import MODELS

BUDGET = {"x-latency-budget-ms": "10000"}
WORDS = ("the a quick brown fox jumps over lazy dog model request memory batch token text server "
         "gateway cache stream reload soak").split()


class Wrong(Exception):
    """An answer with the expected status whose content is wrong."""


@dataclass
class Ledger:
    """Outcome counts per request kind, shared by the client threads."""

    counts: dict = field(default_factory=dict)
    examples: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, outcome: str, detail: str = "") -> None:
        with self.lock:
            per_kind = self.counts.setdefault(kind, {"ok": 0, "rejected": 0, "unexpected": 0})
            per_kind[outcome] += 1
            if outcome != "ok" and len(self.examples) < 30:
                self.examples.append({"at": round(time.time(), 3), "kind": kind, "outcome": outcome,
                                      "detail": detail[:300]})

    def totals(self) -> dict:
        with self.lock:
            out = {"ok": 0, "rejected": 0, "unexpected": 0}
            for per_kind in self.counts.values():
                for k, v in per_kind.items():
                    out[k] += v
            return out


class Answers:
    """The first answer seen for each repeated input (consistency check)."""

    def __init__(self):
        self.seen: dict = {}
        self.lock = threading.Lock()

    def check(self, key: str, answer) -> None:
        with self.lock:
            first = self.seen.setdefault(key, answer)
        if first != answer:
            raise Wrong(f"answer for {key} changed: first {first}, now {answer}")

    def check_close(self, key: str, values, tolerance: float = 1e-5) -> None:
        """Floats: a row's result may differ in the last bits with the batch
        it was executed in (a one-row batch takes another kernel than a
        larger one), so answers agree within `tolerance`, not bit for bit."""
        with self.lock:
            first = self.seen.setdefault(key, values)
        worst = max(abs(a - b) for a, b in zip(first, values))
        if len(first) != len(values) or worst > tolerance:
            raise Wrong(f"answer for {key} changed by {worst:g}")


def digits_rows() -> list:
    return json.loads((MODELS / "digits-test.json").read_text())["X"]


class Mix:
    """Builds and checks the requests. One instance is shared by the client
    threads; each thread passes its own `random.Random` and `Session`."""

    def __init__(self, base: str, admin: str, text: bool):
        self.base, self.admin, self.text = base, admin, text
        self.digits = digits_rows()[:150]
        self.answers = Answers()
        kinds: list[tuple[str, float, Callable]] = [
            ("digits-json", 22, self.digits_json),
            ("synth-binary", 14, self.synth_binary),
            ("sse-full", 7, lambda s, r: self.sse(s, r, abandon=False)),
            ("sse-abandoned", 3, lambda s, r: self.sse(s, r, abandon=True)),
            ("proxy-get", 9, self.proxy_get),
            ("proxy-upload", 4, self.proxy_upload),
            ("proxy-sse", 3, self.proxy_sse),
            ("admin-read", 4, self.admin_read),
            ("malformed", 3, self.malformed),
            ("over-limit", 2, self.over_limit),
            ("new-connection", 4, self.new_connection),
        ]
        if text:
            kinds.append(("text", 10, self.text_infer))
        self.names = [k for k, _, _ in kinds]
        self.weights = [w for _, w, _ in kinds]
        self.handlers = {k: h for k, _, h in kinds}

    def pick(self, rng: random.Random) -> str:
        return rng.choices(self.names, self.weights)[0]

    # --- V2 infer -----------------------------------------------------------

    def digits_input(self, rng):
        """(key, row): a repeated test row (cache hits, checked for consistency)
        or a fresh noisy one (a miss)."""
        if rng.random() < 0.7:
            i = rng.randrange(len(self.digits))
            return f"digits:{i}", self.digits[i]
        return None, [round(rng.random() * 16, 2) for _ in range(64)]

    def digits_json(self, session, rng):
        key, row = self.digits_input(rng)
        r = session.post(f"{self.base}/v2/models/digits/infer", headers=BUDGET, timeout=60,
                         json={"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row}]})
        expect(r, 200)
        outputs = {o["name"]: o for o in r.json()["outputs"]}
        label = outputs["label"]["data"]
        if len(label) != 1 or len(outputs["probabilities"]["data"]) != 10:
            raise Wrong(f"digits answer has the wrong shape: {r.text[:200]}")
        if key:
            self.answers.check(key, label[0])

    def synth_binary(self, session, rng):
        seed = rng.randrange(60)
        rows = 1 + seed % 8
        values = random.Random(seed).random
        tensor = struct.pack(f"<{rows * 64}f", *(values() for _ in range(rows * 64)))
        header = json.dumps({
            "inputs": [{"name": "X", "shape": [rows, 64], "datatype": "FP32",
                        "parameters": {"binary_data_size": len(tensor)}}],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
        }).encode()
        r = session.post(f"{self.base}/v2/models/synth/infer", data=header + tensor, timeout=60,
                         headers={**BUDGET, "Inference-Header-Content-Length": str(len(header)),
                                  "content-type": "application/octet-stream"})
        expect(r, 200)
        head_len = int(r.headers.get("Inference-Header-Content-Length", "-1"))
        if head_len < 0:
            raise Wrong("binary answer without Inference-Header-Content-Length")
        head = json.loads(r.content[:head_len])
        output = head["outputs"][0]
        size = output["parameters"]["binary_data_size"]
        if output["shape"] != [rows, 10] or size != rows * 40 or len(r.content) - head_len != size:
            raise Wrong(f"binary answer shape/size wrong: {head}")
        probabilities = struct.unpack(f"<{rows * 10}f", r.content[head_len:])
        self.answers.check_close(f"synth:{seed}", probabilities)

    def text_infer(self, session, rng):
        items = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))) for _ in range(rng.randint(1, 8))]
        r = session.post(f"{self.base}/v2/models/text/infer", headers=BUDGET, timeout=60,
                         json={"inputs": [{"name": "text", "shape": [len(items)], "datatype": "BYTES",
                                           "data": items}]})
        expect(r, 200)
        if r.json()["outputs"][0]["shape"][0] != len(items):
            raise Wrong(f"text answer rows != {len(items)}")

    def sse(self, session, rng, abandon: bool):
        """A draft-then-final stream on the cascade route; an abandoned one
        is closed after its first event (the heavy work must be dropped)."""
        key, row = self.digits_input(rng)
        r = session.post(f"{self.base}/v2/models/digits/infer", stream=True, timeout=60,
                         headers={**BUDGET, "accept": "text/event-stream"},
                         json={"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", "data": row}]})
        try:
            expect(r, 200)
            events = []
            for line in r.iter_lines():
                if line.startswith(b"event: "):
                    events.append(line[7:].decode())
                    if abandon:
                        return
                if line.startswith(b"data: ") and events and events[-1] == "final":
                    data = json.loads(line[6:])
                    if key:
                        label = next(o for o in data["outputs"] if o["name"] == "label")["data"][0]
                        self.answers.check(key, label)
            if not events or events[-1] != "final" or "error" in events:
                raise Wrong(f"stream events {events}")
        finally:
            r.close()

    def malformed(self, session, rng):
        body = rng.choice([b'{"inputs": [', b'{"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32", '
                           b'"data": [1, 2]}]}', b'not json at all'])
        r = session.post(f"{self.base}/v2/models/digits/infer", data=body, headers=BUDGET, timeout=30)
        expect(r, 400)

    def over_limit(self, session, rng):
        r = session.post(f"{self.base}/v2/models/synth/infer", headers=BUDGET, timeout=30,
                         json={"inputs": [{"name": "X", "shape": [4096, 64], "datatype": "FP32",
                                           "data": [0.0] * (64 * 4096)}]})
        expect(r, 413)

    def new_connection(self, _session, rng):
        """A request on a connection of its own (accept and close paths)."""
        with requests.Session() as fresh:
            key, row = self.digits_input(rng)
            r = fresh.post(f"{self.base}/v2/models/digits/infer", headers={**BUDGET, "connection": "close"},
                           timeout=60, json={"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                                                         "data": row}]})
            expect(r, 200)

    # --- proxy and admin ------------------------------------------------------

    def proxy_get(self, session, rng):
        n = rng.randrange(40)
        r = session.get(f"{self.base}/apps/app/echo?item={n}&cc=max-age%3D5", timeout=30)
        expect(r, 200)
        if r.json()["path"] != f"/echo?item={n}&cc=max-age%3D5":
            raise Wrong(f"proxied to the wrong path: {r.text[:200]}")

    def proxy_upload(self, session, rng):
        body = rng.randbytes(rng.randint(1, 256) * 1024)
        r = session.post(f"{self.base}/apps/app/count", data=body, timeout=60)
        expect(r, 200)
        answer = r.json()
        if answer["bytes"] != len(body) or answer["sha256"] != hashlib.sha256(body).hexdigest():
            raise Wrong(f"upload arrived damaged: {answer}")

    def proxy_sse(self, session, rng):
        with session.get(f"{self.base}/apps/app/sse?n=3&interval=0.05", stream=True, timeout=30) as r:
            expect(r, 200)
            data = [line for line in r.iter_lines() if line.startswith(b"data:")]
        if len(data) != 3:
            raise Wrong(f"proxied SSE gave {len(data)} events, not 3")

    def admin_read(self, session, rng):
        path = rng.choice(["/admin/stats", "/admin/config", "/metrics"])
        r = session.get(f"{self.admin}{path}", timeout=30)
        expect(r, 200)


def expect(r: requests.Response, status: int) -> None:
    if r.status_code != status:
        raise StatusError(r.status_code, r.headers.get("retry-after"), r.text[:200])


class StatusError(Exception):
    """An answer whose status is not the one the request expects."""

    def __init__(self, status, retry_after, text):
        super().__init__(f"status {status}: {text}")
        self.status, self.retry_after = status, retry_after


class Clients:
    """`count` closed-loop client threads, each with a keep-alive session and
    a short random pause between requests (the soak is a long steady run,
    not an overload)."""

    def __init__(self, mix: Mix, ledger: Ledger, count: int, seed: int, pause_ms: float):
        self.mix, self.ledger, self.count, self.seed, self.pause_ms = mix, ledger, count, seed, pause_ms
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.stopping.clear()
        self.threads = [threading.Thread(target=self.client, args=(self.seed + i,), daemon=True)
                        for i in range(self.count)]
        self.seed += self.count
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=120)

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        with requests.Session() as session:
            while not self.stopping.is_set():
                kind = self.mix.pick(rng)
                try:
                    self.mix.handlers[kind](session, rng)
                    self.ledger.record(kind, "ok")
                except StatusError as e:
                    retryable = e.status in (429, 503) and e.retry_after is not None
                    self.ledger.record(kind, "rejected" if retryable else "unexpected", str(e))
                except Wrong as e:
                    self.ledger.record(kind, "unexpected", f"wrong answer: {e}")
                except (requests.RequestException, ValueError, KeyError, IndexError, StopIteration) as e:
                    self.ledger.record(kind, "unexpected", f"{type(e).__name__}: {e}")
                time.sleep(rng.random() * self.pause_ms / 1000)
