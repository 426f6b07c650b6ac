# Charming: `make run` sets up and serves; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run setup test lint clean

# The URL the server names in its OAuth metadata and allows as Origin: where `make run` listens.
setup run: export CHARMING_PUBLIC_URL ?= http://$(HOST):$(PORT)
# `make run` says "Charming is ready" only once it knows it can listen on HOST:PORT: it checks first, so a taken port
# is said at once, not after the migrations, and demo_setup checks again before "ready" (each refusal names the
# setting to change); `make setup` alone does not listen, so it does not check.
run: LISTEN_CHECK = --listen $(HOST):$(PORT)
run: LISTEN_FIRST = $(BIN)/python -m charming.serving $(HOST):$(PORT)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

setup: $(VENV)/.runtime
	$(LISTEN_FIRST)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py demo_setup --base-url $(CHARMING_PUBLIC_URL) $(LISTEN_CHECK)

# The task worker (staff purges) runs beside the server; when the server stops (Ctrl-C, or it fails to
# start), the trap stops the worker too, so one command starts both and one Ctrl-C ends both.
run: setup
	@$(BIN)/python manage.py db_worker & worker=$$!; \
	trap 'kill -TERM $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/uvicorn charming.asgi:application --host $(HOST) --port $(PORT) --http charming.serving:NoDelayHttpToolsProtocol

# The suite runs on TEST_WORKERS processes (pytest-xdist), each on its own test database: by default one per CPU and
# one more, as its browser and server tests wait as well as compute (on 2 CPUs: 2 workers 395 s, 3 366 s, 4 378 s).
# Then the tests marked `serial` (a PostgreSQL restart, felt by every connection) run alone, collecting only the files
# that mark one (tests/conftest.py); pytest's exit status 5 is "no test selected" (PYTEST_ARGS naming no serial
# test), not a failure. TEST_WORKERS=1 is one plain pytest run, in which PYTEST_ARGS may carry its own -m.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
test: $(VENV)/.dev
ifeq ($(TEST_WORKERS),1)
	$(BIN)/pytest $(PYTEST_ARGS)
else
	$(BIN)/pytest -n $(TEST_WORKERS) -m "not serial" $(PYTEST_ARGS)
	$(BIN)/pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]
endif

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) var
