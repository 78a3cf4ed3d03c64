#!/usr/bin/env bash
# Runs the fuzz targets under AFL++ (cargo-afl, stable Rust).
#
#   fuzz/run.sh SECONDS [TARGET...]     each target for SECONDS (default: all targets)
#
# make fuzz-afl-quick runs every target for FUZZ_SECONDS (default 60), make fuzz
# for FUZZ_SECONDS (default 3600) each. (make test runs make fuzz-quick, the
# mutation-based quick run in tests/quick.rs, which needs no instrumented build.)
# Installs cargo-afl (crates.io) and builds AFL++ on first use. Instrumented
# builds go to target/afl (so they never invalidate the normal build), the
# findings to target/afl/out/<target>/. A crash or hang fails the run: its
# inputs are copied to fuzz/findings/<target>/ to be fixed and added to
# fuzz/regressions/<target>/ (replayed by cargo test).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(v2_json v2_binary grpc_infer config sse text_prefix)
say() { printf '\033[1m[fuzz]\033[0m %s\n' "$*" >&2; }

if ! cargo afl --version >/dev/null 2>&1; then
    say "installing cargo-afl (crates.io)"
    cargo install cargo-afl --locked --quiet
fi
# Builds AFL++ once per toolchain; says so (and fails) when already built.
cargo afl config --build >/dev/null 2>&1 || true

export CARGO_TARGET_DIR="$PWD/target/afl"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
say "building the instrumented targets (target/afl)"
cargo afl build --quiet -p switchyard-fuzz --features afl --bins

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1
export AFL_SKIP_CRASHES=1 AFL_QUIET=1
failed=()
for target in "${TARGETS[@]}"; do
    binary="$CARGO_TARGET_DIR/debug/fuzz-${target//_/-}"
    out="$CARGO_TARGET_DIR/out/$target"
    rm -rf "$out"
    mkdir -p "$CARGO_TARGET_DIR/out"
    say "$target: ${SECONDS_EACH}s"
    cargo afl fuzz -V "$SECONDS_EACH" -t 2000 -i "fuzz/corpus/$target" -o "$out" "$binary" >"$out.log" 2>&1 || {
        say "$target: afl-fuzz failed, see $out.log"; tail -20 "$out.log" >&2 || true; failed+=("$target"); continue; }
    stats="$out/default/fuzzer_stats"
    execs=$(awk -F': *' '/^execs_done/{print $2}' "$stats" 2>/dev/null || echo "?")
    paths=$(awk -F': *' '/^corpus_count/{print $2}' "$stats" 2>/dev/null || echo "?")
    found=$(find "$out/default/crashes" "$out/default/hangs" -type f -name 'id:*' 2>/dev/null | wc -l)
    say "$target: $execs executions, $paths inputs in the queue, $found crashes/hangs"
    if [ "$found" -gt 0 ]; then
        mkdir -p "fuzz/findings/$target"
        find "$out/default/crashes" "$out/default/hangs" -type f -name 'id:*' -exec cp {} "fuzz/findings/$target/" \;
        failed+=("$target")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    say "FAILED: ${failed[*]} (inputs in fuzz/findings/)"
    exit 1
fi
say "no crash or hang in ${TARGETS[*]}"
