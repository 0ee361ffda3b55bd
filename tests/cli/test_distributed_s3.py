"""``convert`` on a dask.distributed cluster (``--scheduler`` to a LocalCluster started here, ``--workers``)
and between object storage and local files (moto S3 server), with the real command."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zarr_dask
from tests.cli._helpers import assert_same_data, assert_same_datasets, make_hierarchy, run

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def scheduler_address() -> Iterator[str]:
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=50)  # fmt: skip
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_scheduler_address(scheduler_address: str, tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    expected = make_hierarchy(src, 2)
    proc = run("convert", src, dst, "--zarr-format", "3", "--chunks", "time=24,lat=4", "--shards", "lat=12",
               "--scheduler", scheduler_address, "--max-memory", "64MiB", "--json", "--progress")  # fmt: skip
    report = json.loads(proc.stdout)  # the progress bar went to stderr, as --help says: stdout is the JSON alone
    assert "[" in proc.stderr and "Completed" in proc.stderr
    assert report["threads"] == 1  # the workers' threads
    stats = report["stats"]
    # counted in the worker processes and gathered from the tasks
    assert stats["tasks"] == sum(p["tasks"] for a in report["arrays"] for p in a["passes"])
    assert stats["read_requests"] == 24 + 24 + 3 + 2 + 2 and stats["bytes_written"] > 0  # each source chunk read once
    assert_same_data(dst, expected)
    assert_same_datasets(src, dst)


def test_local_cluster_of_workers(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    expected = make_hierarchy(src, 3, sharded=True)
    out = run("convert", src, dst, "--chunks", "time=12", "--shards", "none", "--workers", "1", "--threads", "2", "-v",
              "--log", "cli")  # fmt: skip
    assert "started a LocalCluster of 1 worker(s) with 2 thread(s) each" in out.stderr and "\nconverted 5 array(s)" in out.stdout
    assert_same_data(dst, expected)
    assert zarr_dask.open_array(dst, path="t2m").shards is None


def test_s3_to_local_and_back(s3_bucket_url: str, s3_storage_options: dict[str, Any], tmp_path: Path) -> None:
    expected = make_hierarchy(s3_bucket_url, 2, s3_storage_options)
    options = json.dumps(s3_storage_options)
    local = str(tmp_path / "local.zarr")
    down = run("convert", s3_bucket_url, local, "--zarr-format", "3", "--chunks", "time=24", "--shards", "lat=12",
               "--source-storage-options", options)  # fmt: skip
    assert down.stdout.startswith("converted 5 array(s) and 3 group(s)")
    assert_same_data(local, expected)
    back = s3_bucket_url.replace("root.zarr", "back.zarr")
    report = json.loads(run("convert", local, back, "--zarr-format", "2", "--chunks", "time=6", "--dst-storage-options",
                            options, "--json").stdout)  # fmt: skip
    assert report["destination"].startswith("s3://") and report["stats"]["write_requests"] > 0
    assert_same_data(back, expected, s3_storage_options)
    sst = zarr_dask.open_array(back, path="surface/sst", storage_options=s3_storage_options)
    assert (sst.zarr_format, sst.chunks, sst.fill_value) == (2, (6, 12, 20), -999)


def test_a_worker_lost_twice_is_restarted_both_times() -> None:
    """A --workers cluster whose worker dies (an OOM kill), and again while distributed's lost-worker-timeout
    (15 s by default) of the first death runs out: its nanny restarts it both times, and the cluster is whole."""
    from zarr_dask.cli.convert import _scheduler

    def kill_worker_named(client: Any, name: int) -> None:
        names = client.run_on_scheduler(lambda dask_scheduler: {a: w.name for a, w in dask_scheduler.workers.items()})
        address = next(a for a, n in names.items() if n == name)
        os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)

    with _scheduler(argparse.Namespace(scheduler=None, workers=2, threads=1)) as client:
        first = time.monotonic()
        kill_worker_named(client, 0)
        time.sleep(0.5)
        client.wait_for_workers(2, timeout=60)
        time.sleep(max(0.0, 14.3 - (time.monotonic() - first)))  # its restart straddles the first death's 15 s
        kill_worker_named(client, 0)
        time.sleep(3.0)
        client.wait_for_workers(2, timeout=30)
        names = client.run_on_scheduler(lambda dask_scheduler: [w.name for w in dask_scheduler.workers.values()])
        assert sorted(names) == [0, 1]
        assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
