"""Resumable dataset and tree writes over sources that change (issue 37): the dataset journal records the
witness of every dask variable's sources; a resume whose sources were rewritten starts over (unnamed, or
``mode="w"``) or is refused (a named run that would not start over). Kills: a task raising on its N-th call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.dask_modes import DASK_ARRAY, DASK_ARRAY_NAMES  # noqa: E402
from tests.graph import _resume_job as job
from tests.graph._resume_job import CHUNKS, SHAPE, Dies
from zarr_dask.errors import ResumeInputsChangedError

#: under the dask-array package (make test-dask-array) an unnamed re-run of these jobs gets another run id:
#: dask-array 0.7 tokenizes ``from_array(..., name=...)`` with a UUID per call, so ``from_zarr(...).map_blocks(f)``
#: is named anew at each construction (checked on a plain ``dask_array.from_array``: tests/dask_modes.py); a named
#: run (``resume="name"``) is unaffected. Non-strict: only the tests of unnamed runs meet it.
pytestmark = pytest.mark.xfail(DASK_ARRAY, reason=DASK_ARRAY_NAMES, strict=False)

ENC = {"v": {"chunks": CHUNKS}}


def _values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1000, SHAPE).astype("f8")


def _deliver(src: str, seed: int, opts: dict[str, Any]) -> None:
    zarr_dask.to_zarr(da.from_array(_values(seed), chunks=CHUNKS), src, chunks=CHUNKS, mode="w", **opts)


def _dataset(src: str, key: str, fail_at: int, opts: dict[str, Any]) -> xr.Dataset:
    job.STATE[key] = {"fail_at": fail_at, "seen": []}
    v = zarr_dask.from_zarr(src, chunks=CHUNKS, **opts).map_blocks(job.flaky, key, dtype="f8")
    return xr.Dataset({"v": (("t", "x"), v)}, coords={"t": np.arange(SHAPE[0])}, attrs={"title": "job"})


def _write(ds: xr.Dataset, out: str, opts: dict[str, Any], **kw: Any) -> Any:
    with dask.config.set(scheduler="sync"):
        return zarr_dask.to_zarr_dataset(ds, out, encoding=ENC, **opts, **kw)


def test_dataset_source_rewritten_between_kill_and_resume(where: Any) -> None:
    src, opts = where("src.zarr")
    out, _ = where("out.zarr")
    _deliver(src, 1, opts)
    with pytest.raises(Dies):
        _write(_dataset(src, "ds", 6, opts), out, opts, mode="w", resume=True)
    _deliver(src, 2, opts)
    _write(_dataset(src, "ds", 0, opts), out, opts, mode="w", resume=True)
    assert sorted(b for b in job.STATE["ds"]["seen"] if b >= 0) == list(range(12))  # started over
    got = xr.open_dataset(out, engine="zarr_dask", **opts)
    np.testing.assert_array_equal(got.v.values, _values(2) * 3 + 1)


def test_dataset_source_unchanged_resumes(tmp_path: Path) -> None:
    src, out = str(tmp_path / "src.zarr"), str(tmp_path / "out.zarr")
    _deliver(src, 3, {})
    with pytest.raises(Dies):
        _write(_dataset(src, "same", 6, {}), out, {}, mode="w", resume=True)
    _write(_dataset(src, "same", 0, {}), out, {}, mode="w", resume=True)
    assert len([b for b in job.STATE["same"]["seen"] if b >= 0]) < 12  # resumed: finished blocks skipped
    np.testing.assert_array_equal(xr.open_dataset(out, engine="zarr_dask").v.values, _values(3) * 3 + 1)


def test_named_dataset_run_with_other_inputs(tmp_path: Path) -> None:
    """The same run name with rewritten inputs: refused (naming the source and the fix) unless mode="w"."""
    src, out = str(tmp_path / "src.zarr"), str(tmp_path / "out.zarr")
    _deliver(src, 4, {})
    with pytest.raises(Dies):
        _write(_dataset(src, "named", 6, {}), out, {}, mode="w-", resume="job-7")
    _deliver(src, 5, {})
    with pytest.raises(ResumeInputsChangedError, match=r"src\.zarr /.*mode='w'.*job-7-2"):
        _write(_dataset(src, "named", 0, {}), out, {}, mode="w-", resume="job-7")
    _write(_dataset(src, "named", 0, {}), out, {}, mode="w", resume="job-7")
    np.testing.assert_array_equal(xr.open_dataset(out, engine="zarr_dask").v.values, _values(5) * 3 + 1)


def test_named_tree_run_with_other_inputs(tmp_path: Path) -> None:
    src, out = str(tmp_path / "src.zarr"), str(tmp_path / "out.zarr")
    _deliver(src, 6, {})

    def tree(fail_at: int) -> xr.DataTree:
        return xr.DataTree.from_dict({"/": xr.Dataset(attrs={"k": 1}), "/a": _dataset(src, "tree", fail_at, {})})

    with pytest.raises(Dies), dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_datatree(tree(6), out, mode="w-", encoding={"/a": ENC}, resume="tree-1")
    _deliver(src, 7, {})
    with pytest.raises(ResumeInputsChangedError, match="src.zarr"), dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_datatree(tree(0), out, mode="w-", encoding={"/a": ENC}, resume="tree-1")
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_datatree(tree(0), out, mode="w", encoding={"/a": ENC}, resume="tree-1")
    got = xr.open_datatree(out, engine="zarr_dask")
    np.testing.assert_array_equal(got["a"].v.values, _values(7) * 3 + 1)


def test_daily_dataset_append_of_a_rewritten_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daily pattern for datasets: each day's ``latest.zarr`` (same coordinates, same shape) appended once,
    also when a day's job dies and runs again."""
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "1.0")
    latest, archive = str(tmp_path / "latest.zarr"), str(tmp_path / "archive.zarr")

    def day(key: str, fail_at: int) -> xr.Dataset:
        job.STATE[key] = {"fail_at": fail_at, "seen": []}
        v = zarr_dask.from_zarr(latest, chunks=CHUNKS).map_blocks(job.flaky, key, 1.0, dtype="f8")
        return xr.Dataset({"v": (("t", "x"), v)})

    _deliver(latest, 0, {})
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(day("d0", 0), archive, mode="w", encoding=ENC)
    for d in (1, 2, 3):
        _deliver(latest, d, {})
        with dask.config.set(scheduler="sync"):
            if d == 2:
                with pytest.raises(Dies):
                    zarr_dask.to_zarr_dataset(day("dd", 5), archive, append_dim="t", resume=True)
            zarr_dask.to_zarr_dataset(day("dd", 0), archive, append_dim="t", resume=True)
            zarr_dask.to_zarr_dataset(day("dd", 0), archive, append_dim="t", resume=True)  # run again: landed
    got = xr.open_dataset(archive, engine="zarr_dask").v.values
    np.testing.assert_array_equal(got, np.concatenate([_values(d) for d in range(4)]))
