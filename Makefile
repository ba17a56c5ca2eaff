# The README's commands. Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup lint typecheck unit control-plane test run sandbox sandbox-down crds chart image clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

# Build kube-apiserver, controller-manager, scheduler, etcd, Kueue, kwok and nfd-master from tools/ (each cached
# by the hash of its own go.mod/go.sum and build flags).
control-plane: $(STAMP)
	$(BIN)/gpustack-operator sandbox build

# The test command: lint, then unit and integration tests (integration runs on a real local control plane).
test: lint control-plane
	$(BIN)/pytest -q

# INVENTORY=all-vendors (or a file) picks the fake nodes of a sandbox not running yet.
sandbox: control-plane
	$(BIN)/gpustack-operator sandbox status >/dev/null 2>&1 || \
		$(BIN)/gpustack-operator sandbox up $(if $(INVENTORY),--inventory $(INVENTORY))

# The main job: the worker against the local sandbox (started first if it is not running).
run: sandbox
	KUBERNETES_POD_NAMESPACE=gpustack-system $(BIN)/gpustack-operator worker --kubeconfig .sandbox/kubeconfig

sandbox-down: $(STAMP)
	$(BIN)/gpustack-operator sandbox down

crds: $(STAMP)
	$(BIN)/python scripts/gen_crds.py

# Vendor the Kueue and NFD subcharts, helm lint --strict, render the chart three ways into build/chart/ and,
# when a sandbox runs, dry-run the render against its kube-apiserver (scripts/chart.py says what it skipped).
chart: control-plane
	$(BIN)/python scripts/chart.py

# The operator image (Dockerfile) with whichever container builder exists. Not part of `make test`.
IMAGE ?= gpustack/gpustack-operator:dev
image:
	@builder=$$(for b in docker podman buildah; do command -v $$b >/dev/null 2>&1 && { echo $$b; break; }; done); \
	if [ -z "$$builder" ]; then \
		echo "no container builder (docker, podman, buildah) found; the image was not built" >&2; exit 1; \
	fi; \
	if [ "$$builder" = buildah ]; then set -x; buildah bud -t $(IMAGE) -f Dockerfile .; \
	else set -x; $$builder build -t $(IMAGE) -f Dockerfile .; fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .sandbox
