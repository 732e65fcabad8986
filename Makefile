# Every target installs what it needs into ./.venv first, so each works on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench targets install clean

# setup.py builds the optional C extensions (remoting/codec/_speedups.c, store/_appender.c) in place: a changed C
# source reinstalls.
$(STAMP): pyproject.toml setup.py remoting/codec/*.c remoting/codec/*.h store/*.c store/*.h
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m broker.embedded --data ./data

test: $(STAMP)
	$(BIN)/python -m pytest -q
	ROCKETRIO_PURE_PYTHON=1 $(BIN)/python -m pytest -q tests/store tests/codec

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

targets: $(STAMP)
	$(BIN)/python -m bench.targets

bench: $(STAMP)
	$(BIN)/python -m bench.codec
	$(BIN)/python -m bench.records
	$(BIN)/python -m bench.store
	$(BIN)/python -m bench.rpc
	$(BIN)/python -m bench.broker
	$(BIN)/python -m bench.client
	$(BIN)/python -m bench.index
	$(BIN)/python -m bench.filter
	$(BIN)/python -m bench.delay
	$(BIN)/python -m bench.timer
	$(BIN)/python -m bench.transactions
	$(BIN)/python -m bench.spark
	$(BIN)/python -m bench.pop
	$(BIN)/python -m bench.grpc_stack
	$(BIN)/python -m bench.grpc_clients

clean:
	rm -rf $(VENV) data

# Real RocketMQ clients for tests/e2e (docs/protocol.md#9-real-clients): ali-ons under tests/e2e/node, the C++ core's
# Python wrapper in its own venv (its module is named `rocketmq`). Stamps make a second run a no-op.
.PHONY: e2e-deps
E2E_NODE := tests/e2e/node
E2E_CVS := .venv-cvs

$(E2E_NODE)/node_modules/.installed: $(E2E_NODE)/package.json $(E2E_NODE)/package-lock.json
	cd $(E2E_NODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(E2E_CVS)/.installed:
	$(PY) -m venv $(E2E_CVS)
	$(E2E_CVS)/bin/pip install -q rocketmq-python-cvs==2.1.0.3
	touch $@

e2e-deps: $(E2E_NODE)/node_modules/.installed $(E2E_CVS)/.installed

# The comparison suite (bench/compare, docs/PERFORMANCE.md): installs the peers' Debian packages on demand (root),
# runs rocketrio and each peer on 127.0.0.1, writes bench/results/compare.{json,png}.
.PHONY: compare
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $@

compare: $(BENCH_STAMP)
	$(BIN)/python -m bench.compare
