# Two entry points for a fresh clone: `make lab` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The slowest tests are listed at the end of every run: the suite must stay well inside CI's limit.
PYTEST_ARGS ?= --durations=25

.PHONY: lab test versions lint typecheck unit integration bench clean labextension ts-test docs

# torch's CPU build first (a local wheel on these machines): the torch extra's plain `torch`
# would otherwise resolve a CUDA build of several GB; with it installed, pip adds nothing.
$(STAMP): pyproject.toml nbdist/labextension/package.json
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "torch==2.13.*"
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# JupyterLab refuses to run as root unless told; the news pop-up needs the network.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	mkdir -p $(VENV)/share/jupyter/lab/settings
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $(VENV)/share/jupyter/lab/settings/overrides.json
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

# The JupyterLab panel (labextension/, TypeScript): npm installs from the lock file; the build
# writes nbdist/labextension and the inline view's ES module (nbdist/jupyter/static), which are
# kept in the repository so that installing nbdist needs no Node.js; pip then copies the first
# into the venv's share/jupyter/labextensions. The build runs only when the panel's sources differ from those the kept build was made from (their digest is in
# labextension/build.sha256): module ids depend on the checkout's path, so rebuilding unchanged
# sources elsewhere would rename files for nothing.
NODE_DEPS := labextension/node_modules/.package-lock.json
LABEXT_DIGEST = $(shell find labextension/src labextension/style -type f | LC_ALL=C sort | \
	xargs sha256sum labextension/package.json labextension/package-lock.json \
	labextension/tsconfig.json labextension/widget.config.js labextension/build-widget.js | \
	sha256sum | cut -c1-64)

$(NODE_DEPS): labextension/package-lock.json
	cd labextension && npm ci --no-audit --no-fund
	touch $(NODE_DEPS)

labextension: $(STAMP)
	@if [ "$$(cat labextension/build.sha256 2>/dev/null)" = "$(LABEXT_DIGEST)" ]; then \
		echo "nbdist/labextension is up to date with labextension/ (build.sha256)"; \
	else \
		$(MAKE) $(NODE_DEPS) && \
		(cd labextension && PATH="$(abspath $(BIN)):$$PATH" npm run build:prod) && \
		echo "$(LABEXT_DIGEST)" > labextension/build.sha256; \
	fi
	$(BIN)/python -m pip install --quiet --no-deps -e .

ts-test: $(NODE_DEPS)
	cd labextension && npm test

lint: $(STAMP)
	$(BIN)/ruff check nbdist tests
	$(BIN)/mypy

# What pip resolved this time: a new release of a dependency shows here before it shows as a
# failing test.
versions: $(STAMP)
	@$(BIN)/python -m pip list --format=freeze 2>/dev/null | grep -iE \
		'^(cloudpickle|numpy|pyarrow|ipykernel|ipywidgets|jupyterlab|jupyter_server|bokeh|ray|playwright|jupyter_client|nbclient|pytest|mypy|ruff)==' \
		| tr '\n' ' '; echo

test: versions lint ts-test labextension
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

# The rendered course: every notebook in notebooks/ run top to bottom and written with its
# outputs as HTML to docs/course/ (git-ignored; open docs/course/index.html). Offline: no page
# needs a CDN to be read (docs/build_course.py). DOCS_ARGS: notebooks to render, or --out DIR.
docs: $(STAMP)
	$(BIN)/python docs/build_course.py $(DOCS_ARGS)

# Side-by-side figures against Ray (installs the optional `bench` extra).
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/nbdist microbenchmark --compare ray $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache
