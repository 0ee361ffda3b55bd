"""A writer process for ``test_fencing.py``: one append, region write or dataset append, as a separate process
that the test can stop (SIGSTOP) past its lease and resume (SIGCONT), or that stops or kills itself at a chosen
point.

Usage: ``python _fence_worker.py '<json job>'``. The job names ``op`` (``append``, ``region``, ``xr_append``,
``xr_create``), ``url``, ``options`` (fsspec storage options), ``value`` (the writer's mark), ``rows`` and, for
a region, ``start``; ``pause`` (``"write"``: stop itself at its first data write; ``"commit"``: at its commit),
``die_after_commits`` (``os._exit`` after that many array documents were committed) and ``nofence`` (the
control: fencing switched off, as before it existed). Prints ``ready`` before writing, then one JSON line:
``{"ok": true, ...}`` or ``{"ok": false, "error": "<class>", "message": "..."}``.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


class _FlockGate:
    """Counts this process's threads inside a store lock file (:meth:`LockFiles.lock`, an ``flock``) and, while a
    stop is being made, keeps new ones out: the writer stops at its hook holding no lock, as the tests mean it
    to. (Stopped inside one, for the few microseconds of a compare-and-rename, e.g. by its lease's renewal
    thread, it makes every other writer of that key wait until it is resumed: safe, but the test would hang.)"""

    def __init__(self) -> None:
        from zarr_dask.store.files import LockFiles

        self.cond = threading.Condition()
        self.held = 0
        self.stopping = False
        original = LockFiles.lock

        @contextmanager
        def gated(*args: Any, **kwargs: Any) -> Iterator[None]:
            with self.cond:
                self.cond.wait_for(lambda: not self.stopping)
                self.held += 1
            try:
                with original(*args, **kwargs):
                    yield
            finally:
                with self.cond:
                    self.held -= 1
                    self.cond.notify_all()

        LockFiles.lock = gated  # type: ignore[method-assign,assignment]

    def stop(self) -> None:
        """SIGSTOP this process once no thread holds a lock file; none takes one until it is resumed."""
        with self.cond:
            self.stopping = True
            if not self.cond.wait_for(lambda: self.held == 0, timeout=30):
                raise RuntimeError("a store lock stayed held for 30 s: cannot stop outside it")
        # to this thread, not the process: kill(getpid()) hands SIGSTOP to the main thread, and this one
        # ran on (released the others, took a key's flock) until that one woke to stop the group
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        with self.cond:
            self.stopping = False
            self.cond.notify_all()


def _stop_once(target: Any, name: str) -> None:
    """Stop the process (SIGSTOP) at the first call of ``target.name``, holding no store lock (:class:`_FlockGate`);
    every other call (another dask thread) waits until the process is resumed, so nothing slips through while
    the stop is being delivered."""
    original = getattr(target, name)
    gate = _FlockGate()
    state = {"done": False}
    lock, resumed = threading.Lock(), threading.Event()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            first, state["done"] = not state["done"], True
        if first:
            print("paused", flush=True)
            gate.stop()
            resumed.set()
        else:
            resumed.wait()
        return original(*args, **kwargs)

    setattr(target, name, wrapper)


def _die_after(n: int) -> None:
    from zarr_dask.core import commit

    original = commit.commit_metadata
    count = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        count["n"] += 1
        if count["n"] >= n:
            os._exit(9)
        return out

    commit.commit_metadata = wrapper  # type: ignore[assignment]


def _fencing_off() -> None:
    """The control: writes and commits as before fencing (no fence in the writer tasks, no commit record)."""
    from zarr_dask.core import commit, lease
    from zarr_dask.graph import layers
    from zarr_dask.xarray_backend import to_zarr

    def unfenced_commit(store: Any, held: Any, path: str, expected: Any, new: Any, **kwargs: Any) -> Any:
        return commit.commit_metadata(store, path, expected, new, **kwargs)

    lease.AppendLease.fence = lambda self, committed: None  # type: ignore[assignment,method-assign,return-value]
    commit.mark_commit = lambda *a, **k: None  # type: ignore[assignment]
    to_zarr.mark_commit = lambda *a, **k: None  # type: ignore[assignment]
    layers.commit_held = unfenced_commit  # type: ignore[assignment]


def _dataset(value: int, rows: int, start: int) -> Any:
    import xarray as xr

    time = np.arange(start, start + rows, dtype="i8")
    return xr.Dataset(
        {
            "a": (("time", "x"), np.full((rows, 3), value, "i4")),
            "b": (("time",), np.full(rows, value, "f8")),
        },
        coords={"time": time},
    )


def main(job: dict[str, Any]) -> dict[str, Any]:
    import dask
    import dask.array as da

    import zarr_dask
    from zarr_dask.core import commit
    from zarr_dask.graph.handle import ArrayHandle

    dask.config.set(scheduler="threads")
    if job.get("nofence"):
        _fencing_off()
    if job.get("pause") == "write":
        _stop_once(ArrayHandle, "write_box")
    elif job.get("pause") == "commit":
        _stop_once(commit, "commit_metadata")
    if job.get("die_after_commits"):
        _die_after(int(job["die_after_commits"]))
    url, options, value, rows = job["url"], job.get("options"), int(job["value"]), int(job["rows"])
    data = da.full((rows, 3), value, dtype="i4", chunks=(3, 3))
    print("ready", flush=True)
    sys.stdin.readline()  # the test says when to go
    op = job["op"]
    if op == "append":
        return {"shape": list(zarr_dask.append(data, url, storage_options=options))}
    if op == "region":
        start = int(job["start"])
        zarr_dask.to_zarr(data, url, storage_options=options, region=(slice(start, start + rows),))
        return {}
    if op == "resize":
        a = zarr_dask.open_array(url, storage_options=options, mode="r+")
        a.resize((a.shape[0] + rows, 3))
        return {"shape": list(a.shape)}
    ds = _dataset(value, rows, int(job.get("start", 0)))
    if op == "xr_append":
        zarr_dask.to_zarr_dataset(ds, url, storage_options=options, append_dim="time")
    else:  # xr_create
        zarr_dask.to_zarr_dataset(ds, url, storage_options=options, mode="w-")
    return {}


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hung writer's stacks, asked for by the test
    try:
        out = {"ok": True, **main(json.loads(sys.argv[1]))}
    except Exception as exc:  # reported to the test, which checks the class
        out = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(out), flush=True)
