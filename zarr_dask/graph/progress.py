"""Computing a write with a progress bar on stderr: dask's text bar on a local scheduler, ``distributed``'s on
a cluster (whose text bar prints to stdout: redirected, so stdout stays the caller's, e.g. ``--json``).

One room for ``progress=`` of :func:`~zarr_dask.to_zarr`, :func:`~zarr_dask.to_zarr_dataset` (and
``to_zarr_datatree``) and ``zarr-dask convert --progress``. The note printed first says what the run does,
e.g. how much of a resumed write an earlier run finished (the bar itself counts only the tasks that run).

Examples
--------
>>> import dask
>>> run(dask.delayed(sum)([1, 2]), progress=False)
3
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import TYPE_CHECKING, Any

from zarr_dask.graph.in_task import scheduler_client

if TYPE_CHECKING:
    from zarr_dask.graph.journal import Journal
    from zarr_dask.graph.plan import WritePlan
    from zarr_dask.graph.target import Target

__all__ = ["check_progress", "distributed_client", "resumed_note", "run", "write_note"]


def check_progress(progress: bool, compute: bool) -> None:
    """Refuse ``progress=True`` with ``compute=False`` (the bar is of a write computed now; the caller who
    computes later shows their own)."""
    if progress and not compute:
        raise TypeError(
            "progress=True shows the bar of a write computed now, but compute=False returns it uncomputed; compute "
            "it under dask.diagnostics.ProgressBar() (or distributed.progress on a cluster), or pass compute=True"
        )


def distributed_client(scheduler: Any = None) -> Any | None:
    """The ``distributed.Client`` that computes: ``scheduler`` itself if it is one, else the default scheduler's
    (a client made or set as default), else None (a local scheduler)."""
    if scheduler is not None:
        return None if isinstance(scheduler, str) else scheduler
    return scheduler_client()


def run(collection: Any, *, progress: bool, note: str | None = None, persist: bool = False,
        scheduler: Any = None, **kwargs: Any) -> Any:  # fmt: skip
    """``collection.compute(**kwargs)`` (``persist``: ``.persist``), with ``progress`` a bar on stderr after
    ``note``. ``scheduler``: a ``distributed.Client`` or a local scheduler's name (default: dask's choice)."""
    client = distributed_client(scheduler)
    if client is None and scheduler is not None:
        kwargs["scheduler"] = scheduler
    if not progress:
        if client is not None and scheduler is not None:
            return client.compute(collection).result() if not persist else client.persist(collection)
        return collection.persist(**kwargs) if persist else collection.compute(**kwargs)
    if note:
        print(note, file=sys.stderr, flush=True)
    if client is not None:
        distributed: Any = importlib.import_module("distributed")
        submitted = client.persist(collection) if persist else client.compute(collection)
        with contextlib.redirect_stdout(sys.stderr):
            distributed.progress(submitted)
        print(file=sys.stderr, flush=True)
        return submitted if persist else submitted.result()
    diagnostics: Any = importlib.import_module("dask.diagnostics")
    with diagnostics.ProgressBar(out=sys.stderr, dt=0.5):
        return collection.persist(**kwargs) if persist else collection.compute(**kwargs)


def resumed_note(where: str, run_id: str, skipped_tasks: int, tasks: int, skipped_keys: int, keys: int) -> str:
    """The line a resumed write prints above its progress bar.

    Examples
    --------
    >>> resumed_note("memory://a /x", "abc", 6, 12, 6, 12)
    'memory://a /x: resuming run abc: 6 of 12 writer tasks (6 of 12 keys) finished by an earlier run, skipped'
    """
    return (
        f"{where}: resuming run {run_id}: {skipped_tasks} of {tasks} writer tasks ({skipped_keys} of {keys} keys) "
        "finished by an earlier run, skipped"
    )


def write_note(target: Target, plan: WritePlan, resumed: Journal | None) -> str:
    """The line above a write's progress bar: what it writes, or how much of it an earlier run finished."""
    where = f"{target.handle.store.url} /{target.handle.path}"
    if resumed is not None and resumed.resumed:
        return resumed_note(where, resumed.run, plan.skipped_tasks, plan.tasks, plan.skipped_keys, plan.keys)
    run = f" (resumable run {resumed.run})" if resumed is not None else ""
    return f"{where}: writing {plan.tasks} writer tasks ({plan.keys} keys){run}"
