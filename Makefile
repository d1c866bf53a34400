# topiclake: the two commands of the README's quick start.
#   make quickstart   set everything up, then run the main job on the embedded default
#   make test         the test suite (what CI runs)
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
WAREHOUSE ?= warehouse

.PHONY: quickstart setup test test-fast lint clean

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt scripts/setup.sh
	PYTHON=$(PYTHON) scripts/setup.sh
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(VENV)/bin/topiclake lint table_specs
	$(PY) jobs/maintain.py --warehouse $(WAREHOUSE) --specs table_specs --with-sample-data
	@echo "report: $(WAREHOUSE)/_topiclake/report/index.html"

test: setup
	$(PY) -m pytest -q --durations=15

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/topiclake lint table_specs

clean:
	rm -rf $(VENV) $(WAREHOUSE) .pytest_cache .hypothesis build *.egg-info
