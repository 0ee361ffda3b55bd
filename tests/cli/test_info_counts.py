"""``zarr-dask info`` counts the initialized chunks of a sharded array inside the array (issue 40 item 7: an
edge shard counted whole printed "Chunks initialized : 280/264")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_dask
from zarr_dask.cli import main


@pytest.mark.parametrize(("shape", "written", "line"), [
    ((10, 7), (slice(None), slice(None)), "Chunks initialized : 20/20 (6/6 shards)"),  # every shard an edge one
    ((10, 7), (slice(0, 4), slice(0, 4)), "Chunks initialized : 4/20 (1/6 shards)"),
    ((10, 7), (slice(8, 10), slice(4, 7)), "Chunks initialized : 2/20 (1/6 shards)"),  # the corner shard: 1x2 inside
    ((8, 8), (slice(None), slice(None)), "Chunks initialized : 16/16 (4/4 shards)"),
])  # fmt: skip
def test_sharded_counts_never_exceed_the_array(tmp_path: Path, capsys: pytest.CaptureFixture[str], shape, written, line) -> None:
    url = str(tmp_path / "s.zarr")
    arr = zarr_dask.create_array(url, shape=shape, chunks=(2, 2), shards=(4, 4), dtype="i2")
    arr[written] = 1
    assert main(["info", url]) == 0
    assert line in capsys.readouterr().out.splitlines()
    assert main(["info", url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["chunks_initialized"] <= info["nchunks"] and info["units_initialized"] <= info["units"]


def test_unsharded_and_rectilinear_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "c.zarr")
    zarr_dask.create_array(url, shape=(10, 7), chunks=(4, 4), dtype="i2")[:5] = 1
    assert main(["info", url]) == 0
    assert "Chunks initialized : 4/6" in capsys.readouterr().out.splitlines()
    import dask.array as da

    rect = str(tmp_path / "r.zarr")
    zarr_dask.to_zarr(da.from_array(np.ones((10, 4), "i2"), chunks=((3, 3, 4), 4)), rect)
    assert main(["info", rect]) == 0
    assert "Chunks initialized : 3/3" in capsys.readouterr().out.splitlines()
