"""Versioned reads and conditional writes: the store capability behind every safe read-modify-write.

A store that implements :class:`ConditionalStore` can read keys together with a *version* and write (or
delete) a key only if its version is still the one read -- compare-and-swap per storage key. The engine uses
it wherever it merges new data into stored bytes (a chunk or shard a write covers only partly, an array
document an append grows, consolidated metadata): read with versions, merge, write conditionally, and on a
conflict read again and merge again. Independent writers (threads, processes, machines, with no lock
service) then never lose each other's data.

Versions are opaque: only the store that made one can compare it. ``None`` means "the key is absent", and a
conditional write with ``None`` creates the key only if it still does not exist.

============================  ===========================================================================
store                         how
============================  ===========================================================================
:class:`MemoryStore`          the stored ``bytes`` object itself, compared under the store's lock
:class:`LocalStore`           the file's identity and content, compared under a per-key lock file outside
                              the store (``flock``: every process on the machine), which plain writes and
                              deletes of the key take too
S3 (s3fs)                     the ETag, with ``If-Match`` / ``If-None-Match: *`` on ``PutObject`` and
                              ``If-Match`` on ``DeleteObject``
GCS (gcsfs)                   the generation, with ``ifGenerationMatch`` (``0``: create) on multipart
                              uploads and on ``DELETE``
Azure Blob (adlfs)            the ETag, with ``If-Match`` / ``If-None-Match: *`` on ``Put Blob`` and
                              ``If-Match`` on ``Delete Blob``
fsspec ``memory://``          the value, compared under one process-wide lock
anything else                 not a ``ConditionalStore``: see :func:`conditional`
============================  ===========================================================================
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import NamedTuple, Protocol, cast, runtime_checkable

from zarr_dask import config
from zarr_dask.store.base import Buffer, Store, capable

__all__ = ["Again", "ConditionalStore", "RetryPolicy", "Versioned", "conditional", "retry_policy", "transact"]


class Versioned(NamedTuple):
    """A value read together with its version (``value`` and ``version`` are None when the key is absent)."""

    value: bytes | None
    version: object


@runtime_checkable
class ConditionalStore(Protocol):
    """The capability: versioned reads and conditional writes (see the module docstring)."""

    def get_versioned(self, keys: Sequence[str]) -> dict[str, Versioned]:
        """Every key of ``keys`` with its value and version (one batched, concurrent call on remote stores).

        Missing keys are included, as ``Versioned(None, None)``.
        """
        ...

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """For each ``key: (value, version)``: store ``value`` (``None``: delete the key) only if the key's
        version is still ``version`` (``None``: only if the key is absent). One batched call.

        Returns
        -------
        dict of str to bool
            For every key, True if this call changed it, False if its version had changed (a conflict:
            nothing was written for that key).
        """
        ...


def conditional(store: Store) -> ConditionalStore | None:
    """``store`` as a :class:`ConditionalStore`, or None when it cannot make conditional writes.

    Examples
    --------
    >>> from zarr_dask.store import MemoryStore
    >>> store = MemoryStore()
    >>> cas = conditional(store)
    >>> got = cas.get_versioned(["k"])["k"]
    >>> cas.set_if_unchanged({"k": (b"1", got.version)}), cas.set_if_unchanged({"k": (b"2", got.version)})
    ({'k': True}, {'k': False})
    >>> store.get("k")
    b'1'
    """
    return cast(ConditionalStore, store) if capable(store, ConditionalStore) else None


_DEFAULT_ATTEMPTS = 64


class RetryPolicy(NamedTuple):
    """How often a conflicting conditional write is retried, and how long to wait in between.

    The wait before retry ``n`` (from 1) is random in ``[0, min(max_delay, base_delay * 2**n)]`` ("full
    jitter"), so writers that collided spread out instead of colliding again.
    """

    attempts: int = 64  # keep in step with _DEFAULT_ATTEMPTS
    base_delay: float = 0.002
    max_delay: float = 0.5

    def wait(self, attempt: int) -> None:
        """Sleep before retry ``attempt`` (1 = the first retry)."""
        time.sleep(random.uniform(0.0, min(self.max_delay, self.base_delay * 2.0 ** min(attempt, 30))))


def retry_policy() -> RetryPolicy:
    """The policy in force: the ``write_attempts`` knob (:mod:`zarr_dask.config`, default 64) attempts per key."""
    return RetryPolicy(attempts=int(config.get("write_attempts")))


class Again(Exception):
    """Raised by a :func:`transact` step: nothing to write yet (e.g. a live lease is held by another writer);
    wait and read again."""


#: What a :func:`transact` step returns: the writes of this round, ``key: value`` (``None`` deletes the key);
#: keys left out need no write.
Writes = Mapping[str, Buffer | None]


def transact(
    cas: ConditionalStore,
    keys: Sequence[str],
    step: Callable[[Mapping[str, Versioned]], Writes],
    *,
    exhausted: Callable[[Sequence[str], int], BaseException],
    independent: bool = False,
    absent: Collection[str] = (),
    fence: Callable[[], None] | None = None,
    policy: RetryPolicy | None = None,
    deadline: float | None = None,
) -> dict[str, Versioned]:
    """One optimistic transaction over ``keys``: the single compare-and-swap loop of the engine.

    Each round reads the keys with their versions (one batched call), lets ``step`` compute the writes from
    what it read, calls ``fence`` when a write would replace or delete an existing value (it raises when this
    writer may no longer write: see :mod:`zarr_dask.core.lease`), and writes each key only if its version is
    still the one read (one batched call). Lost keys go round again after a jittered wait
    (:class:`RetryPolicy`); the waits come only between lost rounds.

    Parameters
    ----------
    cas
        The store's conditional capability.
    keys
        The keys read each round.
    step
        ``versioned values -> writes``; may raise :class:`Again` to wait and read again without writing.
    exhausted
        ``(keys still pending, attempts) -> exception`` raised when the attempts (or ``deadline``) run out.
    independent
        Each key is its own transaction (chunks): a round re-reads and re-steps only the keys that lost.
        Otherwise (documents that go together) every round reads all ``keys`` and every write must win.
    absent
        Keys taken as absent in the first round without reading them (create-if-absent: a fresh key costs
        one request; if it exists after all, the next round reads it).
    fence
        Called before a round whose writes include an overwrite or delete of a value that exists.
    policy, deadline
        The retry policy (default :func:`retry_policy`) and an optional ``time.monotonic()`` deadline.

    Returns
    -------
    dict of str to Versioned
        The keys as the winning round read them, updated with what it wrote (version ``None``).

    Examples
    --------
    >>> from zarr_dask.store import MemoryStore
    >>> store = MemoryStore()
    >>> cas = conditional(store)
    >>> def add_one(got):
    ...     return {"n": str(int(got["n"].value or b"0") + 1).encode()}
    >>> _ = transact(cas, ["n"], add_one, exhausted=lambda keys, n: RuntimeError(keys))
    >>> _ = transact(cas, ["n"], add_one, exhausted=lambda keys, n: RuntimeError(keys))
    >>> store.get("n")
    b'2'
    """
    policy = policy if policy is not None else retry_policy()
    pending = list(dict.fromkeys(keys))
    final: dict[str, Versioned] = {}
    guess = set(absent)
    attempt = 0
    while True:
        attempt += 1
        unread = [k for k in pending if k in guess]
        got = cas.get_versioned([k for k in pending if k not in guess]) if len(unread) < len(pending) else {}
        got.update({k: Versioned(None, None) for k in unread})
        guess.clear()
        try:
            writes = dict(step(got))
        except Again:
            writes = None
        if writes is not None:
            if fence is not None and any(got[k].value is not None for k in writes):
                fence()
            won = cas.set_if_unchanged({k: (v, got[k].version) for k, v in writes.items()}) if writes else {}
            lost = [k for k, ok in won.items() if not ok]
            if not lost:
                final.update(got)
                final.update({k: Versioned(None if v is None else bytes(v), None) for k, v in writes.items()})
                return final
            if independent:
                final.update({k: v for k, v in got.items() if k not in lost})
                final.update({k: Versioned(None if v is None else bytes(v), None) for k, v in writes.items() if k not in lost})
                pending = lost
        if attempt >= policy.attempts or (deadline is not None and time.monotonic() >= deadline):
            raise exhausted(pending, attempt)
        policy.wait(attempt)
