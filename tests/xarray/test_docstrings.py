"""The docstring examples of the xarray backend run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "zarr_dask.xarray_backend.entrypoint",
    "zarr_dask.xarray_backend.hierarchy",
    "zarr_dask.xarray_backend.backend_array",
    "zarr_dask.xarray_backend.prefetch",
    "zarr_dask.xarray_backend.encoding",
    "zarr_dask.xarray_backend.validation",
    "zarr_dask.xarray_backend.to_zarr",
    "zarr_dask.xarray_backend.datatree",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
