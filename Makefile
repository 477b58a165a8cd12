# Rubrica: `make run` serves the demo, `make test` lints and runs the whole suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Two stamps, so `make run` installs only what the platform needs ([project] dependencies)
# and `make test` adds the test and lint tools (the `test` extra) on top, each once.
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

# A fresh test database in CI; locally the last run's is kept (migrations are the slow part).
ifneq ($(filter true 1,$(CI)),)
PYTEST_DB := --create-db
else
PYTEST_DB := --reuse-db
endif
# One pytest-xdist worker per core. loadgroup spreads tests one by one, except tests marked
# xdist_group, which share a worker.
PYTEST_WORKERS ?= auto

.PHONY: run test lint install install-test migrate demo messages bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(TEST_STAMP): $(RUN_STAMP)
	$(BIN)/pip install -q -e ".[test]"
	touch $@

install: $(RUN_STAMP)

install-test: $(TEST_STAMP)

messages: install
	$(BIN)/python manage.py compilemessages --ignore=.venv -v 0

migrate: install
	$(BIN)/python manage.py migrate --noinput -v 0

demo: migrate messages
	$(BIN)/python manage.py load_demo

run: demo
	$(BIN)/python manage.py runserver 127.0.0.1:8000

# Configured in pyproject.toml: ruff (style, imports, bugbear, Django), mypy (django-stubs;
# strict on core and the agreement statistics), import-linter (the app layers; statistics
# free of Django).
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Tests run on real PostgreSQL and Redis (started by .ci/run in CI); tasks run eagerly
# unless a test starts a real worker itself.
# Outside the embedded mode the keys must come from the environment (core/checks.py): a test
# run gets random ones unless it brings its own.
test: lint messages
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rubrica} \
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} \
	SECRET_KEY=$${SECRET_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(48))')} \
	RUBRICA_SECRETS_KEY=$${RUBRICA_SECRETS_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(48))')} \
	CELERY_TASK_ALWAYS_EAGER=1 \
	$(BIN)/python -m pytest -q $(PYTEST_DB) -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/assignment.py

clean:
	rm -rf $(VENV) db.sqlite3
