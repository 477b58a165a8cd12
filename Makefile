# Rubrica: `make run` serves the demo, `make test` runs the whole suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install migrate demo messages bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

messages: install
	$(BIN)/python manage.py compilemessages --ignore=.venv -v 0

migrate: install
	$(BIN)/python manage.py migrate --noinput -v 0

demo: migrate messages
	$(BIN)/python manage.py load_demo

run: demo
	$(BIN)/python manage.py runserver 127.0.0.1:8000

# Tests run on real PostgreSQL and Redis (started by .ci/run in CI); tasks run eagerly
# unless a test starts a real worker itself.
test: messages
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rubrica} \
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} \
	CELERY_TASK_ALWAYS_EAGER=1 \
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/assignment.py

clean:
	rm -rf $(VENV) db.sqlite3
