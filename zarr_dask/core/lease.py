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
from typing import Any

from zarr_dask import config
from zarr_dask.errors import WriteConflictError
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.versioned import ConditionalStore, RetryPolicy, conditional

__all__ = ["LEASE_NAME", "AppendLease", "lease_key", "release_lease"]

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
    """

    def __init__(self, store: Store, path: str, *, ttl: float | None = None, wait: float | None = None) -> None:
        cas = conditional(store)
        if cas is None:
            raise TypeError(f"{store!r} cannot make conditional writes, so it cannot hold append leases")
        self.store, self.path, self.key = store, path, lease_key(path)
        self._cas: ConditionalStore = cas
        self.ttl = max(0.05, ttl if ttl is not None else float(config.get("append_lease_ttl")))
        self.wait = wait if wait is not None else float(config.get("append_wait"))
        self.token = uuid.uuid4().hex
        self._version: object = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _document(self) -> bytes:
        return json.dumps(
            {"owner": self.token, "host": socket.gethostname(), "pid": os.getpid(), "expires": time.time() + self.ttl}
        ).encode()

    def acquire(self) -> AppendLease:
        """Take the lease (waiting while another live append holds it) and start renewing it."""
        deadline = time.monotonic() + self.wait
        policy = RetryPolicy(attempts=1 << 30, base_delay=0.005, max_delay=0.5)
        holder: dict[str, Any] = {}
        attempt = 0
        while True:
            current = self._cas.get_versioned([self.key])[self.key]
            holder = _parse(current.value)
            lapsed = current.value is None or float(holder.get("expires", 0)) < time.time()
            if lapsed and self._cas.set_if_unchanged({self.key: (self._document(), current.version)})[self.key]:
                if current.value is not None:
                    _log.warning("%s /%s: took over the lapsed append lease of %s", self.store.url, self.path, _who(holder))
                break
            attempt += 1
            if time.monotonic() >= deadline:
                raise WriteConflictError(
                    f"another append to this array has been in progress for over {self.wait:g} s ({_who(holder)}); "
                    f"appends to one array take turns. Retry later, or remove {self.key!r} if that append is known to "
                    "be dead (a lease also lapses by itself when its holder stops renewing it)",
                    store=self.store.url,
                    path=self.path,
                )
            policy.wait(attempt)
        self._version = self._cas.get_versioned([self.key])[self.key].version
        self._thread = threading.Thread(target=self._renew, name="zarr_dask_lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                won = self._cas.set_if_unchanged({self.key: (self._document(), self._version)})[self.key]
                if not won:  # released by the commit (maybe on another worker) or taken over: stop
                    return
                now = self._cas.get_versioned([self.key])[self.key]
                if now.value is None or _parse(now.value).get("owner") != self.token:
                    return  # released right after the renewal: never bring it back
                self._version = now.version
            except Exception as exc:  # a transient store error: try again at the next tick
                _log.warning("%s /%s: could not renew the append lease: %s", self.store.url, self.path, exc)

    def stop_renewing(self) -> None:
        """Stop the renewal thread (the lease itself stays until released or lapsed)."""
        self._stop.set()

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this one's."""
        self.stop_renewing()
        release_lease(self.store, self.path, self.token)

    def release_with(self, owner: Any) -> None:
        """Release the lease when ``owner`` (a lazy append's dask object) is garbage collected, if the append's
        own commit has not released it first."""
        weakref.finalize(owner, release_lease, self.store, self.path, self.token, self._stop)

    def __enter__(self) -> AppendLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def release_lease(store: Store, path: str, token: str, stop: threading.Event | None = None) -> None:
    """Delete the lease of the array at ``path`` if it is the one with ``token`` (idempotent; runs wherever an
    append's commit task runs)."""
    if stop is not None:
        stop.set()
    cas = conditional(store)
    if cas is None:
        return
    key = lease_key(path)
    for _ in range(16):
        current = cas.get_versioned([key])[key]
        if current.value is None or _parse(current.value).get("owner") != token:
            return
        if cas.set_if_unchanged({key: (None, current.version)})[key]:
            return


def _parse(value: bytes | None) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        doc = json.loads(value)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _who(holder: dict[str, Any]) -> str:
    if not holder:
        return "holder unknown"
    expires = float(holder.get("expires", 0))
    return f"held by {holder.get('host', '?')} pid {holder.get('pid', '?')}, lapsing in {max(0.0, expires - time.time()):.0f} s"
