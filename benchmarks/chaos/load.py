"""The chaos scenario's clients and their ledger.

Every request sent is accounted for as exactly one of:
- `answered`: 200 and a correct answer: the digits probabilities equal
  (within 1e-4) onnxruntime's for the same row on one of the two deployed
  model versions, and on the new one for requests sent after the model swap
  finished; a proxied GET echoes its own path;
- `rejected`: 429 or 503 with `Retry-After` (the client may retry);
- `failed`: anything else, by reason (`lost`: no answer, e.g. a reset
  connection or a timeout; `wrong`: a 200 with a wrong answer; `status N`).
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import onnxruntime as ort
import requests

from fleet import MODELS


class Reference:
    """A fixed pool of digits rows and both versions' probabilities for each."""

    def __init__(self, rows: int = 400, seed: int = 3):
        import json

        test = np.asarray(json.loads((MODELS / "digits-test.json").read_text())["X"], np.float32)
        noise = np.random.default_rng(seed).uniform(0, 16, size=(rows - rows // 2, 64)).astype(np.float32)
        self.rows = np.concatenate([test[: rows // 2], noise])
        self.versions = {}
        for version, model in ((1, "digits-cheap"), (2, "digits-heavy")):
            session = ort.InferenceSession(str(MODELS / f"{model}.onnx"), providers=["CPUExecutionProvider"])
            self.versions[version] = session.run(["probabilities"], {"X": self.rows})[0]

    def version_of(self, i: int, probabilities) -> int | None:
        got = np.asarray(probabilities, np.float32)
        for version, expected in self.versions.items():
            if got.shape == expected[i].shape and np.allclose(got, expected[i], rtol=1e-4, atol=1e-4):
                return version
        return None


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.answered = 0
        self.rejected = 0
        self.failed: dict = {}
        self.failures: list = []
        self.versions = {1: 0, 2: 0}

    def start(self) -> None:
        with self.lock:
            self.sent += 1

    def record(self, outcome: str, reason: str = "", at: float = 0.0, detail: str = "") -> None:
        with self.lock:
            if outcome == "answered":
                self.answered += 1
            elif outcome == "rejected":
                self.rejected += 1
            else:
                self.failed[reason] = self.failed.get(reason, 0) + 1
                if len(self.failures) < 50:
                    self.failures.append({"t_s": round(at, 2), "reason": reason, "detail": detail[:300]})

    def add(self, sent: int, answered: int, rejected: int, failed: dict) -> None:
        """Counts of requests sent by another client (the load generator)."""
        with self.lock:
            self.sent += sent
            self.answered += answered
            self.rejected += rejected
            for reason, n in failed.items():
                self.failed[reason] = self.failed.get(reason, 0) + n

    def totals(self) -> dict:
        with self.lock:
            return {"sent": self.sent, "answered": self.answered, "rejected_retryable": self.rejected,
                    "failed": sum(self.failed.values()), "failed_by_reason": dict(self.failed),
                    "answers_by_model_version": dict(self.versions)}


class Load:
    """Closed-loop keep-alive clients (the steady load) and an open-loop
    burst sender, both through the front gateway."""

    def __init__(self, front: str, reference: Reference, ledger: Ledger, started: float, proxy_share: float = 0.2):
        self.front, self.reference, self.ledger, self.started = front, reference, ledger, started
        self.proxy_share = proxy_share
        self.swapped_at: float | None = None
        self.stopping = threading.Event()
        self.threads: list = []

    def now(self) -> float:
        return time.monotonic() - self.started

    def one(self, session: requests.Session, rng: random.Random) -> None:
        sent_at = self.now()
        self.ledger.start()
        try:
            if rng.random() < self.proxy_share:
                n = rng.randrange(10_000)
                r = session.get(f"{self.front}/apps/app/echo?n={n}", timeout=10)
                if r.status_code == 200:
                    ok = r.json().get("path") == f"/echo?n={n}"
                    return self.ledger.record("answered") if ok else self.ledger.record(
                        "failed", "wrong", sent_at, f"proxy echo {r.text[:200]}")
            else:
                i = rng.randrange(len(self.reference.rows))
                body = {"inputs": [{"name": "X", "shape": [1, 64], "datatype": "FP32",
                                    "data": self.reference.rows[i].tolist()}]}
                r = session.post(f"{self.front}/v2/models/digits/infer", json=body, timeout=10)
                if r.status_code == 200:
                    return self.check_digits(i, r, sent_at)
            if r.status_code in (429, 503) and r.headers.get("retry-after"):
                return self.ledger.record("rejected")
            self.ledger.record("failed", f"status {r.status_code}", sent_at, r.text)
        except requests.exceptions.ChunkedEncodingError as e:
            # The head arrived, the body was cut: the connection was closed
            # before Content-Length bytes (the client can tell, but it is lost).
            self.ledger.record("failed", "lost (truncated)", sent_at, f"{type(e).__name__}: {e}")
        except requests.RequestException as e:
            self.ledger.record("failed", "lost", sent_at, f"{type(e).__name__}: {e}")
        except (ValueError, KeyError, StopIteration) as e:
            self.ledger.record("failed", "wrong", sent_at, f"unreadable answer: {e}")

    def check_digits(self, i: int, r: requests.Response, sent_at: float) -> None:
        probabilities = next(o for o in r.json()["outputs"] if o["name"] == "probabilities")["data"]
        version = self.reference.version_of(i, probabilities)
        if version is None:
            return self.ledger.record("failed", "wrong", sent_at, f"row {i}: matches no deployed version")
        if version == 1 and self.swapped_at is not None and sent_at > self.swapped_at:
            return self.ledger.record("failed", "wrong", sent_at, f"row {i}: old version after the swap")
        with self.ledger.lock:
            self.ledger.versions[version] += 1
        self.ledger.record("answered")

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        with requests.Session() as session:
            while not self.stopping.is_set():
                self.one(session, rng)
                time.sleep(rng.random() * 0.005)

    def start(self, clients: int) -> None:
        self.threads = [threading.Thread(target=self.client, args=(k,), daemon=True) for k in range(clients)]
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=60)

    def loadgen(self, loadgen: str, workdir, args: list) -> dict:
        """Runs the suite's Rust load generator (`loadgen`) against the
        front's digits route with the pool's rows and adds its counts to the
        ledger. Its answers are counted by status, not checked one by one
        (the closed-loop clients, which check theirs, keep running beside
        it); its 429/503 count as retryable (the clients check that every
        one of theirs carries Retry-After)."""
        import json
        import subprocess

        rows = workdir / "rows.json"
        if not rows.exists():
            rows.write_text(json.dumps({"X": self.reference.rows.tolist()}))
        report = workdir / f"loadgen-{len(list(workdir.glob('loadgen-*.json')))}.json"
        subprocess.run([loadgen, "--url", f"{self.front}/v2/models/digits/infer", "--dataset", str(rows),
                        "--timeout", "10s", "--quiet", "--json-out", str(report), *args],
                       check=True, capture_output=True)
        result = json.loads(report.read_text())
        rejected = sum(n for status, n in result["errors"].items() if status in ("429", "503"))
        failed = {f"status {status}": n for status, n in result["errors"].items() if status not in ("429", "503")}
        if result["connection_errors"]:
            failed["lost"] = result["connection_errors"]
        if result["timeouts"]:
            failed["lost (timeout)"] = result["timeouts"]
        self.ledger.add(result["requests"], result["ok"], rejected, failed)
        return result
