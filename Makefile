# metakit's tasks.  Two commands do all the set-up on a fresh machine:
#
#     make bench    # the demo and the full benchmark, in .venv (Python 3.11, torch)
#     make check    # every check CI runs (.ci/run is `make check`)
#
# Every step of `make check` also runs on its own: `make lint`, `make types`,
# `make test` (3.11, with torch), `make test-3.10` (or 3.12 to 3.15: without
# torch), `make bench-quick`, `make package`.  `make help` lists them all,
# with `make bench-record` and `make count-record`, which record the figures of docs/benchmarks.md.
#
# The virtual environments (.venv, .venv-3.10, ...) are made from python3.X
# on PATH or in pyenv (else installed by get-python, as 3.14 and 3.15 are
# where the machine lacks them) and kept up to date by .ci/venv.sh: each step installs
# what it needs first, and only what changed.  Arguments for pytest or the
# benchmark go in ARGS: `make test ARGS="-k replace -x"`, `make bench ARGS=--quick`.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
# Each test run starts a hundred Pythons and has pytest rewrite the asserts of every test module in every worker
# (about 7 s a run): where the environment says not to write bytecode, the next run would do it all again.
# What they compile goes to __pycache__, which git ignores and the package leaves out.
unexport PYTHONDONTWRITEBYTECODE
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PYTHON_VERSION := 3.11
OTHER_VERSIONS := 3.10 3.12 3.13 3.14 3.15
VENV := .venv
PY := $(VENV)/bin/python
ARGS ?=

# With METAKIT_NO_SKIPS=1 a skipped test fails the run (tests/conftest.py).
# The tests run in worker processes (pytest-xdist), one a core up to four;
# worksteal evens out the few long tests.  `ARGS="-n 0"` runs them in one.
# Each run ends with its ten slowest tests, so that a CI log shows where the time went.
XDIST := --numprocesses=auto --maxprocesses=4 --dist=worksteal --durations=10
PYTEST := METAKIT_NO_SKIPS=1 $(PY) -m pytest $(XDIST)

step = @echo && echo "=== $(1)"

.PHONY: help check bench bench-quick bench-record count-record $(OTHER_VERSIONS:%=bench-%) lint format types test \
	test-$(PYTHON_VERSION) $(OTHER_VERSIONS:%=test-%) test-gpu package mypy-matrix venv $(OTHER_VERSIONS:%=venv-%)

help:  ## list the targets
	@echo "usage: make TARGET [ARGS=...]"
	@grep -E '^[a-z0-9.%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([^:]+):.*## /  \1\t/' | expand -t 18
	@echo "  $(OTHER_VERSIONS:%=test-%)"
	@echo "                  the tests that need no torch, on that Python"
	@echo "  $(OTHER_VERSIONS:%=bench-%)"
	@echo "                  the benchmark on that Python (no torch: the engine's torch-free twins)"

check: lint types test $(OTHER_VERSIONS:%=test-%) bench-quick package  ## every check, as CI runs it
	$(call step,all checks passed)

bench: venv  ## the demo and the full benchmark (about 2 minutes)
	$(PY) -m metakit bench $(ARGS)

$(OTHER_VERSIONS:%=bench-%): bench-%: venv-%
	.venv-$*/bin/python -m metakit bench $(ARGS)

bench-record: venv $(OTHER_VERSIONS:%=venv-%)  ## full runs on 3.10 to 3.15 into .ci/bench-3.X.{txt,json} and .ci/bench.png, and the broadcast's into .ci/broadcast-3.11.{txt,json}
	$(PY) -m metakit bench --json .ci/bench-$(PYTHON_VERSION).json --plot .ci/bench.png | tee .ci/bench-$(PYTHON_VERSION).txt
	$(PY) -m metakit bench --distributed --json .ci/broadcast-$(PYTHON_VERSION).json | tee .ci/broadcast-$(PYTHON_VERSION).txt
	for version in $(OTHER_VERSIONS); do \
		.venv-$$version/bin/python -m metakit bench --json .ci/bench-$$version.json | tee .ci/bench-$$version.txt; \
	done

count-record: venv $(OTHER_VERSIONS:%=venv-%)  ## instruction counts of class creation and of asdict_zerocopy() on 3.10 to 3.15 into .ci/{creation,calls}-3.X.{txt,json} (valgrind; about 6 minutes each)
	.ci/count-creation $(PY) --json .ci/creation-$(PYTHON_VERSION).json | tee .ci/creation-$(PYTHON_VERSION).txt
	.ci/count-calls $(PY) --json .ci/calls-$(PYTHON_VERSION).json | tee .ci/calls-$(PYTHON_VERSION).txt
	for version in $(OTHER_VERSIONS); do \
		.ci/count-creation .venv-$$version/bin/python --json .ci/creation-$$version.json | tee .ci/creation-$$version.txt; \
		.ci/count-calls .venv-$$version/bin/python --json .ci/calls-$$version.json | tee .ci/calls-$$version.txt; \
	done

bench-quick: venv  ## bench --quick and bench --quick --distributed: a missed target is printed, not a failure
	$(call step,benchmark: bench --quick; then the broadcast benchmark)
	$(PY) -m metakit bench --quick
	$(PY) -m metakit bench --quick --distributed

lint: venv  ## ruff check and ruff format --check
	$(call step,lint: ruff)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv  ## ruff format and ruff check --fix: change the files
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

types: venv  ## mypy --strict on metakit/, as Python 3.10, 3.13 and 3.14 see it
	$(call step,types: mypy --strict on metakit/)
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --python-version 3.13
	$(VENV)/bin/mypy --python-version 3.14

test: venv  ## every test but tests/gpu/, on Python 3.11 with torch
	$(call step,tests on Python $(PYTHON_VERSION) with torch)
	$(PY) -c "import torch"  # the torch tests must run, not be skipped
	$(PYTEST) --ignore=tests/gpu $(ARGS)

test-torch-%:  ## e.g. test-torch-2.14.1: every test on that torch, in .venv-torch-2.14.1 (a CUDA build: several GB)
	$(call step,tests on Python $(PYTHON_VERSION) with torch $*)
	@METAKIT_TORCH=$* .ci/venv.sh .venv-torch-$* $(PYTHON_VERSION) torch,bench dev
	.venv-torch-$*/bin/python -c "import torch; assert torch.__version__.split('+')[0] == '$*', torch.__version__"
	METAKIT_NO_SKIPS=1 .venv-torch-$*/bin/python -m pytest $(XDIST) --ignore=tests/gpu $(ARGS)

test-gpu: venv  ## tests/gpu/: on a machine with a CUDA device (not part of make check)
	$(call step,tests on the CUDA device)
	$(PY) -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
	$(PYTEST) --numprocesses=0 tests/gpu $(ARGS)  # one process: the GPU tests share the device

test-$(PYTHON_VERSION): test

$(OTHER_VERSIONS:%=test-%): test-%: venv-%  ## the tests that need no torch, on that Python
	$(call step,tests without torch on Python $*)
	METAKIT_NO_SKIPS=1 .venv-$*/bin/python -m pytest $(XDIST) --ignore=tests/torch --ignore=tests/gpu $(ARGS)

package: venv  ## build the wheel and sdist, check what they hold, use the wheel from a fresh venv
	$(call step,package: wheel and sdist)
	.ci/package-check

mypy-matrix:  ## the mypy plugin's tests against the oldest mypy it supports, 1.12
	.ci/mypy-matrix $(ARGS)

venv:  ## create or update .venv: Python 3.11, metakit[torch,bench] and the dev tools
	@.ci/venv.sh $(VENV) $(PYTHON_VERSION) torch,bench dev

# No torch on these: the benchmark measures torch-free twins there, with its peers.
$(OTHER_VERSIONS:%=venv-%): venv-%:
	@.ci/venv.sh .venv-$* $* bench test

.PHONY: docs
docs: venv  ## docs/benchmarks.md from the recorded runs .ci/{bench,creation,calls,broadcast}-3.X.json (`make bench-record count-record docs` records them first)
	$(PY) -m metakit.bench.docs --output docs/benchmarks.md .ci/bench-3.*.json --creation $(wildcard .ci/creation-3.*.json) \
		--calls $(wildcard .ci/calls-3.*.json) --broadcast $(wildcard .ci/broadcast-3.*.json)
