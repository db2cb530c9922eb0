# beeweb: `make run` serves the dashboard with demo data; `make test` runs the test suite.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install install-dev lint check migrate demo clean bench soak

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

migrate: install
	$(PY) manage.py migrate --noinput

# The admin user, and the localhost testbed it owns, are created by scripts/run-local.sh,
# which shows the admin's password last.
demo: migrate
	$(PY) manage.py load_published
	$(PY) manage.py collectstatic --noinput -v0

## Set up everything and serve http://$(HOST):$(PORT) with a web server and a Celery worker.
run: demo
	HOST=$(HOST) PORT=$(PORT) VENV=$(VENV) scripts/run-local.sh

## The test suite (uses DATABASE_URL / CELERY_BROKER_URL when set, else the embedded default).
test: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

## Benchmarks at 100,000 runs on PostgreSQL + Redis (database beeweb_bench; see bench/README.md).
bench: install
	$(PY) bench/generate.py
	$(PY) bench/ingest.py
	$(PY) bench/summaries.py
	$(PY) bench/queries.py
	$(PY) bench/memory.py
	$(PY) bench/dispatch.py

## The long chaos soak (tests/soak; root, the network-namespace lab, its own PostgreSQL and
## Redis): SOAK_RUNS (300), SOAK_FAULTS (140), SOAK_PER_KIND (20), SOAK_KINDS (all), SOAK_SEED.
soak: install
	$(PY) -m tests.soak

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf var .pytest_cache .ruff_cache
