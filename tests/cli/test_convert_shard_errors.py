"""``convert --shards`` that the inner chunks do not divide: the error names the destination store, the array,
the dimension by name and the options that fix it (issue 40 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

import zarr_dask
from zarr_dask.cli import main


@pytest.mark.parametrize("chunks", ["x=30", "x=-1"])
def test_shards_the_chunks_do_not_divide(tmp_path: Path, capsys: pytest.CaptureFixture[str], chunks: str) -> None:
    src, dst = str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")
    zarr_dask.create_array(src, path="v", shape=(100, 30), chunks=(10, 30), dtype="f4", dimension_names=["t", "x"])[:] = 1
    assert main(["convert", src, dst, "--zarr-format", "3", "--chunks", chunks, "--shards", "x=20"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"zarr-dask: error: store {zarr_dask.open_store(dst).url!r}: array '/v': shard size 20 along dimension 1")
    assert "fix: give --shards x=N with N a multiple of 30, or --chunks x=N with N dividing 20" in err
    assert "(in Python: shards={'x': N} / chunks={'x': N})" in err
    assert not Path(dst).exists()  # refused before anything is written
