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

``distributed`` is never imported here: a worker task can only exist if it already is.
"""

from __future__ import annotations

import sys
from typing import Any

from zarr_dask.graph.buffers import in_distributed_worker

__all__ = ["compute_options", "in_worker_task"]

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
