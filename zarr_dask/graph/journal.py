"""The run journal of a resumable write (``resume=True``): which writer tasks of *this* write have finished.

A write's **run id** is a deterministic token of what it writes: the dask array's name (dask names are
tokens of the whole upstream computation), its block sizes, the target store, the array path, the region,
the array's metadata documents and the write options. The same call made again gets the same id; a changed
computation, target or layout gets another one, and so starts over.

The journal lives beside the array's chunks, under ``<array>/.zd-resume/<run id>/`` (hidden: never a chunk
key, never listed as a node):

* ``begin``: a small JSON record written once the write's preparation is done (an overwrite's old data
  deleted, the metadata written) and before any writer task runs: its region and number of writer tasks.
* ``t/<i.j...>``: one empty **receipt** per writer task, written by the task itself *after* every key it owns
  has landed (whole objects, or renamed files: a key present is complete). A receipt is the only evidence
  that a key was written by this run; a key an older write left has none, so it is written again.
* ``complete``: a region write's end record (kept for the fan-out ledger until :func:`publish`).

Costs: one listing of the run's receipts when a write starts (one request per 1000 receipts on S3), one
small write per writer task (a task covers one or more keys), one record at the start; a whole-array write
deletes its journal once it has finished (a listing and one batched delete); a region write replaces its
receipts with ``complete``. See docs/design/resume.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store

__all__ = [
    "JOURNAL_DIR",
    "Journal",
    "begin",
    "close",
    "done_tasks",
    "journal_prefix",
    "listed",
    "other_runs",
    "parse_record",
    "read_begin",
    "receipt_key",
    "record",
]

JOURNAL_DIR = ".zd-resume"
BEGIN = "begin"
COMPLETE = "complete"
RECEIPTS = "t"


def journal_prefix(path: str, run: str) -> str:
    """The key prefix of the journal of run ``run`` of the array at ``path``.

    Examples
    --------
    >>> journal_prefix("g/a", "abc")
    'g/a/.zd-resume/abc/'
    >>> journal_prefix("", "abc")
    '.zd-resume/abc/'
    """
    return f"{key_prefix(path)}{JOURNAL_DIR}/{run}/"


def task_name(index: Sequence[int]) -> str:
    """The receipt name of the writer task at ``index`` (its position in the plan's task grid)."""
    return ".".join(str(int(i)) for i in index) or "0"


def receipt_key(prefix: str, index: Sequence[int]) -> str:
    """The receipt key of a writer task.

    Examples
    --------
    >>> receipt_key("a/.zd-resume/r/", (1, 0))
    'a/.zd-resume/r/t/1.0'
    """
    return f"{prefix}{RECEIPTS}/{task_name(index)}"


@dataclass(frozen=True, kw_only=True)
class Journal:
    """A resumable write's journal, as found when the write started (nothing in it is a live object)."""

    prefix: str  #: where its keys live (see :func:`journal_prefix`)
    run: str  #: the run id
    resumed: bool  #: True when a journal of this run was found (the write is a resumed one)
    done: frozenset[str]  #: names of the writer tasks whose receipts were found (see :func:`task_name`)
    begun: bool = False  #: its ``begin`` record is written by its caller (an append's: graph/resume_append.py)
    #: per finished task, the digest its receipt carries (the sizes of its keys: :mod:`zarr_dask.graph.witness`)
    digests: Mapping[str, str] = field(default_factory=dict)
    witness: Mapping[str, str] | None = None  #: the witness of the inputs written in ``begin`` (a new run)
    restart: bool = False  #: a journal of this run with other inputs was found: its receipts are deleted first
    metadata: bool = False  #: resumed, but the array's metadata is missing (deleted since): written again


def read_begin(store: Store, prefix: str) -> dict[str, Any] | None:
    """The ``begin`` record of the journal at ``prefix``, or None when there is none (or it is unreadable)."""
    return parse_record(store.get(prefix + BEGIN))


def parse_record(raw: bytes | None) -> dict[str, Any] | None:
    """A journal record (a JSON object) from its stored bytes, or None when missing or unreadable."""
    if raw is None:
        return None
    try:
        record = json.loads(bytes(raw))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def split_receipt(name: str) -> tuple[str, str]:
    """``(task name, digest)`` of a receipt's name (``"1.0-<digest>"``; ``""``: a receipt without one).

    Examples
    --------
    >>> split_receipt("1.0-0123456789ab"), split_receipt("2.0")
    (('1.0', '0123456789ab'), ('2.0', ''))
    """
    task, _, digest = name.partition("-")
    return task, digest


def receipts(names: Iterable[str]) -> dict[str, str]:
    """``{task name: digest}`` of receipt names."""
    return dict(split_receipt(n) for n in names)


def done_tasks(store: Store, prefix: str) -> dict[str, str]:
    """The writer tasks with a receipt under ``prefix`` and their receipts' digests (one listing)."""
    top = prefix + RECEIPTS + "/"
    return receipts(k[len(top) :] for k in store.list_prefix(top.rstrip("/")) if k.startswith(top))


def listed(store: Store, prefix: str) -> frozenset[str]:
    """The names of every key under ``prefix`` (relative to it; one listing)."""
    return frozenset(k[len(prefix) :] for k in store.list_prefix(prefix.rstrip("/")) if k.startswith(prefix))


def other_runs(store: Store, path: str, run: str) -> list[str]:
    """The run ids of the journals stored under the array at ``path`` other than ``run`` (one listing)."""
    top = f"{key_prefix(path)}{JOURNAL_DIR}/"
    found = {k[len(top) :].split("/", 1)[0] for k in store.list_prefix(top.rstrip("/")) if k.startswith(top)}
    return sorted(found - {run, ""})


def begin(
    store: Store, prefix: str, run: str, region: Iterable[slice], tasks: int, keys: int,
    inputs: Mapping[str, str] | None = None,
) -> None:  # fmt: skip
    """Write the ``begin`` record (after the write's preparation, before any writer task); ``inputs``: the
    witness of what the run reads (:mod:`zarr_dask.graph.witness`)."""
    record = {
        "inputs": dict(inputs or {}),
        "run": run,
        "region": [[int(s.start or 0), int(s.stop)] for s in region],
        "tasks": int(tasks),
        "keys": int(keys),
        "started": time.time(),
    }
    store.set(prefix + BEGIN, json.dumps(record, sort_keys=True).encode())


def record(store: Store, key: str) -> None:
    """Write one receipt (an empty object): every key of its task has landed."""
    store.set(key, b"")


def close(store: Store, prefix: str, keep: bool) -> None:
    """End a journal after its write succeeded: delete it, or (``keep``: a region write, for the fan-out
    ledger) replace its receipts with one ``complete`` record."""
    if not keep:
        store.delete_prefix(prefix.rstrip("/"))
        return
    store.set(prefix + COMPLETE, json.dumps({"finished": time.time()}).encode())
    store.delete_prefix((prefix + RECEIPTS).rstrip("/"))


def run_id(arr: Any, target: Any, resume: bool | str) -> str:
    """The run id of writing the dask array ``arr`` into ``target`` (a :class:`~zarr_dask.graph.target.Target`):
    a token of the computation (``arr.name``, or the name ``resume`` gives), its blocks, the store, the path,
    the region, the array's metadata and the write options -- never of the action, so a resumed create (which
    finds the array its first run created) has the run id of that first run."""
    from dask.base import tokenize

    from zarr_dask.core import nodes
    from zarr_dask.graph.chunking import chunks_token

    h = target.handle
    source = resume if isinstance(resume, str) else arr.name
    documents = sorted(nodes.documents(h.path, h.metadata).items())
    whole = target.action in ("create", "overwrite")
    return str(
        tokenize(
            "zarr_dask.resume", source, chunks_token(arr.chunks), h.store.__dask_tokenize__(), h.path,
            target.offsets, tuple(arr.shape), documents, h.write_empty_chunks, whole,
        )
    )  # fmt: skip


def open_journal(arr: Any, target: Any, resume: bool | str) -> tuple[Journal, dict[str, Any] | None]:
    """The journal of this write as stored now: a resumed one (its ``begin`` record found: its receipts
    listed) or a new one (nothing found; :func:`begin` writes it once the write is prepared); and the
    ``begin`` record found (whose ``inputs`` the caller checks: :mod:`zarr_dask.graph.witness`)."""
    run = run_id(arr, target, resume)
    store = target.handle.store
    prefix = journal_prefix(target.handle.path, run)
    found = read_begin(store, prefix)
    if found is None or found.get("run") != run:
        return Journal(prefix=prefix, run=run, resumed=False, done=frozenset()), None
    digests = done_tasks(store, prefix)
    return Journal(prefix=prefix, run=run, resumed=True, done=frozenset(digests), digests=digests), found
