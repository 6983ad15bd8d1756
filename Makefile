# Two commands for a fresh machine: `make demo` and `make test`.
# Both create .venv/ here and install the pinned requirements first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# The Node.js LTS pinned in package.json (npm installs it into node_modules/)
# runs the CDK CLI and the jsii runtime behind aws-cdk-lib, whatever Node the machine has.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

# The optional LocalStack tier (docs/development.md): LocalStack's S3 run
# without Docker, from its own venv, for the storage contract, the races and
# the drains. Not part of `make test`: it needs Python 3.13 (pyenv's newest
# 3.13 where pyenv is installed, else python3.13 on PATH, or LOCALSTACK_PYTHON=),
# installs ~70 more packages (~180 MB), and LocalStack's releases change how
# its S3 behaves, so a failure there may be news about LocalStack, not s3wq.
LOCALSTACK_VENV := .venv-localstack
LOCALSTACK_STAMP := $(LOCALSTACK_VENV)/.installed
LOCALSTACK_PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && v=$$(pyenv latest 3.13 2>/dev/null) && echo "$$(pyenv root)/versions/$$v/bin/python3.13" || echo python3.13)
LOCALSTACK_TESTS := tests/integration/test_backend_contract.py tests/integration/test_drain.py \
	tests/integration/test_populate_concurrency.py tests/integration/test_requeue_races.py

.PHONY: install demo lint test test-localstack synth clean ocr-venv

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# The CDK CLI, pinned in package.json / package-lock.json.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP) $(NODE_STAMP)

# --no-deps: requirements-localstack.txt names every package, so nothing
# unpinned comes in; `pip check` then proves the list complete.
$(LOCALSTACK_STAMP): requirements-localstack.txt
	$(LOCALSTACK_PYTHON) -m venv $(LOCALSTACK_VENV)
	$(LOCALSTACK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCALSTACK_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-localstack.txt
	$(LOCALSTACK_VENV)/bin/python -m pip check
	touch $(LOCALSTACK_STAMP)

# s3wq with the ocr extra at the tested versions (requirements-ocr.txt), in a venv of its own:
# .venv stays light. The OCR tests build the same venv (bench/ocr_venv.py).
ocr-venv:
	$(PYTHON) bench/ocr_venv.py

synth: install
	npx cdk synth --quiet

demo: install
	$(BIN)/s3wq local demo

# ruff first: a lint or format slip fails in a second, before the suite's minutes. Then mypy on lambdas/ and infra/
# ([tool.mypy] in pyproject.toml): minutes on a clean clone, most of them reading aws-cdk-lib's types once; then cached.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Line coverage of the library and the construct, measured in pytest's processes, xdist's workers combined; not in
# the processes the tests start (docs/development.md, "Coverage"). Reported, not a gate.
COVERAGE := --cov=lambdas/s3wq --cov=infra --cov-report=term:skip-covered

test: install lint
	$(BIN)/python -m pytest -n auto $(COVERAGE)

# The tests run in .venv/ as usual; only the S3 endpoint is LocalStack's (tests/localstack_s3.py).
# On the local directory they would repeat `make test`, hence -k.
test-localstack: $(STAMP) $(LOCALSTACK_STAMP)
	S3WQ_TEST_STORE=localstack S3WQ_LOCALSTACK_PYTHON=$(CURDIR)/$(LOCALSTACK_VENV)/bin/python \
		$(BIN)/python -m pytest $(LOCALSTACK_TESTS) -k "not local"

clean:
	rm -rf $(VENV) $(LOCALSTACK_VENV) .venv-ocr .export-deps node_modules cdk.out .pytest_cache .hypothesis .mypy_cache .coverage
