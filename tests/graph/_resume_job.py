"""A write to resume, importable by worker processes and by a child process the tests kill.

The upstream computation is a ``map_blocks`` of :func:`expensive`, a module-level function (so its dask name,
hence the write's run id, is the same in every process). Each call appends its block's index to a counter
file, sleeps ``ZD_RESUME_SLEEP`` seconds, and the first call from the ``ZD_RESUME_EXIT_AT``-th overall on exits
its process (a worker killed mid-write): one call per order, so the other worker's next task, or the restarted
worker's first, does not exit too (a nanny whose new worker dies while it starts closes for good). The orders
(``{"sleep": s, "slow_from": N, "slow": t}``) can make the N-th call on sleep ``t`` seconds instead.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

SHAPE = (96, 40)
CHUNKS = (8, 40)  # 12 blocks, one storage key each


def expensive(block: np.ndarray, counter: str, block_info: Any = None) -> np.ndarray:
    where = block_info[0]["chunk-location"][0] if block_info else -1
    if where < 0:  # dask's call on an empty block, for the meta: not a block
        return block * 3 + 1
    with open(counter, "a") as f:  # one line per call, whatever the process (O_APPEND)
        f.write(f"{where}\n")
    calls = len(Path(counter).read_text().splitlines())
    control = Path(counter + ".ctl")  # worker processes read their orders here: {"exit_at": N, "sleep": s}
    orders = json.loads(control.read_text()) if control.exists() else {}
    exit_at = int(os.environ.get("ZD_RESUME_EXIT_AT", orders.get("exit_at", 0)))
    if exit_at and calls >= exit_at and _first_to_exit(counter, exit_at):
        os._exit(17)
    pause = float(os.environ.get("ZD_RESUME_SLEEP", orders.get("sleep", 0)))
    if "slow_from" in orders and calls >= int(orders["slow_from"]):
        pause = max(pause, float(orders["slow"]))
    time.sleep(pause)
    return block * 3 + 1


def warm() -> None:
    """Import what a write's tasks unpickle, in a worker process (a fresh or restarted worker's first write)."""
    import contextlib
    import importlib

    for name in ("zarr_dask", "xarray", "s3fs"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _first_to_exit(counter: str, exit_at: int) -> bool:
    """Whether this call claims the order's one exit (atomically, across processes)."""
    try:
        os.close(os.open(f"{counter}.exited-{exit_at}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class Dies(Exception):
    """What :func:`flaky` raises on its N-th call."""


#: ``flaky``'s state per test: ``{"fail_at": N, "seen": [block indices computed]}``.
STATE: dict[str, dict[str, Any]] = {}


def flaky(block: np.ndarray, key: str, scale: float = 3.0, block_info: Any = None) -> np.ndarray:
    """``block * scale + 1`` (``scale=1``, no offset: the block itself), raising :class:`Dies` on the
    ``STATE[key]["fail_at"]``-th call (threads of one process; its dask name is the same each time)."""
    state = STATE[key]
    state["seen"].append(block_info[0]["chunk-location"][0] if block_info else -1)
    if len(state["seen"]) == state["fail_at"]:
        raise Dies(f"call {state['fail_at']}")
    return block * scale + 1 if scale != 1 else block


def source(counter: str, shape: tuple[int, ...] = SHAPE, chunks: tuple[int, ...] = CHUNKS) -> da.Array:
    base = da.from_array(np.arange(np.prod(shape), dtype="f8").reshape(shape), chunks=chunks)
    return base.map_blocks(expensive, counter, dtype="f8")


def dataset(counter: str, values: Any = None) -> Any:
    """A dataset to write whole: ``v`` is :func:`source` (12 blocks, one storage key each, see
    :data:`ENCODING`), ``t`` an index coordinate in memory, ``w`` a small dask variable; attributes."""
    import xarray as xr

    v = source(counter) if values is None else values
    w = da.from_array(np.linspace(0.0, 1.0, SHAPE[0]), chunks=32)
    return xr.Dataset(
        {"v": (("t", "x"), v, {"units": "K"}), "w": ("t", w)}, coords={"t": np.arange(SHAPE[0])}, attrs={"title": "job"}
    )


def tree(counter: str, make: Any = source) -> Any:
    """A tree to write whole: ``/`` (attributes), ``/a`` (:func:`dataset` of ``make(counter)``) and ``/a/b``
    (``u``: ``make(counter + "-b")``)."""
    import xarray as xr

    b = xr.Dataset({"u": (("y", "x"), make(counter + "-b"))})
    nodes = {"/": xr.Dataset(attrs={"kind": "tree"}), "/a": dataset(counter, make(counter)), "/a/b": b}
    return xr.DataTree.from_dict(nodes)


#: the encoding of :func:`dataset` (and, per node, of :func:`tree`): one storage key per block of ``v``
ENCODING = {"v": {"chunks": CHUNKS}, "w": {"chunks": (32,)}}
TREE_ENCODING = {"/a": ENCODING, "/a/b": {"u": {"chunks": CHUNKS}}}


def calls(counter: str) -> list[int]:
    """The block indices computed so far (one per call; not dask's call on an empty block for the meta)."""
    p = Path(counter)
    return [int(x) for x in p.read_text().splitlines() if int(x) >= 0] if p.exists() else []


def die_at_commit() -> None:
    """Make this process exit right after an append recorded its commit in its lease and before it made it
    (fault injection for the child process a test kills: the commit a lease takeover completes)."""
    from zarr_dask.core import commit

    make = commit.commit_metadata

    def dying(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("what") == "append":
            os._exit(18)
        return make(*args, **kwargs)

    commit.commit_metadata = dying  # type: ignore[assignment]


if __name__ == "__main__":  # python -m tests.graph._resume_job URL COUNTER [KIND]: a client the test kills
    import dask

    import zarr_dask
    from tests.graph import _resume_job  # not __main__'s copies: the same dask names as in the test process

    if os.environ.get("ZD_DASK_ARRAY") == "1":  # the test process's set-up (tests/conftest.py): dask names differ
        from dask_array.xarray import register

        register()
    if os.environ.get("ZD_DIE_AT_COMMIT") == "1":
        die_at_commit()

    kind = sys.argv[3] if len(sys.argv) > 3 else "array"  # array, append, dataset, dataset-append, tree, from-source
    with dask.config.set(scheduler="threads", num_workers=2):
        if kind == "append":
            zarr_dask.append(_resume_job.source(sys.argv[2]), sys.argv[1], resume=True)
        elif kind == "dataset-append":  # to the group tests/xarray/test_resume_dataset_append.py prepared
            zarr_dask.to_zarr_dataset(_resume_job.dataset(sys.argv[2]), sys.argv[1], append_dim="t", resume=True)
        elif kind == "dataset":  # mode="w": over an older dataset
            zarr_dask.to_zarr_dataset(_resume_job.dataset(sys.argv[2]), sys.argv[1], mode="w", encoding=ENCODING,
                                      resume=True)  # fmt: skip
        elif kind == "tree":
            zarr_dask.to_zarr_datatree(_resume_job.tree(sys.argv[2]), sys.argv[1], mode="w", encoding=TREE_ENCODING,
                                       resume=True)  # fmt: skip
        elif kind == "from-source":  # reads the stored array ZD_RESUME_SOURCE (test_resume_witness.py rewrites it)
            stored = zarr_dask.from_zarr(os.environ["ZD_RESUME_SOURCE"], chunks=CHUNKS)
            zarr_dask.to_zarr(stored.map_blocks(_resume_job.expensive, sys.argv[2], dtype="f8"), sys.argv[1],
                              chunks=CHUNKS, resume=True)  # fmt: skip
        else:
            zarr_dask.to_zarr(_resume_job.source(sys.argv[2]), sys.argv[1], chunks=CHUNKS, resume=True)
