"""The examples in the store modules' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import tempfile
from pathlib import Path

import pytest

MODULES = [
    "zarr_dask.store._counters",
    "zarr_dask.store._keys",
    "zarr_dask.store.api",
    "zarr_dask.store.base",
    "zarr_dask.store.fsspec_store",
    "zarr_dask.store.local",
    "zarr_dask.store.memory",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # examples' mkdtemp() land in tmp_path
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
