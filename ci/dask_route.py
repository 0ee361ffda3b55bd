"""A pytest plugin that routes dask's ``from_zarr`` / ``to_zarr`` / ``Array.to_zarr`` to zarr_dask's, so
dask's own zarr tests (run from the installed dask package, never copied here) test ours: ``make test-dask``."""

from __future__ import annotations

from typing import Any

import zarr_dask


def _array_to_zarr(self: Any, *args: Any, **kwargs: Any) -> Any:
    return zarr_dask.to_zarr(self, *args, **kwargs)


def pytest_configure(config: Any) -> None:
    import dask.array as da
    import dask.array.core as core

    for mod in {da, core}:
        mod.from_zarr = zarr_dask.from_zarr  # type: ignore[attr-defined]
        mod.to_zarr = zarr_dask.to_zarr  # type: ignore[attr-defined]
    da.Array.to_zarr = _array_to_zarr  # type: ignore[method-assign]
    for mark in ("xfail_with_pyarrow_strings", "flaky", "skip_with_pyarrow_strings", "gpu", "slow", "network"):
        config.addinivalue_line("markers", f"{mark}: a mark of dask's own test configuration")
