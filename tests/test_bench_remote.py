"""The pieces of ``benchmarks/bench_remote.py`` that its numbers rest on, at a tiny size: the HTTP object
server (ranges, suffix ranges, HEAD, 404, the request gauge) and the floors (their shards are valid Zarr, their
reads return the data). The benchmark itself is run by ``make bench``."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

pytest.importorskip("aiohttp")
sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import bench_remote  # noqa: E402

import zarr_dask  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(directory, endpoint): one HTTP object server for the module."""
    root = tmp_path_factory.mktemp("served")
    with bench_remote.served_in_thread(str(root), 0.0) as endpoint:
        yield root, endpoint


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    monkeypatch.setattr(bench_remote, "CHUNK", 8)
    monkeypatch.setattr(bench_remote, "SHARD", 32)
    return np.random.default_rng(0).standard_normal((64, 32)).astype("f4")


def get(url: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers=headers, method=headers.pop("method", "GET"))
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, b"", dict(e.headers)


def test_http_server_ranges_and_gauge(served: tuple[Path, str]) -> None:
    root, endpoint = served
    (root / "d").mkdir()
    (root / "d" / "k").write_bytes(bytes(range(100)))
    bench_remote.take_stats(endpoint)
    assert get(f"{endpoint}/d/k")[:2] == (200, bytes(range(100)))
    status, body, headers = get(f"{endpoint}/d/k", Range="bytes=10-19")
    assert (status, body, headers["Content-Range"]) == (206, bytes(range(10, 20)), "bytes 10-19/100")
    assert get(f"{endpoint}/d/k", Range="bytes=-4")[:2] == (206, bytes(range(96, 100)))
    assert get(f"{endpoint}/d/k", Range="bytes=95-")[:2] == (206, bytes(range(95, 100)))
    status, body, headers = get(f"{endpoint}/d/k", method="HEAD")
    assert (status, body, headers["Content-Length"]) == (200, b"", "100")
    assert get(f"{endpoint}/d/missing")[0] == 404
    assert get(f"{endpoint}/../etc/passwd")[0] == 404
    assert bench_remote.take_stats(endpoint)["requests"] == 7
    after = bench_remote.take_stats(endpoint)
    assert after["requests"] == after["max_in_flight"] == 0 and after["cpu_ms"] >= 0


@pytest.mark.parametrize("sharded", [False, True])
def test_floors_write_valid_zarr_and_read_it_back(served: tuple[Path, str], small: np.ndarray, sharded: bool) -> None:
    served_dir, endpoint = served
    name = f"a{int(sharded)}.zarr"
    fs: Any = fsspec.filesystem("file", auto_mkdir=True)
    root = (served_dir / name).as_posix()
    fs.makedirs(root)
    bench_remote.floor_write(fs, root, small, sharded)
    assert json.loads(Path(root, "zarr.json").read_bytes())["shape"] == list(small.shape)
    np.testing.assert_array_equal(zarr_dask.open_array(root)[:], small)
    url = f"{endpoint}/{name}"
    np.testing.assert_array_equal(bench_remote.floor_read(url, small.shape, sharded), small)
    if sharded:
        got = bench_remote.floor_read(url, small.shape, sharded, whole_shards=True)
        np.testing.assert_array_equal(got, small)
    np.testing.assert_array_equal(zarr_dask.from_zarr(url).compute(), small)
