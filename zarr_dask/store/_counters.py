"""Per-store counts of storage requests, for tests, benchmarks and ``explain``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["COUNTER_KINDS", "RequestCounters"]

_log = logging.getLogger("zarr_dask.store")

#: Every counter a :class:`RequestCounters` keeps, in display order.
COUNTER_KINDS: tuple[str, ...] = (
    "get",
    "get_range",
    "set",
    "delete",
    "list",
    "exists",
    "bytes_read",
    "bytes_written",
)


class RequestCounters:
    """Thread-safe counts of the storage requests one store instance made.

    One request is counted per key or byte range asked for, whatever the batching: ``get_many`` of 10
    keys counts 10 ``"get"`` (missing keys included), ``get_ranges`` of 4 ranges counts 4
    ``"get_range"``, ``set_many`` / ``delete_many`` one ``"set"`` / ``"delete"`` per key; ``list_prefix``
    and ``list_dir`` count one ``"list"``, ``delete_prefix`` one ``"delete"`` (plus one ``"list"`` on
    fsspec stores, which must list first) and ``FsspecStore.set_if_not_exists`` one ``"exists"`` too.
    ``"bytes_read"`` and ``"bytes_written"`` count payload bytes.  Counters belong to one store instance;
    they are not pickled (an unpickled store starts from zero) and :meth:`Store.with_read_only` views
    start from zero too.

    Examples
    --------
    >>> counters = RequestCounters()
    >>> counters.add(get=3, bytes_read=12)
    >>> counters.snapshot()["get"]
    3
    >>> with counters.counting() as delta:
    ...     counters.add(set=1, bytes_written=4)
    >>> delta["set"], delta["get"]
    (1, 0)
    """

    __slots__ = ("_counts", "_label", "_lock")

    def __init__(self, label: str = "") -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTER_KINDS, 0)
        self._label = label  # the store URL, for the ``zarr_dask.store`` debug log of every request batch

    def add(self, **counts: int) -> None:
        """Add to one or more counters, e.g. ``add(get=3, bytes_read=1024)``.

        Parameters
        ----------
        **counts
            Counter kind to increment, as listed in ``COUNTER_KINDS``.

        Raises
        ------
        KeyError
            For an unknown kind (a bug in the caller).
        """
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s: %s", self._label or "store", " ".join(f"{k}={v}" for k, v in counts.items()))
        with self._lock:
            for kind, count in counts.items():
                if kind not in self._counts:
                    raise KeyError(f"unknown request counter {kind!r}; use one of {', '.join(COUNTER_KINDS)}")
                self._counts[kind] += count

    def snapshot(self) -> dict[str, int]:
        """Return a copy of every counter (all kinds present, zeros included)."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self._counts = dict.fromkeys(COUNTER_KINDS, 0)

    @contextmanager
    def counting(self) -> Iterator[dict[str, int]]:
        """Count the requests made inside a ``with`` block.

        Yields
        ------
        dict
            Empty inside the block; on exit it is filled with the difference of every counter between
            entering and leaving the block.  Other threads using the same store are counted too.
        """
        before = self.snapshot()
        delta: dict[str, int] = {}
        try:
            yield delta
        finally:
            after = self.snapshot()
            delta.update({kind: after[kind] - before[kind] for kind in COUNTER_KINDS})

    def __reduce__(self) -> tuple[type[RequestCounters], tuple[()]]:
        return (RequestCounters, ())  # counts are per instance: a copy starts from zero

    def __repr__(self) -> str:
        counts = self.snapshot()
        return "RequestCounters(" + ", ".join(f"{k}={v}" for k, v in counts.items()) + ")"
