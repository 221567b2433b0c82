# Two commands do all set-up on a fresh machine:
#   make run    the main job (the seed's six placements)
#   make test   the whole test suite
# Each creates .venv on first use and reinstalls when pyproject.toml changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[torch,test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/train-ledger

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
