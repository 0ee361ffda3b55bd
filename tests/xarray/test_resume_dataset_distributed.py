"""A resumable whole-dataset write (``to_zarr_dataset(..., mode="w", resume=True, compute=False)``) and a
resumable dataset append (``append_dim=...``) on a ``LocalCluster`` of worker processes, a task exiting its
worker process half way, then the same write again (issue 25). The scheduler gives up at the first lost worker (``allowed-failures: 0``), so the write dies."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.conftest import local_cluster_client
from tests.graph import _resume_job as job
from tests.graph._resume_job import ENCODING
from tests.graph.test_resume import files, identities, receipts, settled
from tests.graph.test_resume_distributed import lose_a_worker
from tests.xarray.test_resume_dataset import _older
from tests.xarray.test_resume_dataset_append import ROWS, _base, _receipts, resume_job_append

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster_client(losing_workers=True) as c:
        yield c


def test_worker_exits_then_dataset_resumed(client: Any, tmp_path: Path) -> None:
    url, counter = tmp_path / "a.zarr", tmp_path / "count"
    _older(str(url))
    write = zarr_dask.to_zarr_dataset(job.dataset(str(counter)), str(url), mode="w", encoding=ENCODING, resume=True,
                                      compute=False)  # fmt: skip
    lose_a_worker(client, write, counter, lambda: receipts(url / "v"))
    finished = settled(lambda: receipts(url / "v"))
    assert 0 < len(finished) < 12
    before, computed = identities(url), len(job.calls(str(counter)))
    zarr_dask.to_zarr_dataset(job.dataset(str(counter)), str(url), mode="w", encoding=ENCODING, resume=True)
    again = job.calls(str(counter))[computed:]
    assert sorted(again) == sorted(set(range(12)) - finished)  # finished blocks: not recomputed
    after = identities(url)
    assert all(after[f"v/c/{i}/0"] == before[f"v/c/{i}/0"] for i in finished)  # nor rewritten
    clean = tmp_path / "clean.zarr"
    zarr_dask.to_zarr_dataset(job.dataset(str(tmp_path / "clean-count")), str(clean), encoding=ENCODING)
    assert files(url) == files(clean)


def test_worker_exits_then_dataset_append_resumed(client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumable dataset append computed on the cluster loses a worker half way; the same append again (under
    the group's lease, which the dropped lazy write lets lapse) skips the finished writer tasks and lands once."""
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "1.0")
    url, counter = _base(tmp_path / "a.zarr", np.arange(-ROWS, 0)), tmp_path / "count"
    write = zarr_dask.to_zarr_dataset(job.dataset(str(counter)), str(url), append_dim="t", resume=True,
                                      compute=False)  # fmt: skip
    lose_a_worker(client, write, counter, lambda: _receipts(url))
    del write
    gc.collect()  # the lazy write's lease stops renewing and lapses after its TTL
    finished = settled(lambda: _receipts(url))
    assert 0 < len(finished) < 12
    resume_job_append(url, counter, finished, tmp_path)  # on the cluster (the client is the default scheduler)

