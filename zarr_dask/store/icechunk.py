"""Icechunk sessions as stores: read any session (a branch, a tag, a snapshot), write a writable one.

In the caller's process a session's writes go straight into it (``session.store``, through
:class:`~zarr_dask.store.zarr_python.ZarrPythonStore`); the user commits once afterwards, and that one snapshot
holds the whole write. Sent to other processes (a ``distributed`` cluster of processes), a writable session
travels as a *fork* (``session.fork()``, Icechunk's cooperative distributed writes); each writer task writes
into a fork of its own and hands it back through the write's fan-in, where the forks are merged, and the final
result merges them into the caller's session when it arrives there (:mod:`zarr_dask.store.transactions`).

icechunk is never imported here: sessions are recognised by their class and module.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Hashable
from typing import Any

from zarr_dask.errors import StoreError, UnsupportedFeatureError
from zarr_dask.store._counters import RequestCounters
from zarr_dask.store.transactions import home_session, register_home
from zarr_dask.store.zarr_python import ZarrPythonStore, _ident

__all__ = ["IcechunkForkStore", "IcechunkSessionStore", "icechunk_store", "is_icechunk"]


def is_icechunk(obj: Any) -> bool:
    """True for an Icechunk ``Session`` / ``ForkSession`` or ``IcechunkStore`` (checked without importing it)."""
    return type(obj).__module__.split(".")[0] == "icechunk" and type(obj).__name__ in (
        "Session",
        "ForkSession",
        "IcechunkStore",
    )


def icechunk_store(obj: Any, *, read_only: bool = False) -> IcechunkSessionStore | None:
    """The store of an Icechunk session (or of ``session.store``), or None for anything else."""
    if not is_icechunk(obj):
        return None
    session = obj.session if type(obj).__name__ == "IcechunkStore" else obj
    return IcechunkSessionStore(session, read_only=read_only)


class IcechunkSessionStore(ZarrPythonStore):
    """An Icechunk session in the caller's process: writes go into the session, which the user commits.

    Parameters
    ----------
    session
        A session from ``Repository.writable_session`` (writes) or ``readonly_session`` (branch, tag,
        snapshot: reads).
    read_only
        Refuse every mutating call (a read-only session is read-only here too).
    """

    transactional = True

    def __init__(self, session: Any, *, read_only: bool = False, ident: str | None = None) -> None:
        self.session = session
        super().__init__(session.store, read_only=read_only or bool(session.read_only), ident=ident or _ident(session))
        where = session.branch or session.snapshot_id
        self.url = f"icechunk://{where}{'' if session.read_only else ' (writable session)'}"
        self.counters = RequestCounters(self.url)
        register_home(self._ident, session)

    @property
    def read_only_advice(self) -> str:
        """A read-only session cannot be opened for writing: the fix is a writable session of the branch."""
        if not self.session.read_only:
            return super().read_only_advice
        branch = self.session.branch if isinstance(self.session.branch, str) else "main"
        return (f"it is a read-only Icechunk session (repo.readonly_session), which no mode makes writable: write "
                f"through a writable session, session = repo.writable_session({branch!r}), then commit it "
                "(session.commit(message))")  # fmt: skip

    def with_read_only(self, read_only: bool = True) -> IcechunkSessionStore:
        """The same session with ``read_only`` set (a read-only session is never made writable)."""
        return IcechunkSessionStore(self.session, read_only=read_only, ident=self._ident)

    def __reduce__(self) -> Any:
        if self.session.read_only:  # a read-only session pickles as itself
            return (IcechunkSessionStore, (self.session,), {"read_only": True})
        fork = self.session.fork()  # a writable one travels as a fork, merged back by the write's fan-in
        return (_arrive_store, (self._ident, os.getpid(), fork, self.read_only))

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.read_only = bool(state["read_only"])


def _arrive_store(ident: str, pid: int, fork: Any, read_only: bool) -> ZarrPythonStore:
    """Unpickle a writable session's store: the session itself back in its own process, else the fork."""
    session = home_session(ident, pid)
    if session is not None:
        return IcechunkSessionStore(session, read_only=read_only, ident=ident)
    return IcechunkForkStore(fork, (ident, pid), read_only=read_only)


class IcechunkForkStore(ZarrPythonStore):
    """A writable session's copy in another process (a fork of it). It reads what the session held when the
    write was sent; it writes only inside writer tasks, each into a fork of its own (:meth:`task_store`)."""

    transactional = True

    def __init__(self, fork: Any, home: tuple[str, int], *, read_only: bool = False, task: bool = False) -> None:
        self.fork = fork
        self._home = home
        self._task = task
        super().__init__(fork.store, read_only=read_only, ident=f"{home[0]}-fork-{uuid.uuid4().hex}")
        self.url = f"icechunk://fork-of-{home[0][:12]}"
        self.counters = RequestCounters(self.url)

    @property
    def home(self) -> tuple[str, int]:
        """``(ident, pid)`` of the caller's session."""
        return self._home

    def task_store(self) -> IcechunkForkStore:
        """A fork of its own for one writer task (its changes go back with :func:`~.transactions.carry`)."""
        return IcechunkForkStore(self.fork.fork(), self._home, read_only=self.read_only, task=True)

    def changes(self) -> Any:
        """This task store's fork (None outside a writer task: nothing was written)."""
        return self.fork if self._task else None

    def _check_writable(self, action: str, key: str) -> None:
        super()._check_writable(action, key)
        if not self._task:
            raise UnsupportedFeatureError(
                f"cannot {action} {key!r} into a copy of an Icechunk session in another process outside a "
                "zarr_dask writer task: the change would not reach the session; write through "
                "zarr_dask.to_zarr / append / to_zarr_dataset with the session, or fork the session yourself "
                "(session.fork()) and merge the forks back",
                store=self.url,
            )

    def _error(self, action: str, key: str, exc: BaseException) -> StoreError:
        return StoreError(
            f"cannot {action} key {key!r} in a fork of an Icechunk session sent to another process: "
            f"{type(exc).__name__}: {exc}; every process must reach the repository's storage (a repository in "
            "memory, icechunk.in_memory_storage(), is only in the process that made it: write it with threads)",
            store=self.url,
        )

    def with_read_only(self, read_only: bool = True) -> IcechunkForkStore:
        """The same fork with ``read_only`` set."""
        return IcechunkForkStore(self.fork, self._home, read_only=read_only or self.read_only, task=self._task)

    def _config(self) -> tuple[Hashable, ...]:
        return (self._ident, self.read_only, self._task)

    def __reduce__(self) -> Any:
        return (IcechunkForkStore, (self.fork, self._home), {"read_only": self.read_only, "_task": self._task})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.read_only = bool(state["read_only"])
        self._task = bool(state["_task"])
