"""Consolidated metadata with zarr-python (test-only oracle): it reads what our writes refresh, and we find
the stale entries its own appends leave behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.graph._helpers import reference_data
from zarr_dask.cli import main

zarr = pytest.importorskip("zarr")
pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part:UserWarning"),
]


def _zarr_python_hierarchy(url: str, fmt: int) -> np.ndarray:
    data = reference_data((5, 3))
    root = zarr.open_group(url, mode="w", zarr_format=fmt, attributes={"title": "zp"})
    root.create_array("x", shape=data.shape, chunks=(2, 3), dtype="f8")[:] = data
    root.create_group("g", attributes={"k": 1})
    zarr.consolidate_metadata(url)
    return data


def _open_consolidated(url: str, fmt: int) -> Any:
    return zarr.open_consolidated(url, mode="r", zarr_format=fmt)


def _root_documents(url: str, fmt: int) -> Any:
    name = ".zmetadata" if fmt == 2 else "zarr.json"
    return json.loads((Path(url) / name).read_text())


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_python_reads_our_refreshed_consolidated_metadata(tmp_path: Path, fmt: int) -> None:
    url = str(tmp_path / "zp.zarr")
    old = _zarr_python_hierarchy(url, fmt)
    new = reference_data((4, 3), seed=1)
    assert zarr_dask.append(da.from_array(new, chunks=3), url, component="x") == (9, 3)
    z = reference_data((6,), seed=2)
    zarr_dask.to_zarr(da.from_array(z, chunks=4), url, component="g/new/z", chunks=3, zarr_format=fmt)
    group = _open_consolidated(url, fmt)
    assert group["x"].shape == (9, 3) and group["g/new/z"].shape == (6,)
    np.testing.assert_array_equal(group["x"][:], np.concatenate([old, new]))
    np.testing.assert_array_equal(group["g/new/z"][:], z)
    ours = _root_documents(url, fmt)
    zarr.consolidate_metadata(url)  # what zarr-python writes for the same hierarchy
    assert ours == _root_documents(url, fmt)


@pytest.mark.parametrize("fmt", [2, 3])
def test_check_finds_what_zarr_python_append_leaves_stale(tmp_path: Path, fmt: int, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "zp.zarr")
    _zarr_python_hierarchy(url, fmt)
    zarr.open_array(url, path="x", mode="a").append(np.ones((2, 3)))
    if _open_consolidated(url, fmt)["x"].shape != (5, 3):
        pytest.skip(f"zarr-python {zarr.__version__} refreshes consolidated metadata on append")
    [stale] = zarr_dask.check_consolidated(url)
    assert (stale.path, stale.kind) == ("x", "stale")
    assert stale.detail == "shape [5, 3] in the consolidated metadata, [7, 3] in its own documents"
    assert main(["validate", url]) == 1
    out = capsys.readouterr().out
    assert f"ERROR   /x: stale entry in the consolidated metadata of /: {stale.detail}" in out
    assert f"fix: zarr-dask consolidate {url}" in out
    zarr_dask.to_zarr(da.zeros((1, 3), chunks=1), url, component="x", region=(slice(0, 1),))  # our write repairs it
    assert zarr_dask.check_consolidated(url) == [] and _open_consolidated(url, fmt)["x"].shape == (7, 3)
