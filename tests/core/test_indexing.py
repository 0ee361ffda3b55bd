"""Basic indexing → chunk projections, checked against NumPy with hypothesis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_dask.core.indexing import (
    chunk_projections,
    count_chunks,
    expand_value,
    finalize_output,
    normalize_selection,
    selection_shape,
)
from zarr_dask.errors import IndexingError


@dataclass(frozen=True)
class Regular:
    c: int

    def start(self, i: int) -> int:
        return i * self.c

    def size(self, i: int) -> int:
        return self.c

    def chunk_range(self, start: int, stop: int) -> range:
        return range(start // self.c, -(-stop // self.c)) if stop > start else range(0)


def read_via_projections(data: np.ndarray, chunks: tuple[int, ...], key) -> np.ndarray:
    grids = [Regular(c) for c in chunks]
    dims = normalize_selection(key, data.shape)
    out = np.full(tuple(d.count for d in dims), -1, dtype=data.dtype)
    seen = 0
    for p in chunk_projections(dims, grids, data.shape):
        origin = tuple(g.start(c) for g, c in zip(grids, p.coords))
        # the stored chunk: full chunk shape, padding beyond the array edge
        chunk = np.full(chunks, -7, dtype=data.dtype)
        region = tuple(slice(o, min(o + c, n)) for o, c, n in zip(origin, chunks, data.shape))
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
        out[p.out_sel] = chunk[p.chunk_sel]
        seen += 1
    assert seen == count_chunks(dims, grids, data.shape)
    return finalize_output(out, dims)


def index_strategy(shape):
    def one(n):
        ints = st.integers(-n, n - 1) if n else st.nothing()
        slices = st.builds(
            slice,
            st.none() | st.integers(-n - 2, n + 2),
            st.none() | st.integers(-n - 2, n + 2),
            st.none() | st.integers(1, 4) | st.integers(-4, -1),
        )
        return ints | slices

    return st.tuples(*[one(n) for n in shape])


@st.composite
def case(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, 5)) for _ in shape)
    key = draw(index_strategy(shape))
    if draw(st.booleans()) and ndim:
        k = draw(st.integers(0, ndim))
        key = key[:k] + (Ellipsis,) + key[k + 1 :]
    return shape, chunks, key


@given(case())
@settings(max_examples=400, deadline=None)
def test_projections_match_numpy(c):
    shape, chunks, key = c
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    expected = data[key]
    got = read_via_projections(data, chunks, key)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == expected.shape


@given(case())
@settings(max_examples=200, deadline=None)
def test_expand_value_inverts_finalize(c):
    shape, chunks, key = c
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    dims = normalize_selection(key, shape)
    sel = data[key]
    full = expand_value(sel, dims)
    assert full.shape == tuple(d.count for d in dims)
    np.testing.assert_array_equal(finalize_output(full, dims), sel)
    assert selection_shape(dims) == np.shape(sel)


def test_complete_flags():
    dims = normalize_selection((slice(0, 4), slice(1, 3)), (5, 4))
    ps = list(chunk_projections(dims, [Regular(2), Regular(2)], (5, 4)))
    assert [p.coords for p in ps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [p.complete for p in ps] == [False, False, False, False]
    dims = normalize_selection((slice(None), slice(None)), (5, 4))
    ps = list(chunk_projections(dims, [Regular(2), Regular(2)], (5, 4)))
    assert all(p.complete for p in ps)  # the last row-chunk is complete up to the array edge


@pytest.mark.parametrize(
    "key, match",
    [
        ((0, 0, 0), "too many indices"),
        ((Ellipsis, Ellipsis), "single ellipsis"),
        ((7,), "out of bounds"),
        ((-8,), "out of bounds"),
        ((1.5,), "unsupported index"),
        (([0, 1],), "unsupported index"),
    ],
)
def test_bad_indices(key, match):
    with pytest.raises(IndexingError, match=match):
        normalize_selection(key, (7, 3))
