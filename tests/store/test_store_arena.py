"""The per-thread read arena: reuse between reads, isolation of nested reads and threads, the size limit."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from zarr_dask.store import arena as arena_mod
from zarr_dask.store.arena import ReadArena, read_arena, release_read_arena


def _address(view: memoryview) -> int:
    return int(np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0])


def test_a_view_outlives_its_outgrown_buffer() -> None:
    arena = ReadArena(limit=64 << 20)
    first = arena.take(1 << 20)  # fills the first 1 MiB buffer
    first[:] = b"a" * len(first)
    second = arena.take(2 << 20)  # needs a bigger buffer: the arena moves on, ``first`` keeps the old one
    second[:] = b"b" * len(second)
    assert bytes(first) == b"a" * len(first)


def test_views_of_one_read_do_not_overlap() -> None:
    with read_arena() as arena:
        views = [arena.take(n) for n in (10, 1000, 3, 1 << 20, 7)]
        for i, v in enumerate(views):
            v[:] = bytes([i]) * len(v)
        assert [set(bytes(v)) for v in views] == [{i} for i in range(len(views))]


def test_memory_is_reused_by_the_next_read_of_the_same_thread() -> None:
    with read_arena() as arena:
        first = _address(arena.take(4096))
    with read_arena() as arena:
        assert _address(arena.take(4096)) == first


def test_a_nested_read_gets_its_own_memory() -> None:
    with read_arena() as outer:
        a = outer.take(100)
        a[:] = b"x" * 100
        with read_arena() as inner:
            assert inner is not outer
            inner.take(100)[:] = b"y" * 100
        assert bytes(a) == b"x" * 100
        b = outer.take(10)  # the outer arena still works after the nested one, without touching ``a``
        b[:] = b"z" * 10
        assert bytes(a) == b"x" * 100 and bytes(b) == b"z" * 10


def test_threads_have_their_own_arena() -> None:
    seen: list[ReadArena] = []

    def run() -> None:
        with read_arena() as arena:
            seen.append(arena)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with read_arena() as mine:
        assert seen[0] is not seen[1] and mine not in seen


def test_requests_over_the_limit_get_one_off_memory() -> None:
    arena = ReadArena(limit=1000)
    big = arena.take(5000)
    assert len(big) == 5000
    assert len(arena._view) == 0  # nothing kept for reuse
    small = arena.take(100)
    assert len(small) == 100 and 0 < len(arena._view) <= 1000


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", 128 << 20), ("0", 0), ("4096", 4096), ("16MiB", 16 << 20), ("1 GiB", 1 << 30), ("2MB", 2 * 10**6)],
)
def test_limit_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str, expected: int) -> None:
    monkeypatch.setenv("ZARR_DASK_READ_ARENA", raw)
    assert arena_mod._limit() == expected


@pytest.mark.parametrize("raw", ["nonsense", "12 parsecs", "MiB"])
def test_a_bad_limit_warns_and_keeps_the_default(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ZARR_DASK_READ_ARENA", raw)
    with pytest.warns(RuntimeWarning, match="ZARR_DASK_READ_ARENA"):
        assert arena_mod._limit() == 128 << 20


def test_release_drops_the_threads_arena_but_not_one_in_use() -> None:
    with read_arena() as first:
        release_read_arena()  # inside a read: ignored
    with read_arena() as again:
        assert again is first
    release_read_arena()
    with read_arena() as fresh:
        assert fresh is not first
