"""zarr_dask.spec.chunk_grid: regular and rectilinear grids (digest §2.10)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_dask.errors import IndexingError, MetadataError, UnknownExtensionError
from zarr_dask.spec.chunk_grid import (
    MAX_RECTILINEAR_EDGES,
    DimGrid,
    RectilinearChunkGrid,
    RegularChunkGrid,
    RegularDimGrid,
    VaryingDimGrid,
    parse_chunk_grid,
)

# ---------------------------------------------------------------------------------------------- regular


def test_regular_basics() -> None:
    g = RegularChunkGrid(chunk_shape=(2, 3))
    assert g.ndim == 2
    assert g.grid_shape((5, 7)) == (3, 3)
    assert g.nchunks((5, 7)) == 9
    assert g.chunk_origin((2, 1)) == (4, 3)
    assert g.chunk_shape_at((2, 2)) == (2, 3)  # edge chunks have the full stored shape
    assert g.to_json() == {"name": "regular", "configuration": {"chunk_shape": [2, 3]}}


def test_regular_zero_length_and_0d() -> None:
    assert RegularChunkGrid(chunk_shape=(1, 4)).grid_shape((0, 8)) == (0, 2)
    g0 = RegularChunkGrid(chunk_shape=())
    assert g0.grid_shape(()) == ()
    assert g0.nchunks(()) == 1
    assert g0.chunk_origin(()) == ()
    assert g0.chunk_shape_at(()) == ()
    assert g0.dim_grids(()) == ()
    assert g0.to_json() == {"name": "regular", "configuration": {"chunk_shape": []}}


def test_regular_coerces_numpy_and_lists() -> None:
    import numpy as np

    g = RegularChunkGrid(chunk_shape=[np.int64(2), 3])  # type: ignore[arg-type]
    assert g.chunk_shape == (2, 3) and type(g.chunk_shape[0]) is int
    assert g == RegularChunkGrid(chunk_shape=(2, 3))
    assert hash(g) == hash(RegularChunkGrid(chunk_shape=(2, 3)))
    assert pickle.loads(pickle.dumps(g)) == g


@pytest.mark.parametrize("bad", [(0,), (-1,), (1.5,), (True,), ("2",), 3, "ab"])
def test_regular_invalid(bad: Any) -> None:
    with pytest.raises(MetadataError):
        RegularChunkGrid(chunk_shape=bad)


def test_regular_ndim_mismatch() -> None:
    g = RegularChunkGrid(chunk_shape=(2,))
    with pytest.raises(MetadataError, match="has 1 dimensions but the array shape"):
        g.grid_shape((3, 4))
    with pytest.raises(MetadataError):
        g.dim_grids((3, 4))
    with pytest.raises(IndexingError, match="have 2 entries"):
        g.chunk_origin((0, 0))
    with pytest.raises(IndexingError, match="must not be negative"):
        g.chunk_origin((-1,))
    with pytest.raises(IndexingError, match="must be an integer"):
        g.chunk_shape_at((1.0,))  # type: ignore[arg-type]


def test_regular_dim_grid() -> None:
    (d,) = RegularChunkGrid(chunk_shape=(4,)).dim_grids((10,))
    assert isinstance(d, RegularDimGrid) and d.is_regular
    assert d.nchunks() == 3
    assert d.nchunks(12) == 3
    assert d.nchunks(13) == 4
    assert [d.start(i) for i in range(3)] == [0, 4, 8]
    assert [d.size(i) for i in range(3)] == [4, 4, 4]
    assert [d.data_size(i) for i in range(4)] == [4, 4, 2, 0]
    assert d.index_of(9) == 2
    assert d.chunk_range(3, 9) == range(0, 3)
    assert d.chunk_range(4, 8) == range(1, 2)
    assert d.chunk_range(5, 5) == range(0)
    with pytest.raises(IndexingError):
        d.start(-1)
    with pytest.raises(IndexingError):
        d.index_of(-1)


# ---------------------------------------------------------------------------------------------- rectilinear
DIGEST_EXAMPLE = {
    "name": "rectilinear",
    "configuration": {"kind": "inline", "chunk_shapes": [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [4, 4, 4]]},
}


def test_rectilinear_parse_digest_example() -> None:
    g = parse_chunk_grid(DIGEST_EXAMPLE)
    assert isinstance(g, RectilinearChunkGrid)
    assert g.chunk_shapes == (4, (1, 2, 3), (4, 4), (1, 1, 1, 3), (4, 4, 4))
    shape = (10, 6, 8, 6, 12)
    assert g.grid_shape(shape) == (3, 3, 2, 4, 3)
    assert g.chunk_origin((1, 2, 1, 3, 2)) == (4, 3, 4, 3, 8)
    assert g.chunk_shape_at((2, 2, 1, 3, 2)) == (4, 3, 4, 3, 4)
    # written back in zarr-python's run-length form
    assert g.to_json()["configuration"]["chunk_shapes"] == [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [[4, 3]]]


@pytest.mark.parametrize(
    ("edges", "written"),
    [
        ((3, 3, 4), [[3, 2], 4]),
        ((2, 2, 2, 2, 2), [[2, 5]]),
        ((1, 2, 3), [1, 2, 3]),
        ((5,), [5]),
        ((1, 1, 2, 2, 1), [[1, 2], [2, 2], 1]),
        ((), []),
    ],
)
def test_rectilinear_rle_write(edges: tuple[int, ...], written: list[Any]) -> None:
    g = RectilinearChunkGrid(chunk_shapes=(edges,))
    assert g.to_json() == {
        "name": "rectilinear",
        "configuration": {"kind": "inline", "chunk_shapes": [written]},
    }
    assert parse_chunk_grid(g.to_json()) == g


def test_rectilinear_digest_write_example() -> None:
    """Digest §2.10: edges [3,3,4] and a bare 6 -> [[[3,2],4], 6]."""
    g = RectilinearChunkGrid(chunk_shapes=((3, 3, 4), 6))
    assert g.to_json()["configuration"]["chunk_shapes"] == [[[3, 2], 4], 6]
    assert g.grid_shape((10, 12)) == (3, 2)
    assert g.grid_shape((10, 13)) == (3, 3)


def test_rectilinear_sum_must_cover_extent() -> None:
    g = RectilinearChunkGrid(chunk_shapes=((3, 3), 2))
    g.validate_shape((6, 100))
    g.validate_shape((4, 1))  # over-running by whole chunks is allowed
    with pytest.raises(MetadataError, match="sums to 6, less than the array length 7"):
        g.validate_shape((7, 1))
    with pytest.raises(MetadataError):
        g.dim_grids((7, 1))
    with pytest.raises(MetadataError, match="has 2 dimensions"):
        g.validate_shape((6,))


def test_rectilinear_overrun_grid_shape() -> None:
    g = RectilinearChunkGrid(chunk_shapes=((3, 3, 4),))
    assert g.grid_shape((4,)) == (2,)  # only chunks that hold array elements
    assert g.grid_shape((0,)) == (0,)
    (d,) = g.dim_grids((4,))
    assert d.data_size(1) == 1 and d.size(1) == 3
    assert d.nchunks(10) == 3


def test_rectilinear_empty_edges_for_zero_length_dim() -> None:
    g = parse_chunk_grid({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[]]}})
    assert g.grid_shape((0,)) == (0,)
    with pytest.raises(MetadataError):
        g.grid_shape((1,))


def test_varying_dim_grid() -> None:
    g = RectilinearChunkGrid(chunk_shapes=((1, 2, 3),))
    (d,) = g.dim_grids((6,))
    assert isinstance(d, VaryingDimGrid) and not d.is_regular
    assert [d.start(i) for i in range(3)] == [0, 1, 3]
    assert [d.size(i) for i in range(3)] == [1, 2, 3]
    assert [d.index_of(x) for x in range(6)] == [0, 1, 1, 2, 2, 2]
    assert d.chunk_range(1, 4) == range(1, 3)
    assert d.chunk_range(2, 2) == range(0)
    for bad in (-1, 3):
        with pytest.raises(IndexingError):
            d.start(bad)
    with pytest.raises(IndexingError):
        d.index_of(6)
    with pytest.raises(IndexingError):
        g.chunk_origin((3,))


def test_rectilinear_equality_hash_pickle() -> None:
    a = RectilinearChunkGrid(chunk_shapes=((1, 2), 3))
    b = parse_chunk_grid(
        {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[1, 2], 3]}}
    )
    assert a == b and hash(a) == hash(b)
    c = pickle.loads(pickle.dumps(a))
    assert c == a and c.grid_shape((3, 7)) == (2, 3)
    assert not hasattr(a, "chunk_shape")  # core relies on this to tell grids apart


@pytest.mark.parametrize(
    ("chunk_shapes", "error", "match"),
    [
        ([0], MetadataError, r"chunk_shapes\[0\] must be an integer in \[1"),
        ([[1, 0]], MetadataError, r"chunk_shapes\[0\]\[1\]"),
        ([[[1, 2, 3]]], MetadataError, r"\[value, count\] pair"),
        ([[[1, 0]]], MetadataError, r"\[0\]\[1\] must be an integer in \[1"),
        ([[[0, 3]]], MetadataError, r"\[0\]\[0\] must be an integer in \[1"),
        ([["a"]], MetadataError, "must be an integer"),
        ([[[1, MAX_RECTILINEAR_EDGES + 1]]], MetadataError, "expands to more than"),
        ([[[1, 2**62], [1, 2**62]]], MetadataError, "expands to more than"),
        ("abc", MetadataError, "needs 'chunk_shapes'"),
    ],
)
def test_rectilinear_parse_errors(chunk_shapes: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_chunk_grid(
            {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes}}
        )


def test_rectilinear_edges_sum_overflow() -> None:
    with pytest.raises(MetadataError, match="sum to more than"):
        RectilinearChunkGrid(chunk_shapes=((2**62, 2**62),))


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"chunk_shapes": [1]}, UnknownExtensionError, "kind None is not supported"),
        ({"kind": "file", "chunk_shapes": [1]}, UnknownExtensionError, "kind 'file'"),
        ({"kind": "inline"}, MetadataError, "needs 'chunk_shapes'"),
        ({"kind": "inline", "chunk_shapes": [1], "x": 1}, MetadataError, r"unexpected key\(s\) \['x'\]"),
    ],
)
def test_rectilinear_config_errors(config: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_chunk_grid({"name": "rectilinear", "configuration": config})


# ---------------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        ("regular", MetadataError, r"needs a configuration object, e.g. \{\"chunk_shape\""),
        ("rectilinear", MetadataError, "needs a configuration object"),
        ({"name": "regular"}, MetadataError, "needs a configuration"),
        ({"name": "regular", "configuration": {}}, MetadataError, "missing 'chunk_shape'"),
        ({"name": "regular", "configuration": {"chunk_shape": [0]}}, MetadataError, r"chunk_shape\[0\]"),
        ({"name": "regular", "configuration": {"chunk_shape": [-2]}}, MetadataError, r"chunk_shape\[0\]"),
        ({"name": "regular", "configuration": {"chunk_shape": 3}}, MetadataError, "must be a list"),
        ({"name": "regular", "configuration": {"chunk_shape": [1], "x": 1}}, MetadataError, "unexpected key"),
        ({"name": "regular", "configuration": {"chunk_shape": [1]}, "must_understand": False}, MetadataError,
         "does not allow"),
        ({"name": "hexagonal", "configuration": {}}, UnknownExtensionError, "'hexagonal' is an extension"),
        ("hexagonal", UnknownExtensionError, "does not support"),
        (None, MetadataError, "must be a name string"),
        ([1], MetadataError, "must be a name string"),
    ],
)  # fmt: skip
def test_parse_chunk_grid_errors(obj: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_chunk_grid(obj)


def test_parse_regular_must_understand_true_ok() -> None:
    g = parse_chunk_grid({"name": "regular", "configuration": {"chunk_shape": [2]}, "must_understand": True})
    assert g == RegularChunkGrid(chunk_shape=(2,))


# ---------------------------------------------------------------------------------------------- hypothesis


def _check_dim_against_edges(d: DimGrid, edges: list[int], extent: int) -> None:
    starts = [sum(edges[:i]) for i in range(len(edges))]
    n = next((i + 1 for i, s in enumerate(starts) if s + edges[i] >= extent), 0) if extent else 0
    assert d.nchunks() == n
    for i in range(len(edges)):
        assert d.start(i) == starts[i]
        assert d.size(i) == edges[i]
        assert d.data_size(i) == max(0, min(edges[i], extent - starts[i]))
    for x in range(sum(edges)):
        i = d.index_of(x)
        assert starts[i] <= x < starts[i] + edges[i]
    total = sum(edges)
    for a in range(0, total + 1, max(1, total // 7)):
        for b in range(a, total + 1, max(1, total // 5)):
            expected = [i for i in range(len(edges)) if a < b and starts[i] < b and starts[i] + edges[i] > a]
            assert list(d.chunk_range(a, b)) == expected


@given(st.lists(st.integers(1, 6), min_size=1, max_size=12), st.data())
def test_varying_dim_grid_matches_brute_force(edges: list[int], data: st.DataObject) -> None:
    extent = data.draw(st.integers(0, sum(edges)))
    (d,) = RectilinearChunkGrid(chunk_shapes=(tuple(edges),)).dim_grids((extent,))
    _check_dim_against_edges(d, edges, extent)


@given(st.integers(1, 7), st.integers(0, 40))
def test_regular_dim_grid_matches_brute_force(size: int, extent: int) -> None:
    (d,) = RegularChunkGrid(chunk_shape=(size,)).dim_grids((extent,))
    n = -(-extent // size)
    _check_dim_against_edges(d, [size] * max(n, 1), extent)


rect_dim = st.integers(1, 5) | st.lists(st.integers(1, 4), min_size=0, max_size=8).map(tuple)


@given(st.lists(rect_dim, max_size=4))
def test_rectilinear_json_round_trip(dims: list[int | tuple[int, ...]]) -> None:
    g = RectilinearChunkGrid(chunk_shapes=tuple(dims))
    again = parse_chunk_grid(g.to_json())
    assert again == g
    assert again.to_json() == g.to_json()


@given(st.lists(st.integers(1, 10**6), max_size=5))
def test_regular_json_round_trip(chunks: list[int]) -> None:
    g = RegularChunkGrid(chunk_shape=tuple(chunks))
    assert parse_chunk_grid(g.to_json()) == g
