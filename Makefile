# Two commands on a fresh machine (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
# torch is installed first and pinned, so the other packages never pull in a different build.
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
# e.g. make demo DEMO_ARGS="--force" to replace an earlier ./autoresearch-demo
DEMO_ARGS ?=

.PHONY: setup demo test check tools clean

setup: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)"
	$(PY) -m pip install -q -e ".[ml,report,test,pool]"
	touch $@

demo: setup
	$(VENV)/bin/autoresearch demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest

# The fast inner loop before a commit (under 3 minutes on a 2-core machine): every room's unit and
# contract tests, no browser, Claude CLI, Ray, training or long real runs (tests/conftest.py NEEDS
# lists what is left out), spread over the machine's cores (pytest-xdist). `make test` stays serial.
check: setup
	$(PY) -m pytest -q -m "not slow" -n auto

# Headless Chromium and the pinned Claude Code CLI, for the browser and plugin tests.
tools:
	bash scripts/install-test-tools.sh

clean:
	rm -rf $(VENV) .tools
