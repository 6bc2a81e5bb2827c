# Two commands for a fresh machine:
#   make demo   the whole story on the embedded vLLM CPU engine
#   make test   ruff, mypy (strict) on every package and the tests, the documentation build,
#               the whole pytest suite (real vLLM and a Ray cluster included)
# While working:
#   make check  ruff, mypy, and the tests that start neither vLLM nor Ray nor a slow build,
#               in parallel: under two minutes (CONTRIBUTING.md)
#   make format ruff's fixes and formatter
#   (make docs  the documentation site alone, into build/site)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2
# Python's default: compiled modules are cached in __pycache__ (the suite starts prefixkit
# in many subprocesses); some shells turn it off
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test check format lint typecheck docs pytest pytest-quick promtool clean

# The install also compiles the routing decision and the replay (setup.py): rebuild when
# their sources (setup.py's COMPILED, with the .pxd beside each) change.
COMPILED_SOURCES := $(wildcard $(foreach module,routing/policy routing/reuse replay/cache_sim \
	replay/replica_load replay/policies replay/replay,engine_adapter/$(module).py engine_adapter/$(module).pxd))
$(BIN)/.installed: pyproject.toml setup.py $(COMPILED_SOURCES)
	@echo "==> creating $(VENV) and installing prefixkit with its dev tools (compiling the routing decision and the replay)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar on -q -U pip
	$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@# setuptools' editable finder is invisible to type checkers: a static path entry to a
	@# prefixkit/ folder of links to the package folders lets mypy and pyright resolve it too.
	@mkdir -p build/editable/prefixkit
	@for package in sdk linter engine_adapter cli testing; do \
		ln -sfn ../../../$$package build/editable/prefixkit/$$package; done
	$(BIN)/python -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'prefixkit-typecheck.pth').write_text(str(pathlib.Path('build/editable').resolve()) + '\\n')"
	@touch $@

demo: $(BIN)/.installed
	$(BIN)/python examples/demo.py

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy --strict on the packages and the tests. The install's static path entry
# (build/editable) maps the prefixkit.* namespace to the source folders; paths are printed
# as the source folders.
typecheck: $(BIN)/.installed
	@mkdir -p build
	$(BIN)/mypy --strict -p prefixkit.sdk -p prefixkit.linter -p prefixkit.engine_adapter \
		-p prefixkit.cli -p prefixkit.testing -p tests >build/mypy.out; status=$$?; \
		sed 's|^build/editable/prefixkit/||' build/mypy.out; exit $$status

# The tests that start no engine and measure no latency on both cores, then the engine, Ray
# and slow ones one at a time (they share the session's engines; a latency measurement
# needs the cores to itself)
pytest: $(BIN)/.installed promtool
	$(BIN)/pytest -m "not engine and not ray and not slow" -n $(PYTEST_WORKERS)
	$(BIN)/pytest -m "engine or ray or slow"

# The tests that start neither vLLM nor Ray nor a slow build, on both cores.
pytest-quick: $(BIN)/.installed promtool
	$(BIN)/pytest -q -m "not engine and not ray and not slow" -n $(PYTEST_WORKERS)

# promtool (Debian's prometheus package) runs the alert rules' tests (tests/monitoring). One
# on PATH is used; otherwise the binary alone is unpacked from the package into
# $PREFIXKIT_HOME/bin (kept across fresh clones, as the engines are): installing the package
# would also start a Prometheus server. Silent when it is there already.
PROMTOOL_HOME = $${PREFIXKIT_HOME:-$$HOME/.cache/prefixkit}/bin
promtool:
	@if ! command -v promtool >/dev/null 2>&1 && [ ! -x "$(PROMTOOL_HOME)/promtool" ]; then \
		echo "==> unpacking promtool from Debian's prometheus package into $(PROMTOOL_HOME)"; \
		work=$$(mktemp -d) && cd $$work && \
		{ apt-get download -qq prometheus >apt.log 2>&1 || \
			{ apt-get update -qq >>apt.log 2>&1 && apt-get download -qq prometheus >>apt.log 2>&1; } || \
			{ cat apt.log; echo "promtool: apt-get could not download Debian's prometheus package"; exit 1; }; } && \
		dpkg-deb -x prometheus_*.deb root && mkdir -p "$(PROMTOOL_HOME)" && \
		cp root/usr/bin/promtool "$(PROMTOOL_HOME)/promtool" && cd / && rm -rf $$work; \
	fi

format: $(BIN)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

check: $(BIN)/.installed
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint && \
	$(MAKE) --no-print-directory -j2 --output-sync=target typecheck pytest-quick; \
	status=$$?; echo "make check: $$(( $$(date +%s) - start )) s"; exit $$status

# The documentation site: build/site, warnings are errors (links, anchors, API references).
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) build *.egg-info engine_adapter/*/*.so engine_adapter/*/compiled_from.json .pytest_cache .mypy_cache .ruff_cache
