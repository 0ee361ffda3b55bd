"""Writes called inside a ``distributed`` worker task run in that task.

A write computed inside a task with dask's defaults would be submitted back to the cluster as a nested graph
(``get_client()`` is the default scheduler there): about ten times slower per small write, and appends from
``client.map`` tasks deadlock -- the waiting appends hold every worker thread while the lease holder's graph
waits for one. So every write of zarr_dask computes with :func:`compute_options`: outside a worker task
dask's choice as usual; inside one the threaded scheduler (the write's tasks are I/O: threads overlap the
requests, in the task's own process), unless ``dask.config`` names a local scheduler (``"sync"``,
``"threads"``, ``"processes"``, a callable or an executor), which is kept. A ``"distributed"`` setting or a
``Client`` is not honoured inside a task (a worker may inherit it from the process that started it): to
spread one large write over the cluster, call it from the client, not from a task.

A task waiting for an append lease keeps its worker thread (it does not ``secede``): the holder's write now
runs in the holder's own thread, so the wait cannot starve it, and a seceded waiter would have to ``rejoin``
-- wait for a free slot -- while holding the lease it just took.

Where tasks run is decided here too: :func:`other_processes` (a scheduler whose tasks run in other processes,
which cannot write into a store in this process's memory) and :func:`scheduler_client` (the cluster a write
computes on, for its progress bar).

``distributed`` is never imported here: a worker task can only exist if it already is.
"""

from __future__ import annotations

import sys
from typing import Any, cast

from zarr_dask.graph.buffers import in_distributed_worker

__all__ = ["compute_options", "in_worker_task", "other_processes", "scheduler_client"]

_LOCAL_NAMES = frozenset(
    {"sync", "synchronous", "single-threaded", "threads", "threading", "processes", "multiprocessing"}
)


def in_worker_task() -> bool:
    """True when called from a task running on a ``distributed`` worker (in the task's own thread).

    Examples
    --------
    >>> in_worker_task()
    False
    """
    if not in_distributed_worker():
        return False
    worker = sys.modules["distributed.worker"]
    return getattr(getattr(worker, "thread_state", None), "key", None) is not None


def _local_setting(setting: Any) -> bool:
    """True for a local scheduler setting: a name of one, an executor, a ``get`` function not a client's."""
    from concurrent.futures import Executor

    if setting is None:
        return False
    if isinstance(setting, str):
        return setting.lower() in _LOCAL_NAMES
    if isinstance(setting, Executor):
        return True
    owner = getattr(setting, "__self__", setting)  # a Client, or its bound ``get``
    return not str(type(owner).__module__).startswith("distributed")


def compute_options() -> dict[str, Any]:
    """The keywords every write passes to ``compute()`` / ``persist()``: none outside a worker task; inside
    one ``scheduler="threads"``, unless ``dask.config``'s ``scheduler`` is a local one (then none: it is
    used).

    Examples
    --------
    >>> compute_options()  # not in a worker task: dask chooses, as usual
    {}
    """
    if not in_worker_task():
        return {}
    from dask import config

    if _local_setting(config.get("scheduler", None)):
        return {}
    return {"scheduler": "threads"}


def scheduler_client(get: Any = None) -> Any | None:
    """The ``distributed.Client`` whose ``get`` is ``get`` (default: dask's scheduler in force, e.g. a client
    made or set as the default), else None (a local scheduler)."""
    if get is None:
        from dask.base import get_scheduler

        get = cast(Any, get_scheduler)()
    client = getattr(get, "__self__", None)
    return client if str(getattr(type(client), "__module__", "")).startswith("distributed") else None


def _in_process_cluster(get: Any) -> bool:
    """True when ``get`` is a distributed client's whose workers all run in this process
    (``LocalCluster(processes=False)``: their addresses are ``inproc://``)."""
    client = scheduler_client(get)
    if client is None:
        return False
    try:
        workers = client.scheduler_info().get("workers", {})
    except Exception:  # noqa: BLE001 - a closed or broken client: not an in-process cluster
        return False
    return bool(workers) and all(str(address).startswith("inproc://") for address in workers)


def other_processes() -> str | None:
    """The name of the scheduler in force if it runs tasks in other processes (``"distributed"``,
    ``"processes"``...), None for a local one (threads, synchronous, an in-process cluster)."""
    from dask import local, threaded
    from dask.base import get_scheduler

    get = cast(Any, get_scheduler)()
    if get is None or get is threaded.get or get is local.get_sync or _in_process_cluster(get):
        return None
    module = str(getattr(get, "__module__", get))
    return "distributed" if module.startswith("distributed") else "processes" if "multiprocessing" in module else module
