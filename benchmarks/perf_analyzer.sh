#!/usr/bin/env bash
# Runs Triton's perf_analyzer, unmodified, against a running V2 server.
#
#   benchmarks/perf_analyzer.sh PORT MODEL [extra perf_analyzer args]
#   PERF_PROTOCOL=grpc benchmarks/perf_analyzer.sh GRPC_PORT MODEL [...]
#
# PERF_PROTOCOL picks perf_analyzer's protocol (`-i`): http (the default:
# Triton's V2 REST with binary tensors) or grpc (inference.GRPCInferenceService,
# e.g. `switchyard serve --grpc-listen 127.0.0.1:8001`); PORT is the port
# that speaks it.
#
# perf_analyzer comes from the tritonclient==2.50.0 wheel (the newer
# standalone package needs a newer glibc than Debian 12's), installed into
# .venv-perf with the CUDA runtime wheel it links against by
# `scripts/setup.sh bench` (benchmarks/perf_analyzer-requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=$1; MODEL=$2; shift 2
PROTOCOL="${PERF_PROTOCOL:-http}"
case "$PROTOCOL" in
    http|grpc) ;;
    *) echo "perf_analyzer.sh: PERF_PROTOCOL must be http or grpc, not '$PROTOCOL'" >&2; exit 2 ;;
esac
VENV=.venv-perf
if [ ! -x "$VENV/bin/perf_analyzer" ]; then
    scripts/setup.sh bench >&2 || exit 1
fi
CUDART=$(echo "$PWD/$VENV"/lib/python3*/site-packages/nvidia/cuda_runtime/lib)
LD_LIBRARY_PATH="$CUDART${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$VENV/bin/perf_analyzer" -i "$PROTOCOL" -u "127.0.0.1:$PORT" -m "$MODEL" "$@"
