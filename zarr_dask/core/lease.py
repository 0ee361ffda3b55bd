"""Append leases: one append at a time per array, arbitrated by the store itself (no lock service).

An append writes its rows beyond the stored shape and then commits the new shape. Two appends that both
start from shape ``n`` would both write rows ``n, n+1, ...`` -- the same storage keys -- so whichever wrote
last would put its rows under the other's committed shape. Appends to one array therefore take turns: an
append first creates the array's *lease*, a small JSON object next to the array's metadata
(``<array>/.zd-append-lease``), with a conditional create (``If-None-Match: *`` on S3, a hard link on local
disks), and only then reads the shape it appends to. It deletes the lease after committing. Another append
waits (jittered polling) until the lease is gone, then appends after the rows just committed: both land, one
after the other, each writer's rows contiguous.

A lease carries an expiry time; its holder renews it (a daemon thread in the process that took it) while the
append runs, so a killed holder's lease lapses after ``ttl`` seconds and a waiter then takes it over (by a
conditional write on the lapsed lease's version, so two waiters cannot both take it). Stores without
conditional writes cannot hold leases: appends there are not arbitrated (see ``docs/safe-writes.md``).

**Fencing.** A holder can stall past its lease (a frozen VM, a long GC pause) and resume after another
append took the lease over; it must then be unable to change what that append committed, without relying on
it noticing in time. So every write an append makes is conditional on what the store holds: a storage key
beyond the committed shape is created only if absent (:class:`Fence`), and one that exists is replaced only
by a conditional write on the version just read, after re-reading the lease (:meth:`Fence.check`). The
commit first records the new documents in the lease itself (:func:`~zarr_dask.core.commit.mark_commit`, a conditional write on the
lease: refused once the lease was taken over), then writes them; whoever takes over a lapsed lease that
records a commit completes it (:func:`roll_forward`) before appending, so a commit is all or nothing.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zarr_dask import config
from zarr_dask.errors import FencedWriteError, WriteConflictError
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.versioned import Again, ConditionalStore, RetryPolicy, Versioned, conditional, transact

__all__ = ["LEASE_NAME", "AppendLease", "Fence", "check_holder", "complete_interrupted", "lease_key", "parse_lease", "release_lease", "roll_forward"]

LEASE_NAME = ".zd-append-lease"
_log = logging.getLogger("zarr_dask.core")


def lease_key(path: str) -> str:
    """The lease key of the array at ``path``.

    Examples
    --------
    >>> lease_key("group/temp")
    'group/temp/.zd-append-lease'
    """
    return key_prefix(path) + LEASE_NAME


@dataclass(frozen=True)
class Fence:
    """What a writer holding an append lease carries into its writer tasks (see the module docstring).

    ``path`` is the node whose lease it is (the array, or the group of a dataset append), ``token`` the
    holder's, ``committed`` the array's shape as committed when the append was planned: storage keys at or
    beyond it hold no committed data yet, so they are created only if absent, and a key that exists there is
    replaced only after :meth:`check` has found the lease still this writer's.
    """

    path: str
    token: str
    committed: tuple[int, ...]

    def check(self, store: Store) -> None:
        """Raise :class:`~zarr_dask.errors.FencedWriteError` when the lease is no longer this writer's."""
        check_holder(store, self.path, self.token, "write rows beyond the committed shape")


def check_holder(store: Store, path: str, token: str, doing: str) -> dict[str, Any]:
    """The lease document of ``path`` if ``token`` still holds it; else :class:`~zarr_dask.errors.FencedWriteError`."""
    cas = conditional(store)
    if cas is None:
        return {}
    key = lease_key(path)
    holder = parse_lease(cas.get_versioned([key])[key].value)
    if holder.get("owner") != token:
        raise fenced_error(store, path, doing, holder)
    return holder


def fenced_error(store: Store, path: str, doing: str, holder: Mapping[str, Any]) -> FencedWriteError:
    """The error of a writer that lost its append lease (it stalled past the lease's time to live)."""
    now = f"it is now {_who(holder)}" if holder else "it is released"
    return FencedWriteError(
        f"this append no longer holds its lease, so it stopped before it could {doing} ({now}: another writer took "
        "the lease over after this one stalled for longer than ZARR_DASK_APPEND_LEASE_TTL, or this append was "
        "committed already and is being computed again). Its new shape is not committed, any rows it wrote lie "
        "beyond the committed shape where readers never look, and nothing another writer committed was changed. "
        "Fix: run the append again (it appends after the rows committed meanwhile)",
        store=store.url,
        path=path,
    )


class AppendLease:
    """The right to append to one array (see the module docstring).

    Parameters
    ----------
    store, path
        The array.
    ttl
        Seconds a lease lives without renewal (``ZARR_DASK_APPEND_LEASE_TTL``, default 60); renewed every
        ``ttl / 3`` while held.
    wait
        Seconds to wait for another append's lease before giving up with
        :class:`~zarr_dask.errors.WriteConflictError` (``ZARR_DASK_APPEND_WAIT``, default 600).
    refuse_after_completing
        When taking over a lease whose holder died between its commits (the commit is completed first), raise
        :class:`~zarr_dask.errors.WriteConflictError` naming what landed instead of going on: the append
        about to run may be a re-run of the interrupted one.
    """

    def __init__(
        self, store: Store, path: str, *, ttl: float | None = None, wait: float | None = None,
        refuse_after_completing: bool = True,
    ) -> None:  # fmt: skip
        self.refuse_after_completing = refuse_after_completing
        cas = conditional(store)
        if cas is None:
            raise TypeError(f"{store!r} cannot make conditional writes, so it cannot hold append leases")
        self.store, self.path, self.key = store, path, lease_key(path)
        self._cas: ConditionalStore = cas
        self.ttl = max(0.05, ttl if ttl is not None else float(config.get("append_lease_ttl")))
        self.wait = wait if wait is not None else float(config.get("append_wait"))
        self.token = uuid.uuid4().hex
        #: set once this holder's commit is made: :meth:`release` then also deletes a lease that records it
        self.committed = False
        #: the lease document this holder took over when it acquired (``{}``: there was none); a resumed append
        #: reads in it whether anyone else held the lease since its killed run (graph/resume_append.py)
        self.previous: dict[str, Any] = {}
        self._version: object = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _document(self, intent: Any = None) -> bytes:
        doc = {"owner": self.token, "host": socket.gethostname(), "pid": os.getpid(), "expires": time.time() + self.ttl}
        if intent:
            doc["intent"] = intent
        return json.dumps(doc).encode()

    def fence(self, committed: Sequence[int]) -> Fence:
        """The :class:`Fence` of writes made under this lease into an array whose committed shape is ``committed``."""
        return Fence(self.path, self.token, tuple(int(n) for n in committed))

    def acquire(self) -> AppendLease:
        """Take the lease (waiting while another live append holds it) and start renewing it.

        A lapsed lease is taken over by a conditional write on its version, so two waiters cannot both take it;
        a lapsed lease that records a commit in progress (its holder stalled or died between the commits of a
        dataset append) is completed first (:func:`roll_forward`), under the new lease."""
        taken: dict[str, Any] = {}

        def step(got: Mapping[str, Versioned]) -> dict[str, bytes]:
            current = got[self.key]
            holder = parse_lease(current.value)
            if current.value is not None and float(holder.get("expires", 0)) >= time.time():
                taken["holder"] = holder
                raise Again
            taken["holder"] = holder if current.value is not None else {}
            return {self.key: self._document(holder.get("intent"))}

        transact(
            self._cas, [self.key], step, exhausted=self._waited_too_long,
            policy=RetryPolicy(attempts=1 << 30, base_delay=0.005, max_delay=0.5),
            deadline=time.monotonic() + self.wait,
        )  # fmt: skip
        holder = self.previous = taken["holder"]
        if holder and not holder.get("abandoned"):
            _log.warning("%s /%s: took over the lapsed append lease of %s", self.store.url, self.path, _who(holder))
        if holder.get("intent"):
            roll_forward(self.store, holder["intent"])
            _log.warning("%s /%s: completed the commit that append left unfinished", self.store.url, self.path)
            self._cas.set_if_unchanged({self.key: (self._document(), self._read_version())})
            if self.refuse_after_completing:
                release_lease(self.store, self.path, self.token)
                raise WriteConflictError(
                    f"an earlier append was interrupted between its commits ({_landed(holder['intent'])}); it is "
                    "complete now. This append was not run, in case it is a re-run of that one (its rows would be "
                    "stored twice): if it is not, run it again",
                    store=self.store.url,
                    path=self.path,
                )
        self._version = self._read_version()
        self._thread = threading.Thread(target=self._renew, name="zarr_dask_lease", daemon=True)
        self._thread.start()
        return self

    def _read_version(self) -> object:
        return self._cas.get_versioned([self.key])[self.key].version

    def _waited_too_long(self, keys: Sequence[str], attempts: int) -> WriteConflictError:
        holder = parse_lease(self._cas.get_versioned([self.key])[self.key].value)
        return WriteConflictError(
            f"another append to this array has been in progress for over {self.wait:g} s ({_who(holder)}); "
            f"appends to one array take turns. Retry later, or remove {self.key!r} if that append is known to "
            "be dead (a lease also lapses by itself when its holder stops renewing it)",
            store=self.store.url,
            path=self.path,
        )

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                won = self._cas.set_if_unchanged({self.key: (self._document(), self._version)})[self.key]
                if not won:  # committing (the commit marks the lease), released, or taken over: stop
                    return
                now = self._cas.get_versioned([self.key])[self.key]
                if now.value is None or parse_lease(now.value).get("owner") != self.token:
                    return  # released right after the renewal: never bring it back
                self._version = now.version
            except Exception as exc:  # noqa: BLE001 - a transient store error: try again at the next tick
                _log.warning("%s /%s: could not renew the append lease: %s", self.store.url, self.path, exc)

    def stop_renewing(self) -> None:
        """Stop the renewal thread (the lease itself stays until released or lapsed)."""
        self._stop.set()

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this one's (one that records a commit not made
        yet stays: see :func:`release_lease`)."""
        self.stop_renewing()
        release_lease(self.store, self.path, self.token, committed=self.committed)

    def release_with(self, owner: Any) -> None:
        """Stop renewing the lease when ``owner`` (a lazy append's dask object) is garbage collected: a lease
        that is never committed then lapses after ``ttl`` seconds, so a lazy append that was dropped without
        being computed holds up other appends at most that long. It is not deleted then: the computation may
        still be running (``client.compute(append(...))`` drops the object at once), and it commits unless
        another append took the lapsed lease over meanwhile, which fences it off (see the module docstring)."""
        weakref.finalize(owner, self._stop.set)

    def abandon(self) -> None:
        """Stop renewing and mark the lease lapsed at once, still naming this holder (a resumable append that
        failed: its re-run takes the lease over without waiting for the time to live, and finds in it that no
        other append held the lease meanwhile). A lease that records a commit keeps it (see :func:`roll_forward`)."""
        self.stop_renewing()
        key = self.key

        def step(got: Mapping[str, Versioned]) -> dict[str, bytes]:
            holder = parse_lease(got[key].value)
            if holder.get("owner") != self.token:
                return {}
            return {key: json.dumps({**holder, "expires": 0, "abandoned": True}).encode()}

        transact(self._cas, [key], step, exhausted=lambda keys, n: WriteConflictError(
            f"the append lease {key!r} kept changing while this append gave it up", store=self.store.url, path=self.path))

    def __enter__(self) -> AppendLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def roll_forward(store: Store, intent: Mapping[str, Any]) -> None:
    """Complete a commit recorded in a lease (:func:`~zarr_dask.core.commit.mark_commit`) whose holder stalled or died: every array
    document goes from ``expected`` to ``new`` (already ``new``: nothing to do; changed otherwise: left alone),
    then the documents ``after`` (consolidated metadata) are written."""
    from zarr_dask.core.commit import apply_intent

    apply_intent(store, intent)


def complete_interrupted(store: Store, paths: Sequence[str]) -> list[str]:
    """Complete the commits recorded in the leases of ``paths`` (one batched read): a commit whose holder died
    between two of its writes (its lease lapses and is taken over, which completes it: :func:`roll_forward`), or
    one in progress (waited for). Returns the paths whose commit was completed or waited for."""
    if conditional(store) is None or not paths:
        return []
    found = store.get_many([lease_key(p) for p in paths])
    done = []
    for p in paths:
        if parse_lease(found.get(lease_key(p))).get("intent"):
            AppendLease(store, p, refuse_after_completing=False).acquire().release()
            _log.warning("%s /%s: completed the commit of an interrupted append", store.url, p)
            done.append(p)
    return done


def release_lease(
    store: Store, path: str, token: str, stop: threading.Event | None = None, *, committed: bool = False
) -> None:
    """Delete the lease of the array at ``path`` if it is the one with ``token`` (idempotent; runs wherever an
    append's commit task runs). A lease that records a commit (:func:`~zarr_dask.core.commit.mark_commit`) is
    deleted only once that commit is made (``committed``): after a failure it stays, lapses, and whoever takes
    it over completes the commit."""
    if stop is not None:
        stop.set()
    cas = conditional(store)
    if cas is None:
        return
    key = lease_key(path)

    def step(got: Mapping[str, Versioned]) -> dict[str, None]:
        holder = parse_lease(got[key].value)
        if holder.get("owner") != token or (holder.get("intent") and not committed):
            return {}
        return {key: None}

    transact(cas, [key], step, exhausted=lambda keys, n: WriteConflictError(
        f"the append lease {key!r} kept changing while this append released it", store=store.url, path=path))


def _landed(intent: Mapping[str, Any]) -> str:
    """What a recorded commit grows: ``"/a: shape [4, 3] -> [7, 3]; ..."``."""
    parts = []
    for entry in intent.get("arrays", []):
        shapes = []
        for which in ("expected", "new"):
            docs = entry.get(which, {})
            doc = next((v for k, v in docs.items() if k.endswith(("zarr.json", ".zarray"))), "{}")
            try:
                shapes.append(json.loads(doc).get("shape"))
            except (ValueError, AttributeError):
                shapes.append("?")
        parts.append(f"/{entry.get('path', '')}: shape {shapes[0]} -> {shapes[1]}")
    return "; ".join(parts) or "no arrays"


def parse_lease(value: bytes | None) -> dict[str, Any]:
    """A lease document as a dict (``{}``: no lease, or one that cannot be read)."""
    if value is None:
        return {}
    try:
        doc = json.loads(value)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _who(holder: Mapping[str, Any]) -> str:
    if not holder:
        return "holder unknown"
    expires = float(holder.get("expires", 0))
    return f"held by {holder.get('host', '?')} pid {holder.get('pid', '?')}, lapsing in {max(0.0, expires - time.time()):.0f} s"
