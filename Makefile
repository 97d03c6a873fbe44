# One command each: `make run` (the demo), `make test` (the suite), `make bench` (bench/RESULTS.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
SANDBOX_EAST_PORT ?= 8001
SANDBOX_WEST_PORT ?= 8002
STAMP := $(VENV)/.installed

.PHONY: install run test bench lint check-migrations screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@trap 'kill 0' EXIT INT TERM; \
	$(BIN)/python -m sandbox serve --port $(SANDBOX_EAST_PORT) --state var/sandbox-gpu-east.json --simulate & \
	$(BIN)/python -m sandbox serve --port $(SANDBOX_WEST_PORT) --state var/sandbox-gpu-west.json --simulate & \
	$(BIN)/python manage.py seed_demo --wait 30 --kueue-url http://127.0.0.1:$(SANDBOX_EAST_PORT) \
		--volcano-url http://127.0.0.1:$(SANDBOX_WEST_PORT) || exit 1; \
	$(BIN)/celery -A portal beat --loglevel WARNING --schedule var/celerybeat-schedule & \
	echo "Portal: http://127.0.0.1:$(PORT)/  (Ctrl-C stops the portal and its sandbox clusters)"; \
	$(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

test: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m bench

# Screenshots of the main pages at 1280 and 390 px into screenshots/ (git-ignored), from a running `make run`.
screenshots: $(STAMP)
	$(BIN)/python -m tools.screenshots --base http://127.0.0.1:$(PORT) --out screenshots

lint: $(STAMP)
	$(BIN)/ruff check .

check-migrations: $(STAMP)
	$(BIN)/python manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) var staticfiles screenshots .pytest_cache
