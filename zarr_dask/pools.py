"""``release_memory()``: empty every pool zarr_dask keeps in this process.

zarr_dask keeps memory between calls to be fast: the thread pool of direct reads and writes and the reader
threads of pooled dask computes (each thread holding a read arena, ``read_arena`` knob, and scratch buffers
per chunk shape), and the pool of idle dask-block buffers (``block_pool`` knob). On a long-lived process -- a
notebook, a ``distributed`` worker -- call :func:`release_memory` between workloads to give it all back::

    client.run(zarr_dask.release_memory)   # on every worker of a cluster

Call it between computations, not during one: the pools are rebuilt on the next use.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["release_memory"]


def release_memory() -> dict[str, int]:
    """Empty every pool of this process; returns what was released.

    The I/O and reader thread pools are shut down (their threads end, and with them their read arenas and
    scratch buffers), the idle dask-block buffers are dropped, this thread's own arena and scratch buffers
    too, the cache of parsed array metadata (with the codec pipelines it holds) is emptied, and glibc is
    asked to return freed memory to the system.

    Returns
    -------
    dict
        ``{"thread_pools": n, "block_pool_bytes": n}``: the pools shut down and the idle block bytes dropped.

    Examples
    --------
    >>> import zarr_dask
    >>> sorted(zarr_dask.release_memory())
    ['block_pool_bytes', 'thread_pools']
    """
    from zarr_dask.core import batches, chunk_io, nodes
    from zarr_dask.store.arena import release_read_arena

    pools = batches.shutdown_pool()
    freed = 0
    buffers = sys.modules.get("zarr_dask.graph.buffers")
    if buffers is not None:
        freed = int(buffers.POOL.idle_bytes)
        buffers.POOL.clear()
    chunk_io.release_scratch()
    release_read_arena()
    nodes.clear_parse_cache()
    _malloc_trim()
    return {"thread_pools": pools, "block_pool_bytes": freed}


def _malloc_trim() -> None:
    try:
        import ctypes

        libc: Any = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
