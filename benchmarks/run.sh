#!/usr/bin/env bash
# The benchmark suite: every stage in benchmarks/stages/, in order, then the
# report (benchmarks/RESULTS.md and benchmarks/plots/*.png).
#
#   benchmarks/run.sh quick [STAGE...]   a few minutes: short runs (make bench-quick)
#   benchmarks/run.sh full  [STAGE...]   the whole suite, longer runs (make bench)
#   benchmarks/run.sh report             only regenerate the report from benchmarks/out/
#
# A stage is an executable benchmarks/stages/NN-NAME.* called as `STAGE MODE`;
# it writes benchmarks/out/NAME.json (benchmarks/README.md, "Adding a stage")
# and exits 0 (ok), 3 (not run: a slot, or something it needs is missing) or
# anything else (failed). A failed stage is reported and the suite goes on.
# Naming stages runs only those and keeps the other stages' earlier results.
#
# Pinning (>= 2 CPUs): every server on CPU 1, every load generator on CPU 0
# (BENCH_SERVER_CPUS / BENCH_CLIENT_CPUS override). Stage output goes to the
# terminal and to benchmarks/out/logs/NAME.log.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-quick}"
shift || true
OUT=benchmarks/out
PY=.venv/bin/python
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/.cache/onnxruntime/libonnxruntime.so.1.31.1}"
export PYTHONPATH="$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"

bold() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }
red() { printf '\033[1;31m[bench] %s\033[0m\n' "$*" >&2; }
die() { red "$*"; exit 1; }
hms() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
report() { "$PY" benchmarks/report.py; }

case "$MODE" in
    quick) STAGE_LIMIT=600 ;;
    full) STAGE_LIMIT=2400 ;;
    report) report; exit $? ;;
    *) die "usage: $0 quick|full [STAGE...] | report" ;;
esac
[ -x "$PY" ] || die "missing $PY: run scripts/setup.sh bench (make bench-quick does)"

# The stages, in order; with arguments, only the named ones.
STAGES=()
for f in benchmarks/stages/[0-9]*; do
    [ -x "$f" ] || continue
    name=$(basename "$f"); name=${name#*-}; name=${name%.*}
    if [ $# -gt 0 ]; then
        printf '%s\n' "$@" | grep -qx "$name" || continue
    fi
    STAGES+=("$f")
done
[ ${#STAGES[@]} -gt 0 ] || die "no stage matches: $*"

SUITE_START=$(date +%s)
bold "mode $MODE, ${#STAGES[@]} stage(s); $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
bold "building release binaries (switchyard, loadgen, runtime-bench, the spill-over test)"
cargo build --release -q -p switchyard -p switchyard-benchmarks || die "release build failed"
cargo test --release -q --no-run -p switchyard --test spill_over || die "release build of the spill-over test failed"

mkdir -p "$OUT/logs"
if [ $# -eq 0 ]; then
    # A whole run replaces every earlier result, so the report never mixes runs.
    for f in "${STAGES[@]}"; do
        name=$(basename "$f"); name=${name#*-}; name=${name%.*}
        rm -rf "${OUT:?}/$name" "$OUT/$name.json" "$OUT/logs/$name.log"
    done
    "$PY" -m benchlib.suite start "$MODE" || die "could not write $OUT/suite.json"
elif [ ! -f "$OUT/suite.json" ]; then
    "$PY" -m benchlib.suite start "$MODE" || die "could not write $OUT/suite.json"
fi

i=0; FAILED=(); NOT_RUN=()
for f in "${STAGES[@]}"; do
    i=$((i + 1))
    name=$(basename "$f"); name=${name#*-}; name=${name%.*}
    what=$(grep -m1 -oE 'Stage\("[^"]+", "[^"]+"' "$f" | sed -E 's/^Stage\("[^"]+", "//; s/"$//')
    log="$OUT/logs/$name.log"
    bold "stage $i/${#STAGES[@]}: $name - ${what:-?} (suite elapsed $(hms $(($(date +%s) - SUITE_START))))"
    t0=$(date +%s)
    # --foreground: Ctrl-C reaches the stage (which stops its servers); on its
    # time limit the stage gets SIGTERM and stops them the same way.
    timeout --foreground --signal=TERM --kill-after=30 "$STAGE_LIMIT" "$f" "$MODE" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    took=$(($(date +%s) - t0))
    case $rc in
        0) status=ok ;;
        3) status=not-run; NOT_RUN+=("$name") ;;
        124|137) status=failed; FAILED+=("$name (timed out after ${STAGE_LIMIT} s)") ;;
        *) status=failed; FAILED+=("$name (exit $rc)") ;;
    esac
    "$PY" -m benchlib.suite stage "$name" "$status" "$rc" "$took" "$log"
    if [ "$status" = failed ]; then
        red "stage $i/${#STAGES[@]}: $name FAILED (exit $rc) after $(hms "$took"); log: $log; going on"
    else
        bold "stage $i/${#STAGES[@]}: $name $status in $(hms "$took")"
    fi
done

TOTAL=$(($(date +%s) - SUITE_START))
"$PY" -m benchlib.suite finish "$TOTAL"
bold "writing the report"
report || die "the report generator failed"
bold "done in $(hms "$TOTAL"): benchmarks/RESULTS.md, benchmarks/plots/"
[ ${#NOT_RUN[@]} -eq 0 ] || bold "not run: ${NOT_RUN[*]}"
if [ ${#FAILED[@]} -gt 0 ]; then
    red "failed: ${FAILED[*]}"
    exit 1
fi
