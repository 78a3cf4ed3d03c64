"""Why Switchyard loses where it loses: one known reason per comparison,
from profiles and earlier runs (benchmarks/NOTES.md and
benchmarks/RESULTS-cache.md have the measurements behind them).

The report prints the reason next to every comparison Switchyard loses in
the run at hand. A comparison with no entry here says so plainly: a loss
nobody has explained yet is a loss to investigate, not to hide.
"""

from __future__ import annotations

REASONS = {
    "raw-limit.digits-cheap": (
        "digits-cheap is a ~3 µs model: at its best batch size a bare `Session::run` loop does millions of rows/s "
        "with no I/O at all, while every gateway request pays a fixed cost of the same order as hundreds of model "
        "rows: kernel TCP send/receive and scheduling (about half the gateway's CPU in `perf record`), HTTP parsing, "
        "JSON decoding (~10%, of which half is a second scan of `data`), malloc/free (~12%), the hand-off to the "
        "pool's worker thread and back. Batching amortises the model call, not the per-request I/O. A fraction "
        "near 100% is only reachable for models whose compute dwarfs a request's I/O (synth-heavy)."),
    "raw-limit.synth-heavy": (
        "the HTTP thread, JSON decoding and response encoding run on the same pinned CPU as the model's worker, so "
        "every µs they take is model time lost; at low concurrency the batcher's queue delay (500 µs) also leaves "
        "the worker idle between batches, and batches stay smaller than the best batch size of the raw limit."),
    "goal.10x-fastapi": (
        "the ratio rests on the baseline's own throughput, which moves a lot from run to run (3.0k-3.9k req/s "
        "in the quiet runs of 2026-11-22, which measured 8.4x and 10.9x): the goal is at the edge of what this "
        "machine shows even when quiet. On a busy machine both servers lose CPU to other work and the ratio "
        "says little; see the noise note in the header."),
    "runtime-overhead.synth-wide": (
        "no known reason: quiet runs measured 96-102% on this model (12 ms per batch, so per-execution overhead "
        "is negligible). The direct loop and the runtime path are measured one after the other: on a busy "
        "machine the load changes in between; re-run on a quiet machine."),
    "runtime-overhead.synth-heavy": (
        "no known reason: quiet runs measured 96-102% on this model (~5 ms per batch of 8, so per-execution "
        "overhead is negligible). The direct loop and the runtime path are measured one after the other: on a "
        "busy machine the load changes in between; re-run on a quiet machine."),
    "runtime-overhead.one-caller": (
        "a lone caller of a microsecond model runs its request on its own thread (`inline_max_us`) and skips the "
        "hand-off, but still pays per request what a bare loop does not: validating the inputs, wrapping its "
        "tensor for ONNX Runtime (lent, not copied), the pool's statistics and histograms, and copying outputs "
        "into response tensors with their names, plus every 256th request queued as a probe for rising load; "
        "at batch 32 the request (~150 µs) is above `inline_max_us` and goes through the worker thread; see "
        "benchmarks/NOTES.md (inline runs; a lone request's bookkeeping, again)."),
    "runtime-overhead": (
        "on tiny models the fixed cost of one execution through the runtime (hand-off to the worker thread and "
        "back, building the ONNX Runtime input value, copying outputs into response tensors: ~5-7 µs) is of the "
        "same size as the model itself (digits-cheap ~3 µs at batch 1, digits-heavy ~60 µs at batch 32); under "
        "concurrent load dynamic batching amortises it, a single caller of a microsecond model pays it."),
    "peers.fastapi": (
        "no known reason: Switchyard lost to the FastAPI baseline here. On a busy machine compare with the load "
        "average in the header and re-run before trusting it; otherwise profile both (perf record)."),
    "peers.mlserver": (
        "no known reason: Switchyard lost to MLServer here. On a busy machine compare with the load average in the "
        "header and re-run before trusting it; otherwise profile both (perf record)."),
    "peers.p99-batching": (
        "dynamic batching trades a little latency for throughput: a request can wait up to the model's "
        "max_queue_delay and then for a whole batch of up to max_batch_size rows to run (synth-heavy: 16 rows x "
        "~1.4 ms), so at low concurrency a peer that runs each request alone can have the lower tail."),
    "cache.throughput": (
        "CPU per hit: Switchyard parses the JSON request into tensors to build its canonical cache key (serde_json "
        "number parsing, ~16% of a hit in `perf record`), hashes it with blake3 (~4%), allocates (~8%) and encodes "
        "the V2 response for each hit; nginx keys on the raw bytes (MD5 of URI + body) and sends the cached file "
        "as is. The canonical key is what lets JSON and binary requests and different `id`s share an entry. Ideas "
        "not done yet: a first-level key over the raw body bytes, keeping encoded responses in L1."),
    "cache.p99": (
        "the generator is the floor here: loadgen against its own trivial server at the same rate and connections "
        "measures a p99 of the same size (the 'generator alone' row), from tokio's 1 ms timer ticks releasing "
        "requests in bursts on one CPU. On two CPUs, with the generator and the server one CPU each, a p99 under "
        "1 ms cannot be shown by this harness; the published figure was on more cores."),
    "cache.p99-vs-nginx": (
        "see the throughput row: more CPU per hit than nginx means more queueing behind bursts on one CPU."),
    "overload.spill": (
        "the two pools share the machine's cores: a batch on the spill pool slows the preferred pool faster than "
        "the latency estimates follow, so some requests placed as fitting finish late; the placement keeps 30% of "
        "each request's remaining budget in reserve (routing::SAFETY_MARGIN) for this. On a busy machine the "
        "other processes take the rest."),
    "overload.pinned": (
        "expected: without spill-over the preferred pool alone cannot serve 2x its capacity; this row is the "
        "reference, not a goal."),
    "cascade.goal": (
        "the confidence threshold decides the trade: a higher threshold escalates more and gains accuracy; the "
        "digits models are so cheap that escalation share, not compute, is the scarce resource."),
    "memory.fastapi": (
        "Switchyard keeps each pool's ONNX Runtime session with its CPU memory arena, which grows to the largest "
        "batch it has run (up to 64 rows) and is kept for reuse; the peers run one row at a time."),
    "memory.mlserver": (
        "Switchyard keeps each pool's ONNX Runtime session with its CPU memory arena, which grows to the largest "
        "batch it has run (up to 64 rows) and is kept for reuse."),
    "startup": (
        "Switchyard loads models lazily unless `warmup = true`: start-up is quick, the first request to a model "
        "pays its load; the figure compared is until every model has answered once."),
    "open-loop.knee": (
        "no known reason: a peer kept up with a higher offered rate than Switchyard here. Check the noise (load "
        "average) and the generator's send lag before trusting it."),
    "draft-final.draft": (
        "a stream's draft is a V2 JSON document framed as an SSE event and written as one HTTP chunk, and in "
        "parallel mode the heavy model's run starts beside the cheap one on the same two CPUs (shared with the "
        "load generator): the cheap model alone has the CPU to itself. On a ~0.4 ms model that fixed cost is a "
        "large share; see benchmarks/NOTES.md (draft then final)."),
    "draft-final.final": (
        "in parallel mode the cheap and the heavy model of one stream compete for the same CPUs; at 1 stream the "
        "heavy model alone has a core to itself, so the final pays part of the cheap run. With more streams the "
        "CPUs are saturated either way and the final comes within a few percent of the heavy model alone."),
    "proxy.cpu": (
        "per proxied request Pingora makes 3 `sendto` (the request head and body to the upstream are flushed "
        "separately, then the response) where nginx makes 2 `writev`; on loopback each send also runs the "
        "receiver's TCP processing. Profiles are dominated by the kernel send path and Pingora's proxy loop, not "
        "by Switchyard's route code; closing the gap needs one vectored write of head and body in Pingora."),
    "text": (
        "no known reason: on quiet runs Switchyard's tokenisation, batching and HTTP in Rust beat the baseline; a "
        "loss here usually means outside load hit one side's runs (the two servers run one after the other)."),
    "tenants.fair": (
        "the light tenant is admitted below its share, but it still waits for the queue the heavy tenant keeps "
        "full (a quarter of it reserved); a loss here usually means the gateway starved for CPU on a busy machine "
        "and routing shed the light tenant by its budget. See benchmarks/NOTES.md (tenants under overload)."),
    "tenants.priority": (
        "without `reserve_top_class` a high-class request that arrives while a batch of low-class requests "
        "executes waits for it (~4.5 ms for 8 rows of synth-heavy; `preempt` stops it at the next node, ~1.7-1.9x); "
        "with it the high class has a session of its own and the low batch's thread runs at nice 19, 1.07x on a "
        "quiet machine. A loss with it means outside load took the CPU the lowered thread yields. See "
        "benchmarks/NOTES.md (a session reserved for the first class)."),
    "tenants.deadline": (
        "no known reason: in deadline order the short-budget requests leave first; a loss means the run was not "
        "overloaded (the capacity measured too high) or the machine was busy."),
    "store.start": (
        "a cold start is process start + listing the store + pulling + ONNX Runtime session creation + the first "
        "run; on a busy machine each step waits for CPU (the goal figures are Everinfer's, on their hardware)."),
    "store.download": (
        "against moto the store's parts are written in place as they arrive and synced early (1.35x boto3 on "
        "2026-11-25); a loss here means the machine was busy during the store's runs (moto, the client and the "
        "disk share two CPUs) or a real endpoint behaves differently. See benchmarks/NOTES.md (model store)."),
    "grpc.wide-b32-c4": (
        "synth-wide at batch 32 is compute-bound: ~12.7 ms of server CPU per request (32 rows) whichever way the "
        "tensor travels. Its input is 2,048 floats (8 KB): reading them as JSON numbers costs the server well under "
        "1% of that (REST-JSON and REST-binary from loadgen: the same CPU per request, the same rate), so gRPC's raw "
        "contents cannot win 1.2x here over either REST encoding. The goal holds where the tensor, not the model, "
        "is the work: digits-cheap at batch 64 (the `digits-b64-c4` row, gRPC about 2.7x REST with JSON tensors)."),
    "grpc.digits-b1-c40": (
        "no known reason: in the runs of 2026-11-25 gRPC used less server CPU per request than REST (0.88x) and "
        "answered more; a loss here usually means other work on the machine hit the gRPC rounds. Compare the "
        "per-round ratios and the CPU columns, and re-run on a quiet machine."),
    "grpc.perf": (
        "perf_analyzer over gRPC needs ModelMetadata, ModelConfig (shape, max_batch_size) and ModelInfer with "
        "raw contents; its error is quoted in the row. Check `--grpc-listen` was up (the stage waits for the port)."),
    "perf.fastapi": (
        "no known reason: perf_analyzer measured the FastAPI baseline faster here; check the noise and re-run."),
}


def explain(key: str) -> str:
    """The known reason for a loss in comparison `key`; "a.b.c" falls back to
    "a.b" then "a"; else a plain 'no known reason'."""
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        found = REASONS.get(".".join(parts[:i]))
        if found:
            return found
    return ("no known reason yet: Switchyard lost this comparison in this run; re-run on a quiet machine and "
            "profile before trusting it.")
