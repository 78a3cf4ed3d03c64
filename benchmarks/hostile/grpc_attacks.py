#!/usr/bin/env python3
"""Hostile gRPC clients against a `switchyard` binary (issue 37, items 1,
2, 3 and 6): how much memory each attack takes and whether REST clients
are still served while it runs. Each attack runs against a fresh gateway
with its gRPC listener on (the built-in limits: the defaults), beside a
client sending one-row REST infer calls back to back; RSS is sampled every
100 ms (see `harness.py`). The attacks repeat the issue's:

* `stream-flood` (item 1): one connection whose receive window is 0, one
  `ModelStreamInfer` stream, 10,000 small requests sent as fast as flow
  control lets them through, then held open;
* `stream-flood-150k`: the same with 150,000 requests;
* `headers-only` (item 2): 7 connections each opening up to 10,000
  `ModelInfer` streams with headers only (as many as the server allows);
* `incomplete` (item 2): 100 `ModelInfer` messages declaring 7.5 MiB each,
  sent whole but for their last byte;
* `empty-inputs`, `empty-outputs`, `empty-raw` (item 3): two clients
  sending 8 MiB messages of 4.19 M empty entries, over and over;
* `silent` (item 6): 2,000 TCP connections that never send the HTTP/2
  preface.

Needs the test clients' packages (`h2`, `grpcio`, `tritonclient`: the
`.venv` that `make test` sets up). Example:

    .venv/bin/python benchmarks/hostile/grpc_attacks.py --bin target/release/switchyard --duration 20
"""

import argparse
import json
import socket
import sys
import threading

import grpc
from tritonclient.grpc import service_pb2

from harness import REPO, Server, measure, print_table

sys.path.insert(0, str(REPO / "gateway" / "tests" / "python"))
from h2_raw import RawH2, frame  # noqa: E402

CONFIG = """
[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]
"""

MiB = 1 << 20
ATTACKS = ["stream-flood", "stream-flood-150k", "headers-only", "incomplete", "empty-inputs", "empty-outputs",
           "empty-raw", "silent"]


def small_request():
    tensor = service_pb2.ModelInferRequest().InferInputTensor(
        name="X", datatype="FP32", shape=[1, 64],
        contents=service_pb2.InferTensorContents(fp32_contents=[0.5] * 64))
    return service_pb2.ModelInferRequest(model_name="digits", inputs=[tensor])


class Tally:
    """Counts what the attack saw, from several threads."""

    def __init__(self):
        self.counts = {}
        self.lock = threading.Lock()

    def add(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n


def stream_flood(port, requests, tally):
    def attack(stop):
        conn = RawH2(port, window=0)
        try:
            sid = conn.open("ModelStreamInfer")
            message = frame(small_request())
            sent = conn.send(sid, message * requests, wait=5) // len(message)
            tally.add("requests_sent", sent)
            stop.wait()
        finally:
            conn.close()
    return [attack]


def headers_only(port, tally):
    def attack(stop):
        conn = RawH2(port)
        try:
            conn.pump(0.2)
            for _ in range(10_000):
                try:
                    conn.open("ModelInfer")
                    tally.add("streams_opened")
                except Exception as e:  # h2 refuses past the server's SETTINGS_MAX_CONCURRENT_STREAMS
                    tally.add(type(e).__name__)
                    break
            while not stop.is_set() and not conn.closed:
                conn.pump(0.5)
        finally:
            conn.close()
    return [attack] * 7


def incomplete(port, tally):
    def attack(stop):
        conn = RawH2(port)
        try:
            declared = int(7.5 * MiB)
            body = b"\x00" + declared.to_bytes(4, "big") + b"\x00" * (declared - 1)
            sids = [conn.open("ModelInfer") for _ in range(100)]
            for sid in sids:
                if conn.send(sid, body, wait=2) == len(body):
                    tally.add("messages_sent_but_one_byte")
            for sid in sids:
                status = conn.status_of(sid, 0.05)
                tally.add(f"status_{status[0]}" if status else "no_status_yet")
            stop.wait()
        finally:
            conn.close()
    return [attack]


def empty_entries(port, entry, tally):
    name = b"digits"
    payload = b"\x0a" + bytes([len(name)]) + name + entry * ((8 * MiB - 8) // len(entry))

    def attack(stop):
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 * MiB)]) as ch:
            call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                  request_serializer=lambda b: b, response_deserializer=lambda b: b)
            while not stop.is_set():
                try:
                    call(payload, timeout=60)
                    tally.add("OK")
                except grpc.RpcError as e:
                    tally.add(e.code().name)
    return [attack] * 2


def silent(port, tally):
    def attack(stop):
        socks = []
        try:
            for _ in range(2000):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError as e:
                    tally.add(type(e).__name__)
                    break
            tally.add("connected", len(socks))
            stop.wait()
            closed = 0
            for s in socks:
                s.setblocking(False)
                try:
                    while s.recv(65536):
                        pass
                    closed += 1
                except BlockingIOError:
                    pass
                except OSError:
                    closed += 1
            tally.add("closed_by_server", closed)
        finally:
            for s in socks:
                s.close()
    return [attack]


def attackers(name, port, tally):
    entries = {"empty-inputs": b"\x2a\x00", "empty-outputs": b"\x32\x00", "empty-raw": b"\x3a\x00"}
    if name == "stream-flood":
        return stream_flood(port, 10_000, tally)
    if name == "stream-flood-150k":
        return stream_flood(port, 150_000, tally)
    if name == "headers-only":
        return headers_only(port, tally)
    if name == "incomplete":
        return incomplete(port, tally)
    if name in entries:
        return empty_entries(port, entries[name], tally)
    return silent(port, tally)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the switchyard binary")
    parser.add_argument("--attack", action="append", choices=ATTACKS, help="attacks to run (default: all)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per attack (default 20)")
    parser.add_argument("--max-growth-mb", type=float, default=3000.0, help="stop an attack past this RSS growth")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = []
    for name in args.attack or ATTACKS:
        server = Server(args.bin, CONFIG, grpc=True)
        try:
            tally = Tally()
            figures = measure(server, attackers(name, server.grpc_port, tally), args.duration, args.max_growth_mb)
        finally:
            server.stop()
        results.append({"attack": name, "requests": None, "statuses": tally.counts, **figures})
        print(f"  {name}: growth {figures['growth_mb']} MB, p99 {figures['one_row_p99_ms']} ms, "
              f"errors {figures['one_row_errors']}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"bin": args.bin, "duration_s": args.duration, "results": results}, indent=2))
        return
    print_table(f"{args.bin}: {args.duration:g} s per attack", results)


if __name__ == "__main__":
    main()
