# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test`: one per CPU (more made this 2-core machine slower and
# its real-time deadlines flaky); `make test TEST_WORKERS=0` runs the suite serially.
TEST_WORKERS ?= auto
# pytest keeps its bytecode: where the environment sets PYTHONDONTWRITEBYTECODE (this machine's
# does), every xdist worker compiled and assertion-rewrote each test module again on every run
# (collecting the suite: 15.8 s of CPU a process, 7.4 s with the caches; __pycache__ is ignored
# by git).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

.PHONY: demo test lint bench

# An editable install in setuptools' strict mode links each source file under build/, where a
# type checker finds `breakerdeck.*` too; a file added to or removed from a package folder
# changes that folder, which links the tree again. Setuptools says so in a block of asterisks
# on every install ("Editable installation … do not remove this directory"): build/ is ours
# and ignored by git, so that notice, information only, is filtered out by its words.
PACKAGE_DIRS := $(shell find engine console fixtures -type d -not -name __pycache__)
PIP_INSTALL := PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install --quiet -e
STRICT := --config-settings editable_mode=strict

# One .venv for both commands, in either order: `make demo` installs breakerdeck alone (its
# console and simulation need nothing more); `make test` adds every extra on top. DEMO_STAMP
# says the package is installed, STAMP that the extras are too (so it implies the other).
DEMO_STAMP := $(VENV)/.installed-demo

$(BIN)/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml $(PACKAGE_DIRS) | $(BIN)/pip
	$(PIP_INSTALL) . $(STRICT)
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml $(PACKAGE_DIRS) | $(BIN)/pip
	$(PIP_INSTALL) '.[test]' $(STRICT)
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/breakerdeck demo

# The replica tests run against Debian's redis-server, the `web` tests drive Debian's chromium
# (through Playwright, never its own download), the dashboard's tests query Debian's
# prometheus, and the completion tests run the scripts in zsh and fish: installed here when
# missing (as root), else the run stops naming the packages; the tests are never skipped for
# want of them. Each package installs the command of its name.
TEST_PACKAGES := redis-server chromium prometheus zsh fish
test: $(STAMP)
	@missing=$$(for p in $(TEST_PACKAGES); do command -v $$p >/dev/null || echo $$p; done); \
	[ -z "$$missing" ] || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) || true
	@missing=$$(for p in $(TEST_PACKAGES); do command -v $$p >/dev/null || echo $$p; done); \
	[ -z "$$missing" ] || { echo "make test needs Debian's packages:" $$missing \
	"(apt-get install" $$missing")" >&2; exit 1; }
	$(BIN)/ruff check .
	$(BIN)/mypy -p breakerdeck.engine -p breakerdeck.console -p breakerdeck.fixtures -p breakerdeck.adapters
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup

bench: $(STAMP)
	command -v wrk >/dev/null && command -v nginx >/dev/null && command -v redis-server >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light redis-server)
	$(PIP_INSTALL) '.[bench]' $(STRICT)
	$(BIN)/python bench/run.py
