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

.PHONY: install demo test synth clean

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

synth: install
	npx cdk synth --quiet

demo: install
	$(BIN)/s3wq local demo

test: install
	$(BIN)/python -m pytest -n auto

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .hypothesis
