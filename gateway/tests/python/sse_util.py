"""Helpers for the streaming (SSE) tests: a real SSE client (sseclient-py)
over a `requests` streaming response that also keeps the raw chunks (to see
heartbeat comments), and the admin endpoints the tests drive."""

import json
import time
from pathlib import Path

import requests
import sseclient

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SSE = {"Accept": "text/event-stream"}


class Stream:
    """One streamed infer call. `events()` yields (name, parsed JSON data)
    as they arrive; `raw` holds every chunk received so far."""

    def __init__(self, gw, route, body, headers=None, timeout=30):
        self.session = requests.Session()
        self.response = self.session.post(
            f"{gw.base}/v2/models/{route}/infer",
            json=body,
            headers={**SSE, **(headers or {})},
            stream=True,
            timeout=timeout,
        )
        self.raw = []
        self._source = self._chunks()
        self._events = sseclient.SSEClient(self._source).events()

    def _chunks(self):
        for chunk in self.response.iter_content(chunk_size=None):
            self.raw.append(chunk)
            yield chunk

    def next_event(self):
        event = next(self._events)
        return event.event, json.loads(event.data)

    def events(self):
        for event in self._events:
            yield event.event, json.loads(event.data)

    def all(self):
        return list(self.events())

    def pump(self):
        """Reads one raw chunk past the SSE client (use it only while no
        event is due, e.g. to collect heartbeat comments)."""
        return next(self._source)

    def heartbeats(self):
        return b"".join(self.raw).count(b": keep-alive\n\n")

    def close(self):
        self.response.close()
        self.session.close()


def admin(gw, path, method="GET"):
    r = requests.request(method, f"http://127.0.0.1:{gw.admin_port}{path}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def pool_stats(gw, model, pool="cpu"):
    for m in admin(gw, "/admin/stats")["models"]:
        if m["name"] == model:
            return next(p for p in m["pools"] if p["name"] == pool)
    raise KeyError(model)


def stream_stats(gw):
    return admin(gw, "/admin/stats")["streams"]


def pause(gw, model, pool="cpu"):
    assert admin(gw, f"/admin/models/{model}/pools/{pool}/pause", "POST")["paused"] is True


def resume(gw, model, pool="cpu"):
    assert admin(gw, f"/admin/models/{model}/pools/{pool}/resume", "POST")["paused"] is False


def wait_for(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
