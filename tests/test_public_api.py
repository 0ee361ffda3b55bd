"""The public API as tools see it: typed (py.typed), and ``zarr_dask.convert`` a plain function with its signature."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import zarr_dask

ROOT = Path(__file__).resolve().parents[1]


def test_package_is_marked_typed() -> None:
    assert (ROOT / "zarr_dask" / "py.typed").is_file()
    assert 'zarr_dask = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()  # shipped in wheels too


def test_convert_is_a_function_with_its_signature() -> None:
    assert inspect.isfunction(zarr_dask.convert)
    params = inspect.signature(zarr_dask.convert).parameters
    assert list(params)[:2] == ["source", "destination"] and "zarr_format" in params and "chunks" in params
    assert zarr_dask.convert.__module__ == "zarr_dask._convert"


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is a test extra (not in make test-min)")
def test_convert_resolves_statically() -> None:
    """What an IDE or mypy sees: ``zarr_dask.convert`` is the function, not a module."""
    code = "import zarr_dask\nreveal_type(zarr_dask.convert)\n"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file=", "--no-incremental", "--cache-dir=/dev/null",
         "--ignore-missing-imports", "--follow-imports=silent", "-c", code],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    assert 'Revealed type is "def (source: Any, destination: Any, *' in out.stdout, out.stdout
