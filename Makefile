# ctune developer tasks. `make test` is the README's test command and what .ci/run runs.
PYTHON ?= python3
PYTEST ?= $(PYTHON) -m pytest

.PHONY: install install-gpu test test-unit test-compile test-gpu lint format check bench wheels clean

install:        ## editable install with the dev tools (no GPU needed)
	$(PYTHON) -m pip install -e ".[dev]"

install-gpu:    ## as install, plus CuPy for CUDA 13
	$(PYTHON) -m pip install -e ".[dev,cuda13]"

test:           ## unit + compile tiers; gpu/nvml tests skip with a reason (CTUNE_REQUIRE turns skips into failures)
	$(PYTEST) -q

test-unit:
	$(PYTEST) -q tests/unit

test-compile:
	$(PYTEST) -q -m nvcc --require nvcc

test-gpu:       ## on a GPU machine
	$(PYTEST) -q -m "gpu or nvml" --require nvcc,gpu,nvml

lint:
	ruff check ctune tests bench
	ruff format --check ctune tests bench
	mypy ctune

format:
	ruff format ctune tests bench
	ruff check --fix ctune tests bench

check:          ## staleness of the committed registry against this checkout and toolchain
	ctune check

bench:          ## GPU benchmarks; results land in bench/results/
	bash bench/device.sh

wheels:         ## what the GPU machine lacks, as wheels (it has no network; at most 64 MiB travel)
	$(PYTHON) -m pip download -d .device/wheels --no-deps --python-version 3.12 --only-binary=:all: \
	  --platform manylinux2014_x86_64 deap moocore cffi pycparser platformdirs \
	  "gitpython>=3.1.49" gitdb smmap nvidia-cutlass \
	  kernel_tuner python-constraint2 xmltodict jsonschema jsonschema-specifications referencing \
	  rpds-py attrs \
	  dask distributed cloudpickle toolz partd locket tblib zict sortedcontainers msgpack \
	  tornado psutil importlib_metadata zipp lazy-importer
# the cluster extra (--executor dask): ~3.8 MB of wheels; the image already has jinja2,
# markupsafe, fsspec, packaging, pyyaml and click (PyTorch's, matplotlib's and ctune's own)

clean:
	rm -rf .ctune build dist *.egg-info .pytest_cache .ruff_cache
