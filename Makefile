# Enginewright developer entry points. Everything heavy is cached under $(CACHE).
CACHE ?= $(HOME)/.cache/enginewright
PYTHON ?= python3
DEPS_KEY := $(shell cat pyproject.toml | sha256sum | cut -c1-12)
VENV := $(CACHE)/venv-$(DEPS_KEY)
PY := $(VENV)/bin/python
export ENGINEWRIGHT_CACHE := $(CACHE)

.PHONY: setup venv binaries test unit e2e crds crds-check cluster-up demo clean-cache

setup: venv binaries

venv: $(VENV)/.installed
	@$(PY) -m pip install -q --no-deps --no-build-isolation -e . >/dev/null

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q 'setuptools>=68' -e '.[test]'
	touch $@

binaries:
	bash tests/cluster/build.sh

# The test command CI runs: unit tests, then end-to-end tests against the real local cluster.
test: venv
	$(PY) -m pytest -ra tests

unit: venv
	$(PY) -m pytest -q tests/unit

e2e: venv
	$(PY) -m pytest -ra tests/e2e

crds: venv
	$(VENV)/bin/enginewright crds

cluster-up: setup
	$(PY) -m tests.cluster up

clean-cache:
	rm -rf $(CACHE)
