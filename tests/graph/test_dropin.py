"""zarr_dask.from_zarr / to_zarr as drop-ins for dask's: every location dask accepts, dask's signatures and
``mode=``, what ``compute=False`` returns, graph manipulation, and mixing with dask's own arrays (these tests
run again with ``array.query-planning`` on: ``make test-expr``)."""

from __future__ import annotations

import inspect
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from dask.graph_manipulation import bind, checkpoint, clone

import zarr_dask
from tests.dask_modes import DA, dask_array_gap
from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.graph import gateway

LEGACY = not gateway.query_planning()


def test_signatures_follow_dask() -> None:
    ours = list(inspect.signature(zarr_dask.from_zarr).parameters)[:6]
    assert ours == ["url_or_array", "component", "storage_options", "chunks", "name", "inline_array"]
    params = inspect.signature(zarr_dask.to_zarr).parameters
    assert list(params)[:8] == ["arr", "url", "component", "storage_options", "region", "compute", "return_stored", "mode"]
    assert params["overwrite"].kind is inspect.Parameter.KEYWORD_ONLY


def test_positional_chunks_after_storage_options(tmp_path: Path) -> None:
    zarr_dask.to_zarr(da.from_array(np.arange(16).reshape(4, 4), chunks=2), str(tmp_path / "x.zarr"), chunks=(2, 2))
    x = zarr_dask.from_zarr(str(tmp_path / "x.zarr"), None, None, (2, 4))
    assert x.chunks == ((2, 2), (4,))


def test_plain_dict_round_trip() -> None:
    store: dict[str, bytes] = {}
    zarr_dask.to_zarr(da.arange(10, chunks=3), store, chunks=(4,))
    assert "zarr.json" in store and "c/0" in store
    np.testing.assert_array_equal(zarr_dask.from_zarr(store).compute(), np.arange(10))
    assert zarr_dask.append(da.arange(2, chunks=2), store) == (12,)


def test_fsspec_mapper() -> None:
    fsspec = pytest.importorskip("fsspec")
    mapper = fsspec.get_mapper("memory://dropin-mapper.zarr")
    zarr_dask.to_zarr(da.arange(6, chunks=4), mapper, mode="w")
    np.testing.assert_array_equal(zarr_dask.from_zarr(mapper).compute(), np.arange(6))


def test_zarr_python_array_store_and_group(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(store=str(tmp_path / "zp.zarr"), shape=(4, 4), chunks=(2, 2), dtype="i4")
    z[:] = np.arange(16).reshape(4, 4)
    np.testing.assert_array_equal(zarr_dask.from_zarr(z).compute(), z[:])
    zarr_dask.to_zarr(da.ones((4, 4), chunks=3, dtype="i4"), z)  # into the array, through our planner
    assert z[:].sum() == 16
    local = zarr.storage.LocalStore(str(tmp_path / "ls.zarr"))
    zarr_dask.to_zarr(da.arange(6, chunks=4), local, component="g/a")
    np.testing.assert_array_equal(zarr.open_array(local, path="g/a")[:], np.arange(6))
    np.testing.assert_array_equal(zarr_dask.from_zarr(zarr.open_group(local), "g/a").compute(), np.arange(6))
    memory = zarr.storage.MemoryStore()
    zarr_dask.to_zarr(da.arange(6, chunks=4), memory)
    np.testing.assert_array_equal(zarr.open_array(memory)[:], np.arange(6))
    np.testing.assert_array_equal(zarr_dask.from_zarr(memory).compute(), np.arange(6))


def test_a_python_mapping_is_refused_on_a_cluster() -> None:
    import pickle

    with pytest.raises(UnsupportedFeatureError, match="cannot be sent to other processes"):
        pickle.dumps(zarr_dask.store.open_store({}))


def test_modes(tmp_path: Path) -> None:
    url = str(tmp_path / "m.zarr")
    zarr_dask.to_zarr(da.zeros(4, chunks=2), url)
    with pytest.raises(FileExistsError):
        zarr_dask.to_zarr(da.zeros(4, chunks=2), url, mode="w-")
    zarr_dask.to_zarr(da.ones(6, chunks=2), url, mode="w")
    zarr_dask.to_zarr(da.full(6, 2.0, chunks=4), url, mode="r+")
    assert zarr_dask.open_array(url)[:].tolist() == [2.0] * 6
    with pytest.raises(ValueError, match="mode='r' cannot write"):
        zarr_dask.to_zarr(da.ones(6, chunks=2), url, mode="r")
    with pytest.raises(TypeError, match="mode="):
        zarr_dask.to_zarr(da.ones(6, chunks=2), url, read_only=False)


def test_compute_false_returns_a_dask_array() -> None:
    store: dict[str, bytes] = {}
    out = zarr_dask.to_zarr(da.zeros((3, 3), chunks=1), store, compute=False)
    assert isinstance(out, DA.Array) and out.chunks == ((1, 1, 1), (1, 1, 1))
    dask.compute(out)
    np.testing.assert_array_equal(zarr_dask.from_zarr(store).compute(), np.zeros((3, 3)))


def test_mixing_with_dask_arrays_and_explain_and_convert(tmp_path: Path) -> None:
    url = str(tmp_path / "mix.zarr")
    zarr_dask.to_zarr(da.from_array(np.arange(48, dtype="f4").reshape(6, 8), chunks=(6, 8)), url, chunks=(2, 4))
    x = zarr_dask.from_zarr(url)
    other = DA.from_array(np.ones((6, 8)), chunks=(6, 8) if not LEGACY else 3)
    assert float((x + other).sum().compute()) == 1176.0
    assert float(x[1:3, 2:6].sum().compute()) == 124.0
    zarr_dask.to_zarr(x * 2, str(tmp_path / "double.zarr"))
    assert float(zarr_dask.from_zarr(str(tmp_path / "double.zarr")).sum().compute()) == 2256.0
    assert zarr_dask.explain_write(x, "memory://dropin-explain", chunks=(3, 8)).keys == 2
    zarr_dask.convert(url, str(tmp_path / "conv.zarr"), chunks=(3, 8))
    np.testing.assert_array_equal(zarr_dask.from_zarr(str(tmp_path / "conv.zarr")).compute(), x.compute())


def test_a_selection_reads_only_its_blocks() -> None:
    a = zarr_dask.create_array("memory://dropin-sel", shape=(50, 60), dtype="i4", chunks=(7, 9))
    v = np.arange(3000, dtype="i4").reshape(50, 60)
    a[:] = v
    x = zarr_dask.from_zarr("memory://dropin-sel", chunks=(7, 9))
    for sel in [(slice(3, 40), slice(10, 11)), (5, slice(None)), (slice(20, 50), 59), (slice(8, 30, 2), 3)]:
        np.testing.assert_array_equal(x[sel].compute(), v[sel])
        np.testing.assert_array_equal((x[sel] + 1).compute(), v[sel] + 1)
    huge = zarr_dask.create_array("memory://dropin-huge", shape=(10**6, 10**6), dtype="f4", chunks=(1000, 1000))
    del huge
    y = zarr_dask.from_zarr("memory://dropin-huge", chunks=(1000, 1000))
    assert y[0:10, 0:10].compute().shape == (10, 10)  # 10^6 blocks: only one is built and read


@pytest.mark.skipif(not LEGACY, reason="dask's graph_manipulation does not take expression arrays yet")
@pytest.mark.parametrize("shape", [(3,), (40,)])
@dask_array_gap("graph_manipulation")
def test_graph_manipulation(shape: tuple[int, ...]) -> None:
    a = zarr_dask.create_array(f"memory://dropin-clone-{shape[0]}", shape=shape, dtype="i4", chunks=(4,))
    a[:] = np.arange(shape[0])
    x = zarr_dask.from_zarr(f"memory://dropin-clone-{shape[0]}", chunks=(4,) if shape[0] > 4 else None)
    want = np.arange(shape[0])
    np.testing.assert_array_equal(clone(x).compute(), want)
    np.testing.assert_array_equal(clone(x).persist().compute(), want)
    np.testing.assert_array_equal(bind(x, da.ones(3)).compute(), want)
    assert checkpoint(x).compute() is None
    stored = zarr_dask.to_zarr(x, {}, return_stored=True, compute=False)
    np.testing.assert_array_equal(clone(stored).compute(), want)
