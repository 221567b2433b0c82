# Two commands do all set-up on a fresh machine:
#   make run    the main job (the seed's six placements)
#   make test   the whole test suite
# Each creates .venv on first use and reinstalls when pyproject.toml changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean browser

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[torch,test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/train-ledger

test: $(STAMP) browser
	$(BIN)/python -m pytest -n auto

# Debian's chromium for the HTML report's browser test (tests/test_html.py): installed
# when missing and running as root; otherwise that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  >/dev/null; } || echo "chromium not installed (not root): tests/test_html.py will skip"

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
