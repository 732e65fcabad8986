# Every target installs what it needs into ./.venv first, so each works on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-suite test-pure-python test-setup system extensions lint bench targets install clean

# setup.py builds the optional C extensions (remoting/codec/_speedups.c, store/_appender.c, dledger/_entries.c)
# in place: a changed C source reinstalls.
$(STAMP): pyproject.toml setup.py remoting/codec/*.c remoting/codec/*.h store/*.c store/*.h dledger/*.c
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The embedded cluster and, beside it, mqdashboard on http://127.0.0.1:8080/ (scripts/run; ROCKETRIO_BROKERS=N for N
# master brokers, ROCKETRIO_SLAVES=M for M slaves of each).
run: $(STAMP)
	BIN=$(BIN) scripts/run

# `make test` sets up everything the suite drives (test-setup), runs it (test-suite), then runs PURE_PYTHON_TESTS once
# more on the pure-Python path a user without a compiler gets (test-pure-python). CI runs the whole suite that way too,
# side by side with the first run (.ci/run).
PURE_PYTHON_TESTS ?= tests/store tests/codec
test: test-suite test-pure-python

test-suite: test-setup
	$(BIN)/python -m pytest -q

test-pure-python: test-setup
	ROCKETRIO_PURE_PYTHON=1 $(BIN)/python -m pytest -q $(PURE_PYTHON_TESTS)

# In this order, each step a check or a stamp (a second run takes under a second): the Debian packages
# (scripts/setup-system: a compiler, zlib's headers, Node.js, Java 17, python3-venv), ./.venv, the C extensions, the
# two real RocketMQ clients. Not under make -j on a fresh machine: the packages must come first.
test-setup: system $(STAMP) extensions e2e-deps

system:
	PY=$(PY) scripts/setup-system

# A venv made before the compiler was there has no C extensions (their build is optional): build them now.
EXTENSIONS := import remoting.codec._speedups, store._appender, dledger._entries
extensions: $(STAMP)
	@$(BIN)/python -c '$(EXTENSIONS)' 2>/dev/null || $(BIN)/pip install -q --no-deps -e .
	@$(BIN)/python -c '$(EXTENSIONS)' || { echo "the C extensions did not build (see $(BIN)/pip install -v -e .)" >&2; exit 1; }

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
	$(BIN)/python -m bench.filter_fairness
	$(BIN)/python -m bench.delay
	$(BIN)/python -m bench.timer
	$(BIN)/python -m bench.transactions
	$(BIN)/python -m bench.spark
	$(BIN)/python -m bench.pop
	$(BIN)/python -m bench.grpc_stack
	$(BIN)/python -m bench.grpc_clients
	$(BIN)/python -m bench.security

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
