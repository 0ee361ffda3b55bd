"""``ds.zarr_dask.to_zarr(...)``, ``da.zarr_dask.to_zarr(...)`` and ``dt.zarr_dask.to_zarr(...)``: the writers as
xarray accessors.

Registered when :mod:`zarr_dask.xarray_backend` is first imported (by xarray when it lists its engines, or by
``zarr_dask.to_zarr_dataset``); registering costs nothing, the writers load on first call.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

__all__ = ["DataArrayAccessor", "DataTreeAccessor", "DatasetAccessor", "register"]


class DatasetAccessor:
    """``ds.zarr_dask``: zarr_dask operations on a Dataset."""

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        """:func:`zarr_dask.to_zarr_dataset` of this dataset."""
        from zarr_dask.xarray_backend.to_zarr import to_zarr_dataset

        return to_zarr_dataset(self._ds, store, **kwargs)


class DataArrayAccessor:
    """``da.zarr_dask``: zarr_dask operations on a DataArray."""

    def __init__(self, da: xr.DataArray) -> None:
        self._da = da

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        """:func:`zarr_dask.to_zarr_dataset` of this array (read it back with ``xr.open_dataarray``)."""
        from zarr_dask.xarray_backend.to_zarr import to_zarr_dataset

        return to_zarr_dataset(self._da, store, **kwargs)


class DataTreeAccessor:
    """``dt.zarr_dask``: zarr_dask operations on a DataTree."""

    def __init__(self, dt: xr.DataTree) -> None:
        self._dt = dt

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        """:func:`zarr_dask.to_zarr_datatree` of this tree."""
        from zarr_dask.xarray_backend.datatree import to_zarr_datatree

        return to_zarr_datatree(self._dt, store, **kwargs)


def register() -> None:
    """Register the ``zarr_dask`` accessors (once per process)."""
    if not hasattr(xr.Dataset, "zarr_dask"):
        xr.register_dataset_accessor("zarr_dask")(DatasetAccessor)  # type: ignore[no-untyped-call]
    if not hasattr(xr.DataArray, "zarr_dask"):
        xr.register_dataarray_accessor("zarr_dask")(DataArrayAccessor)  # type: ignore[no-untyped-call]
    if not hasattr(xr.DataTree, "zarr_dask"):
        xr.register_datatree_accessor("zarr_dask")(DataTreeAccessor)  # type: ignore[no-untyped-call]
