#!/usr/bin/env python3
"""Hostile REST attacks against a `switchyard` binary (issue 37, items 3
and 4): how much memory an attack takes and whether other clients are
still served while it runs.

Each attack runs against a fresh gateway (free loopback ports, a config in
a temporary folder): `--attackers` clients send the attack for
`--duration` seconds while one more client sends one-row infer calls
(digits) back to back. The server's RSS is sampled every 100 ms from
/proc. Per attack it prints: the attack requests and their statuses, the
idle RSS (before the attack), the peak and its growth, and the one-row
calls' count, errors, p50 and p99 latency. The issue's bar: growth under
100 MB and p99 under 100 ms on a release build.

Attacks (`--attack`, several allowed; default all but `bytes`):

* `inputs`, `outputs`, `id`, `parameters`, `shape`, `output-parameters`:
  8 MiB JSON bodies that are one long list of tiny entries (item 3; e.g.
  `{"inputs":[{},{},...]}`, 2.8 M entries), sent to the digits route;
* `bytes`: 8 MiB of JSON `BYTES` data of empty strings in one input
  (within the limits; about 32 bytes of memory per 3 bytes of text);
* `record`: the same 7.7 MB binary request (30,000 rows) repeated to a
  route recorded at sample 1.0 with default record settings (cache hits;
  item 4).

A run stops an attack early when the RSS grows past `--max-growth-mb`
(default 3000), to keep the machine alive. Example:

    benchmarks/hostile/rest_attacks.py --bin target/release/switchyard --duration 15
"""

import argparse
import json
import struct
import sys
import threading

import requests

from harness import Server, measure, print_table

BODY = 8 << 20
RECORD_ROWS = 30_000

CONFIG = """
[cache]

[[models]]
name = "digits-cheap"
path = "{models}/digits-cheap.onnx"
limits = {{ max_rows = 40000 }}
warmup = true

[[routes]]
name = "digits"
models = ["digits-cheap"]

[[routes]]
name = "recorded"
models = ["digits-cheap"]
record = {{ sample = 1.0, path = "{dir}/traffic/recorded.jsonl" }}
"""

def fill(prefix: bytes, item: bytes, suffix: bytes) -> bytes:
    n = (BODY - len(prefix) - len(suffix)) // (len(item) + 1)
    return prefix + b",".join([item] * n) + suffix


def attack_request(name):
    """(route, body, headers) of one attack request."""
    json_headers = {"Content-Type": "application/json"}
    lists = {
        "inputs": (b'{"inputs":[', b"{}", b"]}"),
        "outputs": (b'{"inputs":[],"outputs":[', b"{}", b"]}"),
        "id": (b'{"id":[', b"[]", b'],"inputs":[]}'),
        "parameters": (b'{"parameters":{"a":[', b"0", b']},"inputs":[]}'),
        "shape": (b'{"inputs":[{"name":"X","datatype":"FP32","shape":[', b"1", b'],"data":[1]}]}'),
        "output-parameters": (b'{"inputs":[],"outputs":[{"name":"p","parameters":{"a":[', b"0", b"]}}]}"),
    }
    if name in lists:
        return "digits", fill(*lists[name]), json_headers
    if name == "bytes":
        n = (BODY - 100) // 3
        body = b'{"inputs":[{"name":"X","datatype":"BYTES","shape":[1,%d],"data":[' % n
        return "digits", body + b",".join([b'""'] * n) + b"]}]}", json_headers
    if name == "record":
        header = json.dumps({
            "inputs": [{"name": "X", "shape": [RECORD_ROWS, 64], "datatype": "FP32",
                        "parameters": {"binary_data_size": RECORD_ROWS * 64 * 4}}],
            "outputs": [{"name": "label", "parameters": {"binary_data": True}}],
        }).encode()
        data = struct.pack("<64f", *[i / 8 for i in range(64)]) * RECORD_ROWS
        return "recorded", header + data, {"Inference-Header-Content-Length": str(len(header)),
                                           "Content-Type": "application/octet-stream"}
    raise SystemExit(f"unknown attack {name!r}")


ATTACKS = ["inputs", "outputs", "id", "parameters", "shape", "output-parameters", "bytes", "record"]
DEFAULT = [a for a in ATTACKS if a != "bytes"]


def run_attack(binary, name, args):
    server = Server(binary, CONFIG)
    try:
        route, body, headers = attack_request(name)
        statuses = {}
        lock = threading.Lock()

        def attack(stop):
            session = requests.Session()
            while not stop.is_set():
                try:
                    status = session.post(f"{server.base}/v2/models/{route}/infer", data=body,
                                          headers=headers, timeout=120).status_code
                except requests.RequestException as e:
                    status = type(e).__name__
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1

        figures = measure(server, [attack] * args.attackers, args.duration, args.max_growth_mb)
        return {"attack": name, "requests": sum(statuses.values()),
                "statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)}, **figures}
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the switchyard binary")
    parser.add_argument("--attack", action="append", choices=ATTACKS, help="attacks to run (default: all but bytes)")
    parser.add_argument("--attackers", type=int, default=4, help="attacking clients (default 4)")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per attack (default 15)")
    parser.add_argument("--max-growth-mb", type=float, default=3000.0, help="stop an attack past this RSS growth")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = []
    for name in args.attack or DEFAULT:
        results.append(run_attack(args.bin, name, args))
        if not args.json:
            print(f"  {name}: growth {results[-1]['growth_mb']} MB, p99 {results[-1]['one_row_p99_ms']} ms",
                  file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"bin": args.bin, "attackers": args.attackers, "duration_s": args.duration,
                          "results": results}, indent=2))
        return
    print_table(f"{args.bin}: {args.attackers} attackers, {args.duration:g} s per attack", results)


if __name__ == "__main__":
    main()
