"""The read planner's arithmetic: default blocks are whole storage units merged up to a byte target."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_dask.graph.chunking import (
    Units,
    chunks_token,
    default_chunks,
    dim_units,
    merge_factors,
    split_amplification,
)
from zarr_dask.spec import RectilinearChunkGrid, RegularChunkGrid


def test_dim_units_regular_and_rectilinear() -> None:
    (g,) = RegularChunkGrid(chunk_shape=(4,)).dim_grids((10,))
    assert dim_units(g, 10).as_chunks() == (4, 4, 2)
    assert dim_units(g, 10).lengths is None  # nothing per unit for regular grids
    (g,) = RegularChunkGrid(chunk_shape=(4,)).dim_grids((0,))
    assert dim_units(g, 0).as_chunks() == (0,)
    (g,) = RectilinearChunkGrid(chunk_shapes=((3, 1, 6),)).dim_grids((8,))
    u = dim_units(g, 8)
    assert u.as_chunks() == (3, 1, 4) and u.largest == 4 and u.count == 3  # the last edge overhangs the array


def test_merge_factors_examples() -> None:
    mib = 2**20
    assert merge_factors([1024, 1024], [16, 16], 4, 128 * mib) == [2, 16]  # contiguous rows of the result
    assert merge_factors([10], [10**6], 4, 128 * mib) == [10**6]  # a whole small dimension
    assert merge_factors([4096, 4096], [4, 4], 4, 32 * mib) == [1, 1]  # a unit above the target stays whole
    assert merge_factors([4096, 4096], [4, 4], 4, 128 * mib) == [1, 2]
    assert merge_factors([64, 64], [128, 128], 4, 128 * mib) == [64, 128]
    assert merge_factors([1, 721, 1440], [365, 1, 1], 4, 128 * mib) == [32, 1, 1]  # time slabs


@settings(deadline=None, max_examples=100)
@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(1, 40)), min_size=1, max_size=4),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 2**16),
)
def test_default_chunks_are_whole_units_within_target(dims: list[tuple[int, int]], itemsize: int, target: int) -> None:
    units = tuple(Units.of((u,) * k) for u, k in dims)
    chunks = default_chunks(units, itemsize, target)
    assert tuple(sum(c) for c in chunks) == tuple(u * k for u, k in dims)
    for c, (u, _) in zip(chunks, dims):
        assert all(b % u == 0 for b in c)  # never a unit split
    block = math.prod(max(c) for c in chunks) * itemsize
    unit = math.prod(u for u, _ in dims) * itemsize
    assert block <= max(target, unit)
    assert split_amplification(chunks, units) == 1.0


def test_default_chunks_rectilinear_units_stay_whole() -> None:
    lengths = (3, 1, 6, 2, 2, 9)
    chunks = default_chunks((Units.of(lengths),), 1, 10)
    bounds = set(np.cumsum(lengths).tolist())
    assert set(np.cumsum(chunks[0]).tolist()) <= bounds
    assert sum(chunks[0]) == 23


def test_default_chunks_balanced() -> None:
    # 16 units in blocks of at most 5 -> 4 blocks of 4, not 5, 5, 5, 1
    assert default_chunks((Units.of((1,) * 16),), 1, 5) == ((4, 4, 4, 4),)


def test_split_amplification() -> None:
    u = Units.of((4, 4, 2))
    assert split_amplification(((4, 4, 2),), (u,)) == 1.0
    assert split_amplification(((8, 2),), (u,)) == 1.0
    assert split_amplification(((2,) * 5,), (u,)) == 5 / 3  # 5 reads of 3 units
    assert split_amplification(((5, 5), (3, 3)), (Units.of((10,)), Units.of((2, 2, 2)))) == 2 * (4 / 3)
    v = Units.of((3, 1, 4))  # rectilinear
    assert split_amplification(((4, 4),), (v,)) == 1.0 and split_amplification(((2, 6),), (v,)) == 4 / 3


def test_chunks_token_is_compact_and_distinguishes() -> None:
    big = ((1000,) * 10**6,)
    assert chunks_token(big) == (("regular", 1000, 10**6, 1000),)
    assert chunks_token(((2, 3, 2),)) != chunks_token(((3, 2, 2),))


def test_regular_means_equal_but_a_shorter_last() -> None:
    assert Units.of((3, 3, 4)).lengths is not None and Units.of((3, 3, 1)).lengths is None
    assert default_chunks((Units.of((3, 3, 4)),), 1, 100) == ((10,),)
    assert default_chunks((Units.of((3, 3, 4)),), 1, 8) == ((6, 4),)
    assert chunks_token(((3, 3, 4),)) != chunks_token(((3, 3, 3, 1),))


# ------------------------------------------------------------------------------ graphs of impossible size
@pytest.mark.parametrize("shape", [(2**62,), (2**53 + 1,), (2**61, 3)])
@pytest.mark.parametrize("shards", [None, True])
@pytest.mark.parametrize("chunks", [None, 1, "1KiB", {0: 10}, (7, -1)])
def test_from_zarr_refuses_graphs_that_cannot_fit_quickly(shape, shards, chunks):
    import time

    import zarr_dask
    from zarr_dask import errors

    inner = (1,) * len(shape)
    a = zarr_dask.create_array(
        zarr_dask.MemoryStore(), shape=shape, dtype="u1", chunks=inner,
        shards=tuple(2**20 if d == 0 else 1 for d in range(len(shape))) if shards else None,
    )  # fmt: skip
    if isinstance(chunks, tuple) and len(chunks) != len(shape):
        chunks = chunks[: len(shape)]
    start = time.perf_counter()
    with pytest.raises(errors.UnsupportedFeatureError, match="dask blocks along dimension 0") as info:
        zarr_dask.from_zarr(a, chunks=chunks)
    assert time.perf_counter() - start < 1.0
    assert "memory-store://" in str(info.value) and "more than the 4194304" in str(info.value)


def test_from_zarr_of_a_huge_array_with_big_chunks_works():
    import zarr_dask

    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(2**40,), dtype="u1", chunks=(2**22,))
    x = zarr_dask.from_zarr(a, chunks=2**30)
    assert x.numblocks == (1024,) and int(x[:10].sum().compute()) == 0
