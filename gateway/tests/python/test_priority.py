"""Priority classes and deadline order inside a pool's queue, on the real
binary: with the pool's one worker paused, requests queue up; on resume,
the batch the worker fills after the request it already holds takes the
highest class (then the earliest deadline), which each answer's
`switchyard_batch_size` shows without any timing. A full queue takes a
higher-class arrival and sheds its youngest lowest-class waiter with 429."""

import threading

import numpy as np
import pytest
import requests

from conftest import Gateway
from routing_util import infer_body, write_config
from sse_util import pause, pool_stats, resume, wait_for

KEYS = {"batch": "key-of-batch-0123456789abcdef", "live": "key-of-live-0123456789abcdef"}

# One CPU pool with one worker (the default); batches of at most 4 rows.
CONFIG = """
[server]
grpc_listen = "127.0.0.1:0"
[[models]]
name = "order"
path = "{models}/digits-heavy.onnx"
batching = { max_batch_size = 4, max_queue_delay_us = 200, queue_capacity = 8 }
[[models]]
name = "shed"
path = "{models}/digits-heavy.onnx"
batching = { max_batch_size = 4, max_queue_delay_us = 200, queue_capacity = 2 }
"""

# A route whose keys name two tenants with default classes (a separate
# gateway: its `priority` fields are new config).
TENANT_CONFIG = """
[[models]]
name = "tenanted"
path = "{models}/digits-heavy.onnx"
batching = { max_batch_size = 4, max_queue_delay_us = 200, queue_capacity = 8 }

[[routes]]
name = "keyed"
models = ["tenanted"]
auth = { keys = [{ key = "%s", tenant = "batch" }, { key = "%s", tenant = "live" }] }

[[tenants]]
name = "batch"
priority = 4
max_priority = 3
[[tenants]]
name = "live"
priority = 1
""" % (KEYS["batch"], KEYS["live"])

LONG = "9000"  # ms: the direct-model maximum is 10 s; nothing here waits that long


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("priority"), CONFIG))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def gw_tenants(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("priority-tenants"), TENANT_CONFIG))
    yield gw
    gw.stop()


class Call:
    """One request in a thread; `response` is set once it has answered."""

    def __init__(self, gw, model, rows, value, headers=None, parameters=None):
        body = infer_body(np.full((rows, 64), float(value)), parameters=parameters)
        self.response = None
        self.done = threading.Event()

        def run():
            try:
                self.response = requests.post(
                    f"{gw.base}/v2/models/{model}/infer", json=body,
                    headers={"x-latency-budget-ms": LONG, **(headers or {})}, timeout=30)
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self):
        assert self.done.wait(30), "no answer"
        return self.response


def queued(gw, model, depth):
    wait_for(lambda: pool_stats(gw, model)["queue_depth"] == depth, f"{depth} requests queued on {model}")


def batch_size(call):
    r = call.result()
    assert r.status_code == 200, r.text
    return r.json()["parameters"]["switchyard_batch_size"]


def run_round(gw, value, first, second, target="order", model="order"):
    """Pauses `model`, queues a 1-row plug then `first` and `second` (3 rows
    each, keyword arguments of Call) on `target`, resumes and returns both
    calls: the one that leaves the queue first shares the plug's batch (4
    rows)."""
    pause(gw, model)
    try:
        depth = pool_stats(gw, model)["queue_depth"]
        plug = Call(gw, target, 1, value, **first)
        queued(gw, model, depth + 1)
        a = Call(gw, target, 3, value + 1, **first)
        queued(gw, model, depth + 2)
        b = Call(gw, target, 3, value + 2, **second)
        queued(gw, model, depth + 3)
    finally:
        resume(gw, model)
    assert plug.result().status_code == 200
    return a, b


def test_a_higher_class_leaves_the_queue_first(gw):
    # Queued first: the lowest class (V2 parameter); then the highest (header).
    low, high = run_round(gw, 10, {"parameters": {"priority": 4}}, {"headers": {"x-priority": "1"}})
    assert (batch_size(high), batch_size(low)) == (4, 3), "the high class joined the worker's next batch"


def test_within_a_class_the_earliest_deadline_leaves_first(gw):
    late, soon = run_round(gw, 20, {"headers": {"x-latency-budget-ms": "9000"}},
                           {"headers": {"x-latency-budget-ms": "6000"}})
    assert (batch_size(soon), batch_size(late)) == (4, 3), "the request with less time left went first"


def test_without_priorities_the_queue_stays_first_in_first_out(gw):
    first, second = run_round(gw, 30, {}, {})
    assert (batch_size(first), batch_size(second)) == (4, 3)


def key(tenant, **headers):
    return {"headers": {"x-api-key": KEYS[tenant], **headers}}


def test_a_tenant_default_class_orders_its_requests(gw_tenants):
    # Neither asks: batch's default is class 4, live's class 1.
    batch, live = run_round(gw_tenants, 40, key("batch"), key("live"), target="keyed", model="tenanted")
    assert (batch_size(live), batch_size(batch)) == (4, 3)


def test_a_tenant_may_not_ask_above_its_max_priority(gw_tenants):
    # batch asks class 1 but may have 3 at most; live asks class 2.
    batch, live = run_round(gw_tenants, 50, key("batch", **{"x-priority": "1"}), key("live", **{"x-priority": "2"}),
                            target="keyed", model="tenanted")
    assert (batch_size(live), batch_size(batch)) == (4, 3)


def test_grpc_priority_parameter_and_metadata(gw):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{gw.grpc_port}")
    results = {}

    def grpc_call(name, value, rows, **kwargs):
        x = grpcclient.InferInput("X", [rows, 64], "FP32")
        x.set_data_from_numpy(np.full((rows, 64), float(value), dtype=np.float32))
        headers = {"x-latency-budget-ms": LONG, **kwargs.pop("headers", {})}
        response = client.infer("order", [x], headers=headers, **kwargs).get_response()
        results[name] = response.parameters["switchyard_batch_size"].int64_param

    pause(gw, "order")
    try:
        depth = pool_stats(gw, "order")["queue_depth"]
        threads = []
        for i, (name, rows, kwargs) in enumerate([
                ("plug", 1, {}), ("low", 3, {"priority": 4}), ("high", 3, {"headers": {"x-priority": "1"}})]):
            t = threading.Thread(target=grpc_call, args=(name, 60 + i, rows), kwargs=kwargs, daemon=True)
            t.start()
            threads.append(t)
            queued(gw, "order", depth + i + 1)
    finally:
        resume(gw, "order")
    for t in threads:
        t.join(30)
    client.close()
    assert (results.get("high"), results.get("low")) == (4, 3), results


def test_a_full_queue_sheds_its_youngest_low_class_waiter_for_a_high_class_arrival(gw):
    before = pool_stats(gw, "shed")
    pause(gw, "shed")
    low = []
    try:
        # Fill the queue with class-4 requests until one is refused: then
        # the queue (capacity 2, beside the one the worker holds) is full.
        for i in range(6):
            call = Call(gw, "shed", 1, 100 + i, parameters={"priority": 4})
            wait_for(lambda: call.done.is_set() or pool_stats(gw, "shed")["queue_depth"] == len(low) + 1,
                     "the low-class request to be queued or refused")
            if call.done.is_set():
                assert call.response.status_code == 429, call.response.text
                break
            low.append(call)
        else:
            pytest.fail("the queue never filled")
        assert len(low) >= 2
        # The gateway counts the request its worker holds in the queue
        # depth, so the queue itself may have a free place: high-class
        # requests take it, then the next one sheds the youngest waiter
        # of the lowest class, with the 429 it would have had on arrival.
        high = []
        depth = pool_stats(gw, "shed")["queue_depth"]
        for i in range(3):
            call = Call(gw, "shed", 1, 200 + i, headers={"x-priority": "1"})
            high.append(call)
            wait_for(lambda: call.done.is_set() or low[-1].done.is_set()
                     or pool_stats(gw, "shed")["queue_depth"] == depth + 1,
                     "the high-class request to be queued, or a waiter shed")
            assert not call.done.is_set(), f"the high-class request was refused: {call.response.text}"
            if low[-1].done.is_set():
                break
            depth += 1
        shed = low[-1].result()
        assert shed.status_code == 429, shed.text
        assert "retry-after" in shed.headers
    finally:
        resume(gw, "shed")
    for call in high + low[:-1]:
        assert call.result().status_code == 200, call.result().text
    after = pool_stats(gw, "shed")
    assert after["rejected"] == before["rejected"] + 1, "the shed waiter counts as rejected"


def test_a_malformed_priority_is_a_400(gw):
    r = requests.post(f"{gw.base}/v2/models/order/infer", json=infer_body(np.zeros((1, 64)), parameters={"priority": "high"}),
                      timeout=10)
    assert r.status_code == 400, r.text
    assert "priority" in r.json()["error"]
    r = requests.post(f"{gw.base}/v2/models/order/infer", json=infer_body(np.zeros((1, 64))),
                      headers={"x-priority": "urgent"}, timeout=10)
    assert r.status_code == 400, r.text
