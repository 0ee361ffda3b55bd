"""Every docstring example of every zarr_dask module runs and gives what it shows.

Modules are found by walking the package, so a new module is covered without being listed. A module
without any example must be named in ``NO_EXAMPLES``: public functions should show how they are called,
and the list makes leaving that out a visible choice.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import tempfile
from pathlib import Path

import pytest

import zarr_dask

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(zarr_dask.__path__, "zarr_dask.")
    if not m.name.endswith("__main__") and m.name != "zarr_dask._native"  # C: documented by zarr_dask.native
)
#: modules with no examples of their own (packages that only re-export, glue, private helpers)
NO_EXAMPLES = frozenset(
    {
        "zarr_dask.cli", "zarr_dask.cli.cleanup", "zarr_dask.cli.convert", "zarr_dask.cli.ledger", "zarr_dask.cli.validate",
        "zarr_dask.codecs", "zarr_dask.codecs.base", "zarr_dask.codecs.builtin", "zarr_dask.codecs.chunk_plan", "zarr_dask.codecs.numcodecs_bridge",
        "zarr_dask.codecs.registry", "zarr_dask.codecs.sharding", "zarr_dask.codecs.zarr_python_bridge",
        "zarr_dask._convert.report", "zarr_dask._convert.tasks",
        "zarr_dask.core", "zarr_dask.core.commit", "zarr_dask.core.indexing", "zarr_dask.core.nodes",
        "zarr_dask.demo",
        "zarr_dask.graph", "zarr_dask.graph.guard", "zarr_dask.graph.layers", "zarr_dask.graph.target",
        "zarr_dask.store", "zarr_dask.store.cloud_conditional", "zarr_dask.store.fsspec_conditional", "zarr_dask.store.icechunk",
        "zarr_dask.xarray_backend", "zarr_dask.xarray_backend.accessor", "zarr_dask.xarray_backend.datastore",
        "zarr_dask.xarray_backend.reading", "zarr_dask.xarray_backend.indexers", "zarr_dask.xarray_backend.variables",
        "zarr_dask.xarray_backend.write_plan",
        "zarr_dask.zom.build",
    }
)  # fmt: skip
#: modules whose examples pass zarr-python objects (not installed in `make test-min`)
NEEDS_ZARR = frozenset({"zarr_dask.store.wrapped", "zarr_dask.store.zarr_python"})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name in NEEDS_ZARR and importlib.util.find_spec("zarr") is None:
        pytest.skip("its examples use zarr-python, which is not installed")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # examples' mkdtemp() land in tmp_path
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name not in NO_EXAMPLES:
        assert result.attempted > 0, f"{name} has no docstring examples (add some, or list it in NO_EXAMPLES)"


def test_no_examples_list_names_real_modules() -> None:
    assert set(MODULES) >= NO_EXAMPLES


def test_public_names_resolve() -> None:
    for name in zarr_dask.__all__:
        assert getattr(zarr_dask, name) is not None
    from zarr_dask import graph

    for name in ("from_zarr", "to_zarr", "append", "explain_write"):
        assert getattr(zarr_dask, name) is getattr(graph, name)
