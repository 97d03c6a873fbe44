# One command each: `make run` (the demo), `make test` (the suite), `make bench` (bench/RESULTS.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
SANDBOX_EAST_PORT ?= 8001
SANDBOX_WEST_PORT ?= 8002
STAMP := $(VENV)/.installed
ASSETS := static/vendor/plotly-cartesian.min.js
# Every package, direct and transitive, pinned with its hashes: the app's (the image installs these) and the app's
# plus the dev extras' and the sandbox's (`make install`). `make lock` regenerates both from pyproject.toml and
# sandbox/pyproject.toml (the sandbox cluster is a distribution of its own: the demo and the tests run it, the
# app does not import it).
LOCK := requirements.lock
DEV_LOCK := requirements-dev.lock
LOCK_DIR ?= .
UV := $(abspath $(BIN))/uv
SANDBOX_PROJECT := sandbox/pyproject.toml
UV_COMPILE = $(UV) pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command 'make lock' --group pyproject.toml:build pyproject.toml

.PHONY: install lock lock-check run test faults bench lint check-migrations docs screenshots services clean \
	controlplane-bin controlplane test-controlplane fidelity controllers-bin controllers test-controllers

# uv installs the lock (in parallel, from its cache); it is bootstrapped by the system's pip from the lock's own
# hashed uv pin, so the environment needs no pip of its own.
$(STAMP): $(DEV_LOCK) pyproject.toml $(SANDBOX_PROJECT)
	$(PYTHON) -m venv --without-pip $(VENV)
	awk '/^uv==/{p=1} p{print} p && !/\\$$/{exit}' $(DEV_LOCK) > $(VENV)/uv-requirement.txt
	$(PYTHON) -m pip --python $(BIN)/python install --quiet --require-hashes --no-deps -r $(VENV)/uv-requirement.txt
	$(UV) pip sync --quiet --compile-bytecode --python $(BIN)/python --require-hashes $(DEV_LOCK)
	$(UV) pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e . -e ./sandbox
	touch $(STAMP)

# plotly.js's cartesian bundle (bar, scatter, heatmap: what billing/charts.py draws; 1.5 MB, not the full 4.8 MB)
# from npm, pinned with its hash in package-lock.json, copied into the git-ignored static/vendor/.
$(ASSETS): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel error
	npm run --silent build

install: $(STAMP) $(ASSETS)

# In the demo the idle rule acts within minutes (the portal's own defaults: an hour idle to warn, half an hour more
# to suspend).
run: export WORKSPACE_WARN_MINUTES ?= 3
run: export WORKSPACE_SUSPEND_MINUTES ?= 2
run: export WORKSPACE_VOLUME_DAYS ?= 0.05
run: $(STAMP) $(ASSETS)
	mkdir -p var
	@# The sandbox clusters start and the static files are collected (gzip-compressed, so plotly.js travels at
	@# 0.5 MB) while the database migrates; the web server starts while the demo data is seeded, and the portal
	@# is announced once both are done. Beat yields the CPU; the server does not reload on code changes (a second
	@# process importing everything).
	@trap 'trap - EXIT INT TERM; kill 0' EXIT INT TERM; \
	$(BIN)/python -m sandbox serve --port $(SANDBOX_EAST_PORT) --state var/sandbox-gpu-east.json --simulate --dra-nodes 2 & \
	$(BIN)/python -m sandbox serve --port $(SANDBOX_WEST_PORT) --state var/sandbox-gpu-west.json --simulate --dra-nodes 2 & \
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0 & collected=$$!; \
	$(BIN)/python manage.py migrate --noinput || exit 1; \
	wait $$collected || exit 1; \
	$(BIN)/python manage.py runserver --noreload 127.0.0.1:$(PORT) & server=$$!; \
	$(BIN)/python manage.py seed_demo --wait 30 --kueue-url http://127.0.0.1:$(SANDBOX_EAST_PORT) \
		--volcano-url http://127.0.0.1:$(SANDBOX_WEST_PORT) || exit 1; \
	nice $(BIN)/celery -A config beat --loglevel WARNING --schedule var/celerybeat-schedule & \
	if [ -n "$$REDIS_URL" ]; then nice $(BIN)/celery -A config worker --loglevel WARNING --concurrency 2 & fi; \
	$(BIN)/python manage.py watch_clusters >var/watcher.log 2>&1 & \
	echo "Portal: http://127.0.0.1:$(PORT)/  (Ctrl-C stops the portal and its sandbox clusters)"; \
	wait $$server

test: $(STAMP) $(ASSETS)
	$(BIN)/pytest

# The fault suite: real processes (a private Redis, a sandbox cluster, a private PostgreSQL, the watcher) stopped under
# the portal; needs redis-server, initdb and pg_ctl (tests/faults/test_faults.py).
faults: $(STAMP) $(ASSETS)
	$(BIN)/pytest -m faults tests/faults

# A real control plane (tools/controlplane/): etcd, kube-apiserver and kube-controller-manager built from their Go
# modules into the git-ignored var/bin/, once per go.sum (the stamp); Go's module and build caches make a rebuild
# after a pin change incremental. `make controlplane` runs it in the foreground (kubeconfig in
# var/controlplane/kubeconfig); `make test-controlplane` runs the suite's `controlplane` lane against it.
GO ?= go
CONTROLPLANE_BIN ?= var/bin
CONTROLPLANE_STAMP := $(CONTROLPLANE_BIN)/.controlplane-built
# What `/version` answers: Kubernetes' own build stamps these (hack/lib/version.sh); a plain `go build` says v0.0.0.
KUBE_VERSION = $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2; exit}' tools/controlplane/go.mod)
KUBE_LDFLAGS = -s $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=1 \
	-X $(pkg).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) -X $(pkg).gitTreeState=clean)
$(CONTROLPLANE_STAMP): tools/controlplane/go.mod tools/controlplane/go.sum
	mkdir -p $(CONTROLPLANE_BIN)
	cd tools/controlplane && $(GO) build -buildvcs=false -trimpath -ldflags='$(KUBE_LDFLAGS)' \
		-o $(abspath $(CONTROLPLANE_BIN))/ tool
	@# etcd's main package is its server module, which `go build` names after the path: `server`.
	mv $(CONTROLPLANE_BIN)/server $(CONTROLPLANE_BIN)/etcd
	touch $@

controlplane-bin: $(CONTROLPLANE_STAMP)

controlplane: $(STAMP) $(CONTROLPLANE_STAMP)
	$(BIN)/python -m tools.controlplane

test-controlplane: $(STAMP) $(ASSETS) $(CONTROLPLANE_STAMP)
	$(BIN)/pytest -m controlplane tests/controlplane

# The sandbox measured against the real API server: bench/FIDELITY.md (`python -m bench.fidelity record` first
# re-records the requests the portal's own tests send).
fidelity: $(STAMP) $(CONTROLPLANE_STAMP)
	$(BIN)/python -m bench.fidelity

bench: $(STAMP)
	$(BIN)/python -m bench

# Screenshots of the main pages at 1440 and 390 px into screenshots/ (git-ignored), from a running `make run`, and
# the first screen of the pages the documentation shows into docs/images/ (committed).
screenshots: $(STAMP) $(ASSETS)
	$(BIN)/python -m tools.screenshots --base http://127.0.0.1:$(PORT) --out screenshots --docs docs/images

# PostgreSQL and Redis on 127.0.0.1:5432 and :6379 for `make test` with DATABASE_URL/REDIS_URL (installed from
# Debian's packages when missing; needs root for that).
services:
	bash tools/services.sh

# The batch schedulers themselves (tools/controllers/): Kueue's manager, Volcano's scheduler, controller manager and
# webhook manager, the KubeRay operator, kwok and kube-scheduler, each built from its upstream Go module into the
# git-ignored var/bin/. Kueue, Volcano, KubeRay and kwok pin different k8s.io releases, so each has a module of its
# own; kube-scheduler is Kubernetes 1.34's, from tools/controlplane's module. `make controllers-bin` builds those of
# SCHEDULERS (rebuilt only when a module's go.mod or go.sum changes); `make test-controllers` runs their scenarios
# (tests/controllers/test_<scheduler>.py, marker `controllers`; KubeRay's run under Kueue and Volcano, so they need
# both built too).
SCHEDULERS ?= kueue,volcano,kuberay
comma := ,
SCHEDULER_LIST := $(subst $(comma), ,$(SCHEDULERS))
GO_BUILD = $(GO) build -buildvcs=false -trimpath -ldflags=-s
BINS_kueue := var/bin/kueue
BINS_volcano := var/bin/vc-scheduler var/bin/vc-controller-manager var/bin/vc-webhook-manager
BINS_kuberay := var/bin/kuberay-operator
CONTROLLER_BINS := var/bin/kube-scheduler var/bin/kwok $(foreach s,$(SCHEDULER_LIST),$(BINS_$(s)))

var/bin/kube-scheduler: tools/controlplane/go.mod tools/controlplane/go.sum
	cd tools/controlplane && $(GO_BUILD) -o $(abspath $@) k8s.io/kubernetes/cmd/kube-scheduler

var/bin/kwok: tools/controllers/kwok/go.mod tools/controllers/kwok/go.sum
	cd tools/controllers/kwok && $(GO_BUILD) -o $(abspath $@) sigs.k8s.io/kwok/cmd/kwok

var/bin/kueue: tools/controllers/kueue/go.mod tools/controllers/kueue/go.sum
	cd tools/controllers/kueue && $(GO_BUILD) -o $(abspath $@) sigs.k8s.io/kueue/cmd/kueue

$(BINS_volcano): var/bin/vc-%: tools/controllers/volcano/go.mod tools/controllers/volcano/go.sum
	cd tools/controllers/volcano && $(GO_BUILD) -o $(abspath $@) volcano.sh/volcano/cmd/$*

var/bin/kuberay-operator: tools/controllers/kuberay/go.mod tools/controllers/kuberay/go.sum
	cd tools/controllers/kuberay && $(GO_BUILD) -o $(abspath $@) github.com/ray-project/kuberay/ray-operator

controllers-bin: $(CONTROLLER_BINS)

# `make controllers SCHEDULERS=kueue,volcano,kuberay` (the default: all three): the control plane with the chosen
# schedulers and four fake 8-GPU nodes, in the foreground until Ctrl-C (kubeconfig: var/controlplane/kubeconfig).
controllers: $(STAMP) controlplane-bin controllers-bin
	$(BIN)/python -m tools.controllers --schedulers $(SCHEDULERS)

test-controllers: $(STAMP) $(ASSETS) controlplane-bin controllers-bin
	$(BIN)/pytest -m controllers $(wildcard $(foreach s,$(SCHEDULER_LIST),tests/controllers/test_$(s).py))

lint: $(STAMP)
	$(BIN)/ruff check .

# The documentation site (mkdocs.yml, docs/) into the git-ignored site/; --strict fails on a broken link between
# pages, a missing image or anchor, or a page left out of the navigation.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

check-migrations: $(STAMP)
	$(BIN)/python manage.py makemigrations --check --dry-run

lock: $(STAMP)
	cd $(LOCK_DIR) && $(UV_COMPILE) $(SANDBOX_PROJECT) --extra dev -o $(DEV_LOCK) && \
		$(UV_COMPILE) -c $(DEV_LOCK) -o $(LOCK)

# Fails when pyproject.toml changed without `make lock`: resolving again, with the lock's pins as preferences,
# must give the committed files byte for byte.
lock-check: $(STAMP)
	@dir=$$(mktemp -d) && cp pyproject.toml $(LOCK) $(DEV_LOCK) $$dir/ && mkdir $$dir/sandbox && \
	cp $(SANDBOX_PROJECT) $$dir/sandbox/ && \
	$(MAKE) --no-print-directory lock LOCK_DIR=$$dir && \
	diff -u $(DEV_LOCK) $$dir/$(DEV_LOCK) && diff -u $(LOCK) $$dir/$(LOCK); status=$$?; rm -rf $$dir; \
	if [ $$status -ne 0 ]; then echo "the lock files do not match pyproject.toml: run 'make lock'" >&2; exit 1; fi; \
	echo "$(LOCK) and $(DEV_LOCK) match pyproject.toml"

clean:
	rm -rf $(VENV) var staticfiles screenshots site .pytest_cache node_modules static/vendor
