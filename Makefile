# Two entry points for a fresh clone: `make lab` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lab test lint typecheck unit integration bench clean labextension ts-test

$(STAMP): pyproject.toml nbdist/labextension/package.json
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# JupyterLab refuses to run as root unless told; the news pop-up needs the network.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	mkdir -p $(VENV)/share/jupyter/lab/settings
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(VENV)/share/jupyter/lab/settings/overrides.json
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

# The JupyterLab panel (labextension/, TypeScript): npm installs from the lock file; the build
# writes nbdist/labextension, which is kept in the repository so that installing nbdist needs no
# Node.js (the build is deterministic: unchanged sources give unchanged files); pip then copies
# it into the venv's share/jupyter/labextensions.
NODE_DEPS := labextension/node_modules/.package-lock.json

$(NODE_DEPS): labextension/package-lock.json
	cd labextension && npm ci --no-audit --no-fund
	touch $(NODE_DEPS)

labextension: $(STAMP) $(NODE_DEPS)
	cd labextension && PATH="$(abspath $(BIN)):$$PATH" npm run build:prod
	$(BIN)/python -m pip install --quiet --no-deps -e .

ts-test: $(NODE_DEPS)
	cd labextension && npm test

lint: $(STAMP)
	$(BIN)/ruff check nbdist tests
	$(BIN)/mypy

test: lint ts-test labextension
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

# Side-by-side figures against Ray (installs the optional `bench` extra).
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/nbdist microbenchmark --compare ray $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache
