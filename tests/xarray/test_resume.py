"""``to_zarr_dataset(..., region=..., resume=True)`` (issue 25): fan-out jobs into a template, one killed,
listed by the ledger, re-run (skipping what it finished), published once."""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import Dies


def _part(start: int, key: str) -> xr.Dataset:
    values = da.from_array(np.arange(24 * 5, dtype="f8").reshape(24, 5) + start, chunks=(8, 5))
    return xr.Dataset({"v": (("t", "x"), values.map_blocks(job.flaky, key, dtype="f8"))})


def test_dataset_region_jobs_resume_and_publish(tmp_path: Path) -> None:
    url = str(tmp_path / "ds.zarr")
    template = xr.Dataset({"v": (("t", "x"), da.zeros((48, 5), chunks=(8, 5)))})
    zarr_dask.to_zarr_dataset(template, url, compute=False, encoding={"v": {"chunks": (8, 5)}})
    job.STATE["ds-0"] = {"fail_at": 0, "seen": []}
    job.STATE["ds-1"] = {"fail_at": 3, "seen": []}
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(_part(0, "ds-0"), url, region={"t": slice(0, 24)}, resume=True)
        with pytest.raises(Dies):
            zarr_dask.to_zarr_dataset(_part(24, "ds-1"), url, region={"t": slice(24, 48)}, resume=True)
        ledger = zarr_dask.write_ledger(url)
        assert ledger.regions("done", "v") == [((0, 24), (0, 5))]
        assert ledger.missing([(slice(0, 24),), (slice(24, 48),)], "v") == [((24, 48),)]
        (partial,) = [e for e in ledger.entries if e.status == "partial"]
        before = len([b for b in job.STATE["ds-1"]["seen"] if b >= 0])
        zarr_dask.to_zarr_dataset(_part(24, "ds-1"), url, region={"t": slice(24, 48)}, resume=True)
    again = len([b for b in job.STATE["ds-1"]["seen"] if b >= 0]) - before
    assert again == 3 - partial.tasks_done  # finished blocks are not recomputed
    zarr_dask.publish_ledger(url)
    got = xr.open_dataset(url, engine="zarr_dask").v.values
    want = np.concatenate([np.arange(24 * 5).reshape(24, 5) + s for s in (0, 24)]) * 3 + 1
    np.testing.assert_array_equal(got, want)
    assert zarr_dask.write_ledger(url).entries == ()
