"""The examples in the docstrings of the sharding and rectilinear modules run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["zarr_dask.codecs.shard_access", "zarr_dask.core.create", "zarr_dask.core.chunk_io"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
