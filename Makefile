# Two commands for a fresh machine:
#   make demo   the whole story on the embedded vLLM CPU engine
#   make test   ruff, mypy (strict) on every package, the documentation build, the whole pytest suite
#   (make docs  the documentation site alone, into build/site)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck docs pytest clean

# The install also compiles the routing decision and the replay (setup.py): rebuild when
# their sources change.
$(BIN)/.installed: pyproject.toml setup.py $(wildcard engine_adapter/*/*.py engine_adapter/*/*.pxd)
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

# mypy finds modules by name and does not follow the editable install: stage the prefixkit.*
# namespace as pyproject.toml maps it (links to the source folders), and print real paths.
typecheck: $(BIN)/.installed
	@mkdir -p build/typecheck/prefixkit
	@for package in sdk linter engine_adapter cli testing; do \
		ln -sfn ../../../$$package build/typecheck/prefixkit/$$package; done
	MYPYPATH=build/typecheck $(BIN)/mypy --strict -p prefixkit.sdk -p prefixkit.linter \
		-p prefixkit.engine_adapter -p prefixkit.cli -p prefixkit.testing \
		>build/typecheck/mypy.out; status=$$?; \
		sed 's|^build/typecheck/prefixkit/||' build/typecheck/mypy.out; exit $$status

pytest: $(BIN)/.installed
	$(BIN)/pytest

# The documentation site: build/site, warnings are errors (links, anchors, API references).
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) build *.egg-info engine_adapter/*/*.so engine_adapter/*/compiled_from.json .pytest_cache .mypy_cache .ruff_cache
