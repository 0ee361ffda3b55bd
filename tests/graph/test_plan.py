"""The write planner: every storage key has exactly one writer task, fed by exactly the blocks it needs."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.graph._helpers import random_partition
from zarr_dask.graph.plan import plan_dim
from zarr_dask.spec import RectilinearChunkGrid, RegularChunkGrid


def test_aligned_blocks_give_one_task_per_block() -> None:
    (g,) = RegularChunkGrid(chunk_shape=(10,)).dim_grids((95,))
    p = plan_dim(g, 95, 0, [30, 30, 30, 5])
    assert [(s.keys, s.blocks) for s in p.segments] == [
        (range(0, 3), range(0, 1)),
        (range(3, 6), range(1, 2)),
        (range(6, 9), range(2, 3)),
        (range(9, 10), range(3, 4)),
    ]
    assert p.aligned and p.nkeys == 10 and p.complete_keys == 10 and p.partial_keys == ()


def test_keys_straddling_blocks_gather_them() -> None:
    (g,) = RegularChunkGrid(chunk_shape=(30,)).dim_grids((200,))
    p = plan_dim(g, 200, 0, [100, 100])
    assert [(s.keys, s.blocks, s.start, s.stop) for s in p.segments] == [
        (range(0, 3), range(0, 1), 0, 90),
        (range(3, 4), range(0, 2), 90, 120),
        (range(4, 7), range(1, 2), 120, 200),
    ]
    assert not p.aligned


def test_region_edges_are_partial_keys() -> None:
    (g,) = RegularChunkGrid(chunk_shape=(10,)).dim_grids((100,))
    p = plan_dim(g, 100, 15, [20, 20])  # region [15, 55)
    assert p.nkeys == 5 and p.partial_keys == (1, 5)
    assert p.segments[0].start == 15 and p.segments[-1].stop == 55


def test_empty_region() -> None:
    (g,) = RegularChunkGrid(chunk_shape=(10,)).dim_grids((100,))
    p = plan_dim(g, 100, 7, [0])
    assert p.segments == () and p.nkeys == 0


@st.composite
def dim_case(draw: st.DrawFn) -> tuple[object, int, int, tuple[int, ...]]:
    extent = draw(st.integers(1, 60))
    if draw(st.booleans()):
        grid = RegularChunkGrid(chunk_shape=(draw(st.integers(1, 20)),))
    else:
        edges = []
        while sum(edges) < extent:
            edges.append(draw(st.integers(1, 12)))
        grid = RectilinearChunkGrid(chunk_shapes=(tuple(edges),))
    start = draw(st.integers(0, extent - 1))
    stop = draw(st.integers(start + 1, extent))
    return grid, extent, start, random_partition(draw, st, stop - start, 8)


@settings(deadline=None, max_examples=150)
@given(dim_case())
def test_every_key_has_one_owner_and_gets_the_blocks_it_needs(case: tuple[object, int, int, tuple[int, ...]]) -> None:
    grid, extent, offset, chunks = case
    (g,) = grid.dim_grids((extent,))  # type: ignore[attr-defined]
    p = plan_dim(g, extent, offset, chunks)
    stop = offset + sum(chunks)
    owned = [k for s in p.segments for k in s.keys]
    assert owned == list(g.chunk_range(offset, stop))  # each touched key exactly once, in order
    bounds = list(itertools.accumulate(chunks, initial=offset))
    for s in p.segments:
        assert offset <= s.start < s.stop <= stop
        lo, hi = g.start(s.keys.start), min(g.start(s.keys.stop - 1) + g.size(s.keys.stop - 1), extent)
        assert s.start == max(lo, offset) and s.stop == min(hi, stop)
        needed = [b for b in range(len(chunks)) if bounds[b] < s.stop and bounds[b + 1] > s.start]
        assert list(s.blocks) == needed
    for a, b in itertools.pairwise(p.segments):
        assert a.stop == b.start  # contiguous, non-overlapping
    partial = [k for k in owned if g.start(k) < offset or min(g.start(k) + g.size(k), extent) > stop]
    assert list(p.partial_keys) == partial
