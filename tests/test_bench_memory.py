"""``benchmarks/bench_memory.py`` at a tiny size: a child process reads the array and reports its memory before
and at its peak, and the data it read (the benchmark itself is run by ``make bench``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import bench_memory  # noqa: E402

import zarr_dask  # noqa: E402


@pytest.mark.parametrize("name", ["zarr_dask", "zarr_dask (dask)", "floor"])
def test_child_reports_memory_and_the_data(tmp_path: Path, name: str) -> None:
    n = 2 * bench_memory.CHUNK
    data = np.arange(n * n, dtype="f4").reshape(n, n)
    url = str(tmp_path / "a.zarr")
    zarr_dask.create_array(url, shape=data.shape, dtype="f4", chunks=(bench_memory.CHUNK,) * 2,
                           compressors=bench_memory.ZSTD0)[:] = data  # fmt: skip
    got = bench_memory.run(name, url, False)
    assert got["nbytes"] == data.nbytes
    assert got["peak"] >= got["before"] > 0 and got["seconds"] > 0
    assert got["peak"] - got["before"] >= data.nbytes * 0.9  # the result itself is counted
    want = float(data[:: max(1, n // 64), ::97].sum(dtype="f8"))
    assert got["sum"] == pytest.approx(want)
