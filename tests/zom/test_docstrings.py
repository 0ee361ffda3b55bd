"""The docstring examples of the ZOM modules and of the latency store run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "zarr_dask.zom.array",
    "zarr_dask.zom.model",
    "zarr_dask.zom.flat",
    "zarr_dask.zom.build",
    "zarr_dask.zom.convert",
    "zarr_dask.zom.diff",
    "zarr_dask.zom.conventions",
    "zarr_dask.zom.schema",
    "zarr_dask.zom.io",
    "zarr_dask.zom.write",
    "zarr_dask.store.latency",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name not in ("zarr_dask.zom.flat", "zarr_dask.zom.build"):
        assert result.attempted > 0, f"{name} has no examples"
