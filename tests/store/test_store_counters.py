"""RequestCounters on their own."""

from __future__ import annotations

import pickle
import threading

import pytest

from zarr_dask.store import RequestCounters
from zarr_dask.store._counters import COUNTER_KINDS


def test_snapshot_has_every_kind() -> None:
    counters = RequestCounters()
    assert counters.snapshot() == dict.fromkeys(COUNTER_KINDS, 0)
    assert set(COUNTER_KINDS) == {
        "get",
        "get_range",
        "set",
        "delete",
        "list",
        "exists",
        "bytes_read",
        "bytes_written",
    }


def test_add_reset_and_counting() -> None:
    counters = RequestCounters()
    counters.add(get=2, bytes_read=10)
    with counters.counting() as delta:
        assert delta == {}
        counters.add(get=1, set=3)
    assert delta["get"] == 1 and delta["set"] == 3 and delta["bytes_read"] == 0
    assert counters.snapshot()["get"] == 3
    counters.reset()
    assert not any(counters.snapshot().values())
    assert "get=0" in repr(counters)


def test_counting_fills_the_delta_even_on_error() -> None:
    counters = RequestCounters()
    with pytest.raises(RuntimeError), counters.counting() as delta:
        counters.add(delete=1)
        raise RuntimeError
    assert delta["delete"] == 1


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(KeyError, match="unknown request counter 'gets'"):
        RequestCounters().add(gets=1)


def test_counters_are_not_pickled() -> None:
    counters = RequestCounters()
    counters.add(get=5)
    assert pickle.loads(pickle.dumps(counters)).snapshot()["get"] == 0


def test_thread_safe_increments() -> None:
    counters = RequestCounters()

    def work() -> None:
        for _ in range(2000):
            counters.add(get=1, bytes_read=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counters.snapshot()["get"] == 16000 and counters.snapshot()["bytes_read"] == 32000
