# placement-webhook: the two commands are `make demo` and `make test`.
# Everything else they need (the Python venv, the Go-built control plane) is
# made on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all demo test unit e2e bench compare lint format control-plane image venv clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(STAMP)

## Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kubectl
## from the Go modules pinned in hack/ (once; cached outside the clone).
control-plane:
	@bash hack/build.sh >/dev/null

## The container image without Docker: buildah on a base made from Debian packages
## (cached under ~/.cache/placement-webhook/image). Prints the docker-archive to load.
image:
	@archive=$$(bash hack/image.sh) && \
	  echo "image localhost/placement-webhook:$$(awk -F'"' '/^version = /{print $$2; exit}' pyproject.toml): $$archive ($$(du -m "$$archive" | cut -f1) MB)"

## The main job: the webhook placing ~50 pods on a real local control plane.
demo: $(STAMP) control-plane
	$(PY) -m webhook.demo

## Unit tests (pure core, no cluster) and e2e tests (real local control plane).
test: $(STAMP) control-plane
	$(PY) -m pytest tests

unit: $(STAMP) control-plane  # tests/unit/deploy renders manifests with the pinned kubectl
	$(PY) -m pytest tests/unit

e2e: $(STAMP) control-plane
	$(PY) -m pytest tests/e2e

## Benchmarks: print tables and write JSON figures under build/bench/.
## bench_abuse starts a local control plane (stalled connections, 10,000 fuzzed bodies).
bench: $(STAMP) control-plane
	$(PY) benchmarks/bench_policy.py
	$(PY) benchmarks/bench_cluster.py
	$(PY) benchmarks/bench_admission.py
	$(PY) benchmarks/bench_worst_pods.py
	$(PY) benchmarks/bench_abuse.py

## Comparison experiments (issue 7): ceiling, kube-scheduler, webhook (nodeName, nodeAffinity),
## scheduler extender, webhook outage, and burst-100 again on 100 hollow kubelets; each arm on
## its own local control plane. A few minutes.
COMPARE_SUITE ?= parity burst-100 outage-100 kubelets-100
compare: $(STAMP) control-plane
	$(PY) -m experiments run $(COMPARE_SUITE) --out build/compare
	@echo "report: build/compare/report.md"

lint: $(STAMP)
	$(VENV)/bin/ruff check webhook certs experiments tests benchmarks tools
	$(VENV)/bin/ruff format --check webhook certs experiments tests benchmarks tools
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) tools/check_structure.py  # no import cycle, no module over 600 lines

format: $(STAMP)
	$(VENV)/bin/ruff format webhook certs experiments tests benchmarks tools
	$(VENV)/bin/ruff check --fix webhook certs experiments tests benchmarks tools

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .devcluster
