# zarr_dask — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A Python >= 3.12 for the newest zarr-python oracle (zarr >= 3.2 needs it); found by ci/find-oracle-python.
ORACLE_PYTHON ?= $(shell bash ci/find-oracle-python 2>/dev/null)
ORACLE_VENV ?= .venv-oracle
PYTEST_ARGS ?=

.PHONY: demo test test-main test-xarray test-oracle test-slow lint typecheck bench clean

# setup.py builds the optional C reader (zarr_dask/_native.c); editing it reinstalls
$(VENV)/.installed: pyproject.toml setup.py zarr_dask/_native.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

$(ORACLE_VENV)/.installed: pyproject.toml setup.py zarr_dask/_native.c
	@test -n "$(ORACLE_PYTHON)" || { echo "no Python >= 3.12 found for the zarr-python oracle (set ORACLE_PYTHON=...)"; exit 1; }
	@test -x $(ORACLE_VENV)/bin/python || $(ORACLE_PYTHON) -m venv $(ORACLE_VENV)
	$(ORACLE_VENV)/bin/python -m pip install -q --upgrade pip
	$(ORACLE_VENV)/bin/python -m pip install -q -e '.[test]' 'zarr>=3.2'
	@touch $@

demo: $(VENV)/.installed
	$(PY) -m zarr_dask.demo

test: lint test-main test-xarray test-oracle

test-main: $(VENV)/.installed
	$(PY) -m pytest -n 2 $(PYTEST_ARGS)

# xarray's own zarr backend tests, run from the installed xarray package against zarr_dask (see
# tests/xarray_suite/plugin.py): all of them with zarr_dask writing and reading, then the common ones mixed
# (zarr_dask writes, xarray's engine reads; xarray's engine writes, zarr_dask reads). Known, documented
# differences are strict xfails (tests/xarray_suite/expected.py). Run from a scratch directory: some tests
# write into the working directory.
XARRAY_SUITE = PYTHONPATH="$(CURDIR)" "$(CURDIR)/$(PY)" -m pytest -c "$(CURDIR)/tests/xarray_suite/pytest.ini" \
	--rootdir=. -n 2 --pyargs xarray.tests.test_backends xarray.tests.test_backends_datatree $(PYTEST_ARGS)
XARRAY_ALL = (zarr or Zarr) and not (TestZarrWriteEmpty and not (write_empty or excess_metadata))
XARRAY_MIXED = TestZarrDictStore or TestZarrDatatreeIO or TestZarrRegionAuto or TestDataArrayToZarr

test-xarray: $(VENV)/.installed
	cd "$$(mktemp -d)" && ZD_XARRAY_ROUTE=both $(XARRAY_SUITE) -k "$(XARRAY_ALL)"
	cd "$$(mktemp -d)" && ZD_XARRAY_ROUTE=write $(XARRAY_SUITE) -k "$(XARRAY_MIXED)"
	cd "$$(mktemp -d)" && ZD_XARRAY_ROUTE=read $(XARRAY_SUITE) -k "$(XARRAY_MIXED)"

# The randomized concurrency suites at full size (100+ runs per store kind), on demand.
test-slow: $(VENV)/.installed
	ZD_SLOW=1 $(PY) -m pytest -n 2 -m slow $(PYTEST_ARGS)

# The interop tests again, against the newest zarr-python (needs Python >= 3.12).
test-oracle: $(ORACLE_VENV)/.installed
	$(ORACLE_VENV)/bin/python -m pytest -n 2 -m oracle $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(PY) -m ruff check zarr_dask tests benchmarks
	$(PY) -m mypy

# Benchmarks run against the newest zarr-python (the oracle venv); BENCH="bench_dask bench_sharding" picks some.
bench: $(ORACLE_VENV)/.installed
	$(ORACLE_VENV)/bin/python -m pip install -q -e '.[bench]'
	$(ORACLE_VENV)/bin/python benchmarks/run_all.py $(BENCH)

clean:
	rm -rf $(VENV) $(ORACLE_VENV) .pytest_cache .mypy_cache build *.egg-info
