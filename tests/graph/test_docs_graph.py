"""The docstring examples of the dask engine run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "zarr_dask.graph.buffers",
    "zarr_dask.graph.chunking",
    "zarr_dask.graph.handle",
    "zarr_dask.graph.plan",
    "zarr_dask.graph.read",
    "zarr_dask.graph.write",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_public_names() -> None:
    import zarr_dask
    from zarr_dask import graph

    for name in ("from_zarr", "to_zarr", "append", "explain_write"):
        assert getattr(zarr_dask, name) is getattr(graph, name)
        assert name in zarr_dask.__all__
