"""The examples in the spec modules' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "zarr_dask.spec",
    "zarr_dask.spec.json",
    "zarr_dask.spec.paths",
    "zarr_dask.spec.chunk_grid",
    "zarr_dask.spec.chunk_keys",
    "zarr_dask.spec.v2",
    "zarr_dask.spec.v3",
    "zarr_dask.spec.consolidated",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert name == "zarr_dask.spec" or result.attempted > 0
