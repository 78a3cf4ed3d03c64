"""`batching.queue_order` on the real binary (issue 41): with `"fifo"` a
pool's queue takes the requests of one class by arrival, whatever their
deadlines (the comparison the benchmark makes against deadline order);
with the default, the earliest deadline leaves first. A paused worker
fills the queue and each answer's `switchyard_batch_size` shows the order,
without any timing (see test_priority.py)."""

import pytest

from conftest import Gateway
from routing_util import write_config
from test_priority import batch_size, run_round

CONFIG = """
[[models]]
name = "order"
path = "{models}/digits-heavy.onnx"
batching = { max_batch_size = 4, max_queue_delay_us = 200, queue_capacity = 8, queue_order = "fifo" }
"""


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    gw = Gateway(config=write_config(tmp_path_factory.mktemp("queue-order"), CONFIG))
    yield gw
    gw.stop()


def test_a_fifo_queue_ignores_deadlines_within_a_class(gw):
    # The request with 9 s left arrived first; under deadline order the one
    # with 6 s left would join the worker's next batch (test_priority.py).
    late, soon = run_round(gw, 20, {"headers": {"x-latency-budget-ms": "9000"}},
                           {"headers": {"x-latency-budget-ms": "6000"}})
    assert (batch_size(late), batch_size(soon)) == (4, 3), "arrival order, not deadline"


def test_a_fifo_queue_still_orders_by_class(gw):
    low, high = run_round(gw, 10, {"parameters": {"priority": 4}}, {"headers": {"x-priority": "1"}})
    assert (batch_size(high), batch_size(low)) == (4, 3)
