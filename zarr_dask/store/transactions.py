"""Stores whose writes are one transaction the user commits (Icechunk sessions), and how a write's tasks
carry their changes back to the caller.

A *transactional* store (:class:`TransactionalStore`) is one where nothing a write stores is seen by anyone
else until the user commits, and a commit that conflicts with another fails (Icechunk's ``ConflictError``)
instead of losing data: compare-and-swap per key, append leases and consolidated metadata are not needed
there, and zarr_dask writes none of them.

When such a store travels to other processes (a ``distributed`` cluster, a process pool), each copy holds a
*fork* of the caller's transaction. Every writer task writes into a fork of its own
(:meth:`ForkingStore.task_store`) and returns :class:`Carried` (its result and its fork); the write's fan-in
tree merges the forks (:func:`combine`), and the final result merges them into the caller's transaction when
it arrives in the caller's process (it is unpickled there), so the caller's one commit holds the whole write.
Writes into a copy outside a writer task are refused, never silently dropped.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from zarr_dask.store.base import Store, capable

__all__ = [
    "Carried",
    "ForkingStore",
    "TransactionalStore",
    "carry",
    "combine",
    "home_session",
    "is_transactional",
    "register_home",
    "task_store",
    "value_of",
]


@runtime_checkable
class TransactionalStore(Protocol):
    """The capability: the store's writes are one transaction that the user commits (see the module doc)."""

    transactional: bool


@runtime_checkable
class ForkingStore(Protocol):
    """The capability of a transactional store's copy in another process: writes go into per-task forks."""

    def task_store(self) -> Store:
        """A store for one task's writes: a fork of its own, handed back with :func:`carry`."""
        ...

    def changes(self) -> Any:
        """What this task store wrote (a fork: ``changes().merge(*others)`` merges other forks into it)."""
        ...

    @property
    def home(self) -> tuple[str, int]:
        """``(ident, pid)`` of the caller's session (:func:`register_home`)."""
        ...


def is_transactional(store: Any) -> bool:
    """True for a store whose writes are a transaction the user commits (Icechunk sessions)."""
    return bool(getattr(store, "transactional", False))


def task_store(store: Any) -> Any:
    """The store a writer task writes into: a fork of its own for a transactional store's copy in another
    process, else ``store`` itself."""
    return store.task_store() if capable(store, ForkingStore) else store


# ------------------------------------------------------------------------------------------ sessions at home
_HOMES: dict[str, Any] = {}
_HOMES_LOCK = threading.Lock()


def register_home(ident: str, session: Any) -> None:
    """Record the caller's session under ``ident`` in this process (while the session lives)."""
    with _HOMES_LOCK:
        found = _HOMES.get(ident)
        if found is not None and found() is session:
            return
        try:
            _HOMES[ident] = weakref.ref(session)
        except TypeError:
            _HOMES[ident] = lambda: session


def home_session(ident: str, pid: int) -> Any:
    """The caller's session registered under ``ident`` if this is its process (``pid``), else None."""
    if pid != os.getpid():
        return None
    with _HOMES_LOCK:
        ref = _HOMES.get(ident)
    return None if ref is None else ref()


# ------------------------------------------------------------------------------------------ carried results
@dataclass(frozen=True, kw_only=True)
class Carried:
    """A task's result with the changes its forks made, on their way to the caller's session.

    Unpickled in the caller's process (the result of a computation arriving there), it merges the changes into
    the caller's session and becomes ``value``; anywhere else it stays a :class:`Carried`.
    """

    value: Any
    changes: Any
    #: ``(ident, pid)``: the caller's session as registered with :func:`register_home`, and its process.
    home: tuple[str, int]

    def __reduce__(self) -> Any:
        return (_arrive, (self.value, self.changes, self.home))

    def __int__(self) -> int:
        return int(self.value)


def _arrive(value: Any, changes: Any, home: tuple[str, int]) -> Any:
    session = home_session(*home)
    if session is None:
        return Carried(value=value, changes=changes, home=home)
    session.merge(changes)
    return value


def carry(store: Any, value: Any, tokens: Sequence[Any] = ()) -> Any:
    """``value`` with the changes of ``store`` (a task store) and of the :class:`Carried` ``tokens``; ``value``
    itself when there are none (a plain store, or a transactional one in the caller's process)."""
    carried = [t for t in tokens if isinstance(t, Carried)]
    own = store.changes() if capable(store, ForkingStore) else None
    forks = [c.changes for c in carried] + ([own] if own is not None else [])
    if not forks:
        return value
    first, *rest = forks
    if rest:
        first.merge(*rest)
    home = carried[0].home if carried else store.home
    return Carried(value=value, changes=first, home=home)


def value_of(token: Any) -> Any:
    """A token's value, without the changes it carries."""
    return token.value if isinstance(token, Carried) else token


def combine(tokens: Sequence[Any]) -> Any:
    """Fan-in of writer tokens: the number of keys written, carrying the merged changes if any.

    Examples
    --------
    >>> combine([3, 4])  # plain stores: the tokens are key counts
    7
    >>> from zarr_dask.store import MemoryStore
    >>> is_transactional(MemoryStore()), task_store(MemoryStore("t")) == MemoryStore("t")
    (False, True)
    """
    total = sum(int(value_of(t)) for t in tokens)
    return carry(None, total, tokens)
