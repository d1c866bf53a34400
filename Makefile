# topiclake: the two commands of the README's quick start.
#   make quickstart   set everything up, then run the main job on the embedded default
#   make test         the test suite (what CI runs)
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
WAREHOUSE ?= warehouse

.PHONY: quickstart setup test test-fast test-crashes test-long lint clean mutation

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt scripts/setup.sh
	PYTHON=$(PYTHON) scripts/setup.sh
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(VENV)/bin/topiclake lint table_specs
	$(PY) jobs/maintain.py --warehouse $(WAREHOUSE) --specs table_specs --with-sample-data --cleaner-threads 2

# Apache Kafka's broker jars (Maven Central) for the tests' real broker (tests/support/kafka_broker.py).
.kafka/lib/.fetched: scripts/kafka/pom.xml scripts/fetch-kafka.sh
	scripts/fetch-kafka.sh
	touch $@

# Two pytest-xdist workers, each with its own Spark session (tests/conftest.py groups the
# files and puts the longest first; TEST_WORKERS=0 runs in one process).
TEST_WORKERS ?= 2

test: setup .kafka/lib/.fetched
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

# The crash matrix alone, printing each step (every named fault point and two random
# moments, each a real process SIGKILLed; about 5 minutes; `make test` runs it too).
test-crashes: setup
	$(PY) -m pytest -q -s tests/test_crashes.py

# The long run alone, printing its figures (200 maintenance runs on a simulated clock with
# the shipped bounds; about 2 minutes; `make test` runs it too).
test-long: setup
	$(PY) -m pytest -q -s tests/test_long_run.py

lint: setup
	$(VENV)/bin/topiclake lint table_specs

# Mutation testing of the pure decision module framework/cleaner/rules.py (a developer tool; CI does
# not run it). mutmut's settings are setup.cfg's [mutmut]: it mutates a copy under mutants/
# (git-ignored), never framework/cleaner/rules.py itself, and runs only the Spark-free tests of it.
# Starts afresh each time; fails if framework/cleaner/rules.py changed during the run. SPARK_HOME
# points nowhere so that a Spark test selected by mistake fails at once instead of starting Spark.
MUTATION_JOBS ?= 1

$(VENV)/.installed-dev: $(VENV)/.installed setup.cfg constraints.txt
	$(PY) -m pip install -q -c constraints.txt -e '.[spark,test,dev]'
	touch $@

mutation: $(VENV)/.installed-dev
	rm -rf mutants
	@before=$$(sha256sum framework/cleaner/rules.py); \
	  SPARK_HOME=/nonexistent/no-spark-in-mutation-runs $(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS); status=$$?; \
	  if [ "$$(sha256sum framework/cleaner/rules.py)" != "$$before" ]; then \
	    echo "mutation: framework/cleaner/rules.py changed during the run" >&2; exit 1; fi; \
	  exit $$status
	@$(VENV)/bin/mutmut export-cicd-stats >/dev/null
	@echo "mutants not killed:"; $(VENV)/bin/mutmut results
	@$(PY) -c "import json; s = json.load(open('mutants/mutmut-cicd-stats.json')); \
	  print('mutation score: %(killed)d/%(total)d killed' % s, '(%.1f%%);' % (100.0 * s['killed'] / s['total']), \
	        '%(survived)d survived, %(no_tests)d no tests, %(timeout)d timeout, %(suspicious)d suspicious' % s)"

clean:
	rm -rf $(VENV) $(WAREHOUSE) .pytest_cache .hypothesis build *.egg-info .kafka
