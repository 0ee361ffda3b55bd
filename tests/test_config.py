"""zarr_dask.config: one place for every knob, one size parser, and docs/tuning.md's table kept true."""

from __future__ import annotations

from pathlib import Path

import pytest

from zarr_dask import config

DOCS = Path(__file__).resolve().parents[1] / "docs" / "tuning.md"


def test_the_table_in_the_docs_is_the_table_of_the_code() -> None:
    text = DOCS.read_text()
    table = text.split("<!-- knobs:")[1].split("-->", 1)[1].split("<!-- /knobs -->")[0].strip()
    assert table == config.markdown_table()


def test_every_knob_is_read_from_the_environment_and_from_dask_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import dask

    monkeypatch.setenv("ZARR_DASK_IO_THREADS", "3")
    assert config.get("io_threads") == 3
    with dask.config.set({"zarr_dask.io-threads": 5}):  # dask.config wins over the environment
        assert config.get("io_threads") == 5
    monkeypatch.setenv("ZARR_DASK_READ_ARENA", "16MiB")
    assert config.get("read_arena") == 16 << 20
    monkeypatch.setenv("ZARR_DASK_NATIVE", "off")
    assert config.get("native") is False
    monkeypatch.setenv("ZARR_DASK_APPEND_WAIT", "2.5")
    assert config.get("append_wait") == 2.5


def test_no_knob_is_read_outside_the_config_module() -> None:
    pkg = Path(config.__file__).parent
    offenders = [
        str(p.relative_to(pkg)) for p in pkg.rglob("*.py")
        if p.name != "config.py" and "os.environ" in p.read_text() and "ZARR_DASK_" in p.read_text()
    ]  # fmt: skip
    assert offenders == []


@pytest.mark.parametrize("raw", ["lots", "-1", "0x10"])
def test_a_bad_value_warns_once_and_the_default_is_used(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ZARR_DASK_WRITE_ATTEMPTS", raw)
    with pytest.warns(RuntimeWarning, match=f"ignoring ZARR_DASK_WRITE_ATTEMPTS={raw!r}: expected integer >= 1"):
        assert config.get("write_attempts") == 64
    assert config.get("write_attempts") == 64  # once: no second warning (warnings are errors here)


@pytest.mark.parametrize(
    ("raw", "size"),
    [("0", 0), ("4096", 4096), ("128MiB", 128 << 20), ("1.5 GB", 1_500_000_000), ("64kB", 64_000), ("2gib", 2 << 30), (7, 7)],
)
def test_one_size_parser(raw: object, size: int) -> None:
    assert config.parse_size(raw) == size


@pytest.mark.parametrize("raw", ["", "MiB", "12 parsecs", "-5", True])
def test_sizes_that_are_not(raw: object) -> None:
    with pytest.raises(ValueError):
        config.parse_size(raw)


def test_release_memory_empties_the_pools() -> None:
    import dask.array as da
    import numpy as np

    import zarr_dask
    from zarr_dask.core import batches
    from zarr_dask.graph import buffers

    a = zarr_dask.create_array("memory://release-memory", shape=(64, 64), dtype="f8", chunks=(16, 16), overwrite=True)
    a[:] = np.ones((64, 64))
    assert zarr_dask.from_zarr("memory://release-memory").compute().sum() == 64 * 64
    assert da.sum(zarr_dask.from_zarr("memory://release-memory", chunks=16)).compute() == 64 * 64
    released = zarr_dask.release_memory()
    assert released["thread_pools"] >= 1
    assert not batches._POOLS and buffers.POOL.idle_bytes == 0
    assert a[:].sum() == 64 * 64  # the pools come back on the next use
