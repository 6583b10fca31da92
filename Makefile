# The README's two commands: `make run` and `make test`. A second run reuses what the first installed.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# torch is optional for users; pinned exactly here so that no looser requirement pulls CUDA wheels.
# `make TORCH=` installs without it (and removes one a previous `make` installed); a changed
# TORCH= re-installs (the stamps depend on it).
TORCH  ?= torch==2.13.0
PIP     = $(BIN)/python -m pip --disable-pip-version-check -q
TORCH_ARG = $(if $(strip $(TORCH)),"$(TORCH)")
NO_TORCH = $(if $(strip $(TORCH)),,$(PIP) uninstall -y torch)

.PHONY: run test test-fast setup setup-test lint typecheck bench clean gpu-wheels FORCE

run: $(VENV)/.run-ok
	$(BIN)/gpuprobe doctor

# The suite on TEST_JOBS processes (pytest-xdist), a module to a process so that a module's
# shared fixtures (a Dask cluster, a read trace) are made once. 0 (the default): one process.
# `make test TEST_JOBS=3` takes 8 min instead of 14 on a 2-core machine, but some tests that
# time real processes still fail under that load (issue 41): CI runs the default.
# The tests marked serial (Ctrl-C timed against real worker processes) run after, alone.
TEST_JOBS ?= 0
test: $(VENV)/.test-ok
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -q -m serial

# The edit loop: the suite less the tests marked slow and the modules that start real clusters,
# real profiled runs or the GPU sweep's scripts (README, "Two commands", says which). `make test`
# runs them all; CI runs `make test`.
FAST_SKIPS = tests/tools/profile/test_profile.py tests/tools/fleet/test_fleet_cluster.py \
	tests/tools/fleet/test_fleet_kernels.py tests/tools/fleet/test_fleet_bench_cluster.py \
	tests/test_gpu_sweep.py tests/test_no_leftovers.py
test-fast: $(VENV)/.test-ok
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not slow" $(addprefix --ignore=,$(FAST_SKIPS))

setup: $(VENV)/.run-ok
setup-test: $(VENV)/.test-ok

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Holds the TORCH= of the last install; rewritten (so newer than the stamps) only when it changes.
$(VENV)/.torch-spec: FORCE | $(BIN)/python
	@echo '$(TORCH)' | cmp -s - $@ || echo '$(TORCH)' > $@

$(VENV)/.run-ok: pyproject.toml $(VENV)/.torch-spec | $(BIN)/python
	$(PIP) install -e ".[plot]" $(TORCH_ARG)
	$(NO_TORCH)
	touch $@

$(VENV)/.test-ok: pyproject.toml $(VENV)/.run-ok
	$(PIP) install -e ".[plot,test,dev]" $(TORCH_ARG)
	touch $@

FORCE:

# The house rules: lint, format, types, the doors to outside libraries (import-linter, the
# contracts in pyproject.toml: the doors, the layers, the views, the tools' independence), and the
# import circles between files, the CLI through the API, and modules' length
# (tests/test_architecture.py). CI runs it before `make test`.
lint: $(VENV)/.test-ok
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	cd src && $(abspath $(BIN))/lint-imports --no-cache --config ../pyproject.toml
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_architecture.py

typecheck: $(VENV)/.test-ok
	$(BIN)/mypy

# The wheels a lent GPU machine needs (it reaches no registry; docs/gpu-session.md): this
# project's wheel, and the pure-Python packages its image lacks, for its Python 3.12 on x86-64.
# dask and distributed at the version dask-cuda 26.10 pins; traceinsight (HTA) and plotly for
# the diagnose-vs-HTA step. About 14 MB, carried as .whl (git ignores it).
GPU_WHEELS = dask==2026.7.1 distributed==2026.7.1 dask-cuda==26.10.0 partd==1.4.2 locket==1.0.0 \
	tblib==3.2.2 zict==3.0.0 tornado==6.6.1 traceinsight==0.6.1 plotly==7.1.0 \
	msgspec==0.22.0
gpu-wheels: $(VENV)/.run-ok
	rm -rf .whl && mkdir -p .whl
	$(PIP) wheel --no-deps --no-build-isolation -w .whl .
	$(PIP) download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)
	@ls .whl | wc -l | xargs echo "wheels in .whl:"; du -sh .whl

clean:
	rm -rf $(VENV) build dist src/*.egg-info
