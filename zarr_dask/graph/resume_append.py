"""``resume=True`` for :func:`~zarr_dask.append`: what a re-run of an append that died reads to decide
whether to resume it, to report it landed, or to start it over at the array's new end.

An append's journal lives under the array, ``<array>/.zd-resume/<run id>/`` (:mod:`zarr_dask.graph.journal`),
but its run id leaves the array's shape out (the same call made again after its append landed must find it):

* ``begin``: the shape the append started from (``from``) and the shape it commits (``to``), and the token of
  the append lease it holds (``lease``). Rewritten by each resumed run with its own lease token before any
  writer task runs.
* ``from-<n>/t/<i.j...>``: the writer tasks' receipts, per starting length ``n`` along the axis (a run that
  starts over at a new end never reads the receipts of another plan).
* ``complete``: written with the new shape once the commit is made -- by the append's commit, or by whoever
  completes a commit the append recorded in its lease and did not make (:func:`~zarr_dask.core.lease.roll_forward`
  writes the records of the intent). It is the proof that the append landed. ``begin`` and ``complete`` are
  kept (two small objects): a job that is run again from its start finds every append it made landed, however
  long ago; :func:`~zarr_dask.publish_ledger` (or overwriting the array) deletes them.

A re-run takes the lease first (waiting for a killed run's lease to lapse; a run that failed in its own
process marked its lease lapsed at once: :meth:`~zarr_dask.core.lease.AppendLease.abandon`), then decides
(:func:`decide`): ``complete`` found: the append landed, return its shape; the lease it took over was its
killed run's own and the shape is still ``from``: no other append ran since, so rows beyond the shape are this
run's and its receipts are trusted; otherwise another append held the lease meanwhile (and may have written
rows beyond the shape, or committed some): the receipts are void and every row is written again, at the
array's end as it is now. The design: docs/design/resume.md, "Appends".

A dataset append (``to_zarr_dataset(..., append_dim=..., resume=True)``) keeps the same journal under its
group, with the group's length along ``append_dim`` for the shape (one axis) and its receipts per variable,
``from-<n>/<variable>/t/...`` (:func:`member`; ``decide(..., members=True)`` lists them all at once); its
commit writes ``complete`` as the array's does (zarr_dask/xarray_backend/to_zarr.py, ``_append_resumable``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask.base import tokenize

from zarr_dask.core import nodes
from zarr_dask.errors import ResumeInputsChangedError, UnsupportedFeatureError
from zarr_dask.graph import journal
from zarr_dask.graph.chunking import chunks_token
from zarr_dask.graph.journal import BEGIN, COMPLETE, Journal
from zarr_dask.graph.witness import Witness, changed, warn_unwitnessed
from zarr_dask.store import Store
from zarr_dask.store.transactions import is_transactional
from zarr_dask.store.versioned import conditional

__all__ = [
    "Decision",
    "check_inputs",
    "append_run_id",
    "begin",
    "check_resumable",
    "decide",
    "end_records",
    "log_decision",
    "member",
    "receipts_prefix",
]

_log = logging.getLogger("zarr_dask.graph")


def append_run_id(
    arr: Any, array: Any, axis: int, write_empty: bool, resume: bool | str, inputs: Witness | None = None
) -> str:
    """The run id of appending the dask array ``arr`` to ``array`` along ``axis``: a token of the computation
    (its dask name, or the run name ``resume`` gives), its blocks, the store, the path, the axis and the
    array's metadata without its shape and attributes (they change with every append, and an attribute update
    must not turn a landed append into a new one). ``inputs``: the witness of what it reads
    (:mod:`zarr_dask.graph.witness`), part of an unnamed run's id: the same computation over new data (a
    ``latest.zarr`` rewritten every day) is another append, the same data (a killed run's re-run) the same."""
    meta = array.metadata
    shape = tuple(0 if d == axis else n for d, n in enumerate(meta.shape))
    bare = dataclasses.replace(meta, shape=shape, attributes={})
    source: Any = resume if isinstance(resume, str) else arr.name
    if not isinstance(resume, str) and inputs is not None and inputs.sources:
        source = (source, inputs.token())
    return str(
        tokenize(
            "zarr_dask.resume-append", source, chunks_token(arr.chunks), tuple(arr.shape), array.store.__dask_tokenize__(),
            array.path, axis, sorted(nodes.documents(array.path, bare).items()), bool(write_empty),
        )
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What a resumable append does (:func:`decide`)."""

    top: str  #: the journal's prefix (``<array>/.zd-resume/<run id>/``)
    landed: tuple[int, ...] | None = None  #: the shape the append committed already: nothing to do
    journal: Journal | None = None  #: the receipts to trust (``resumed``) or to write (a run that starts)
    void: str | None = None  #: receipts of an earlier run that are no longer evidence (deleted when it starts)
    why: str = ""  #: why nothing is skipped although a journal was found (logged)
    inputs: Any = None  #: the witness of the inputs the journal's ``begin`` recorded (None: no journal found)


def receipts_prefix(top: str, start: int) -> str:
    """Where the receipts of a run that starts at length ``start`` along the axis live.

    Examples
    --------
    >>> receipts_prefix("a/.zd-resume/r/", 96)
    'a/.zd-resume/r/from-96/'
    """
    return f"{top}from-{int(start)}/"


def decide(
    store: Store, path: str, run: str, previous: Mapping[str, Any], shape: tuple[int, ...], axis: int,
    *, members: bool = False,
) -> Decision:  # fmt: skip
    """Read the journal of ``run`` (one batched read of ``begin`` and ``complete``; one listing of receipts
    when they are trusted) and decide, given the lease document taken over (``previous``) and the array's
    committed ``shape`` (read under the lease). Writes nothing.

    ``members``: the journal of a dataset append (``path`` its group, ``shape`` the group's length along
    ``append_dim``: one axis): its receipts are kept per variable, ``from-<n>/<name>/t/...``, with a
    variable's ``complete`` once its data landed; the trusted journal's ``done`` then holds every name under
    ``from-<n>/`` (the same one listing), which :func:`member` splits per variable."""
    top = journal.journal_prefix(path, run)
    got = store.get_many([top + BEGIN, top + COMPLETE])
    began, complete = journal.parse_record(got.get(top + BEGIN)), journal.parse_record(got.get(top + COMPLETE))
    start = began.get("from") if began is not None else None
    old = receipts_prefix(top, start[axis]) if isinstance(start, list) and len(start) == len(shape) else top
    recorded = began.get("inputs", {}) if began is not None else None
    if began is not None and complete is not None and isinstance(began.get("to"), list):
        # (receipts are left when a takeover completed the commit: deleted with the re-run's lease held)
        return Decision(top=top, landed=tuple(int(n) for n in began["to"]), void=old if old != top else None,
                        inputs=recorded)  # fmt: skip
    fresh = Journal(prefix=receipts_prefix(top, shape[axis]), run=run, resumed=False, done=frozenset(), begun=True)
    if began is None:
        return Decision(top=top, journal=fresh)
    if start == list(shape) and began.get("lease") and previous.get("owner") == began.get("lease"):
        if members:
            done = journal.listed(store, fresh.prefix)
            return Decision(top=top, journal=dataclasses.replace(fresh, resumed=True, done=done), inputs=recorded)
        digests = journal.done_tasks(store, fresh.prefix)
        return Decision(top=top, journal=dataclasses.replace(fresh, resumed=True, done=frozenset(digests), digests=digests),
                        inputs=recorded)  # fmt: skip
    if start == list(shape):
        why = (
            "another append held the array's lease since this run died (or the lease was removed), and may have "
            "written rows beyond the committed shape: its receipts are no longer evidence, every row is written again"
        )
    else:
        why = (
            f"the array grew from {start} to {list(shape)} since this run started, by other appends (this run's "
            "commit was never made: it would have left a 'complete' record); appending at the new end, every "
            "row written again"
        )
    return Decision(top=top, journal=fresh, void=old, why=why, inputs=recorded)


def begin(
    store: Store, decision: Decision, start: tuple[int, ...], end: tuple[int, ...], axis: int, lease: str,
    tasks: int, keys: int, **extra: Any,
) -> None:  # fmt: skip
    """Start (or resume) the run: delete receipts that are no longer evidence, then write ``begin`` with this
    run's lease token, before any writer task runs (with the rows it appends as its ``region`` and its
    ``tasks`` and ``keys``, for :func:`~zarr_dask.write_ledger`; ``extra``: more fields, e.g. a dataset
    append's ``kind`` and ``append_dim``)."""
    if decision.void is not None:
        store.delete_prefix(decision.void.rstrip("/"))
    assert decision.journal is not None
    region = [[int(a), int(b)] if d == axis else [0, int(b)] for d, (a, b) in enumerate(zip(start, end, strict=True))]
    record = {**extra, "run": decision.journal.run, "from": list(start), "to": list(end), "axis": axis,
              "lease": lease, "region": region, "tasks": int(tasks), "keys": int(keys), "started": time.time()}  # fmt: skip
    store.set(decision.top + BEGIN, json.dumps(record, sort_keys=True).encode())


def end_records(receipts: str, shape: tuple[int, ...]) -> tuple[dict[str, bytes], str]:
    """``(records the commit writes once made, receipts prefix it deletes then)`` for the journal whose
    receipts live under ``receipts`` (see :func:`receipts_prefix`).

    Examples
    --------
    >>> end_records("a/.zd-resume/r/from-4/", (7, 2))[0]
    {'a/.zd-resume/r/complete': b'{"to": [7, 2]}'}
    """
    top = receipts[: receipts.rstrip("/").rfind("/") + 1]
    return {top + COMPLETE: json.dumps({"to": list(shape)}).encode()}, receipts


def member(parent: Journal, name: str) -> tuple[Journal, bool]:
    """The journal of the variable ``name`` of a dataset append whose journal is ``parent`` (decided with
    ``members=True``): its receipts under ``from-<n>/<name>/`` (its ``begin`` is the group's), and whether its
    write finished (its ``complete`` found: the variable need not be written at all).

    Examples
    --------
    >>> j = Journal(prefix="g/.zd-resume/r/from-4/", run="r", resumed=True, begun=True,
    ...             done=frozenset({"v/t/0.0", "v/t/1.0", "w/complete"}))
    >>> v, finished = member(j, "v")
    >>> v.prefix, sorted(v.done), finished
    ('g/.zd-resume/r/from-4/v/', ['0.0', '1.0'], False)
    >>> member(j, "w")[1]
    True
    """
    head = f"{name}/"
    names = [n[len(head) :] for n in parent.done if n.startswith(head)]
    digests = journal.receipts(n[len(journal.RECEIPTS) + 1 :] for n in names if n.startswith(journal.RECEIPTS + "/"))
    child = dataclasses.replace(parent, prefix=parent.prefix + head, done=frozenset(digests), digests=digests, begun=True)
    return child, parent.resumed and COMPLETE in names


def check_resumable(store: Any, path: str, resume: Any, what: str = "append") -> None:
    """Refuse ``resume=`` where a resumable append cannot be (``what``: ``"append"``, ``"dataset append"``):
    an Icechunk session, a store without conditional writes (no append lease)."""
    if not isinstance(resume, bool | str):
        raise TypeError(f"resume must be True, False or a run name (str), got {resume!r}")
    a = f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
    if is_transactional(store):
        raise UnsupportedFeatureError(
            f"resume=True cannot journal {a} into an Icechunk session: what it wrote is lost with an "
            "uncommitted session; commit in parts instead, or drop resume=True", store=store.url, path=path,
        )  # fmt: skip
    if conditional(store) is None:
        raise UnsupportedFeatureError(
            f"resume=True on {a} needs a store with conditional writes: "
            "the evidence that rows beyond the committed shape are this append's is its append lease, which this "
            "store cannot hold (no other append may run between a run and its resumption). Fix: append to a local "
            "path or an object store (S3, GCS, Azure), or drop resume=True (re-running a failed append is safe: "
            "it appends after the committed shape)",
            store=store.url,
            path=path,
        )


def check_inputs(store: Store, path: str, decision: Decision, inputs: Witness, resume: bool | str) -> None:
    """Before a resumable append trusts what its journal says (landed, or its receipts): a named run whose
    journal recorded other inputs is refused (an unnamed run's id holds its inputs: another run); sources that
    cannot be witnessed are named once, at WARNING."""
    if decision.inputs is None:  # no journal of this run: a new one
        return
    run = decision.top.rstrip("/").rsplit("/", 1)[-1]
    if isinstance(resume, str):
        differ = changed(decision.inputs, inputs)
        if differ:
            raise ResumeInputsChangedError(
                f"resume={resume!r}: this append's journal recorded other inputs than it reads now "
                f"({', '.join(differ[:3])}): the run of that name appended (or began appending) other data. Fix: "
                f"give this append another run name (resume='{resume}-2'), or resume=True (its inputs name the run)",
                store=store.url,
                path=path,
            )
    if decision.landed is not None or (decision.journal is not None and decision.journal.resumed):
        warn_unwitnessed(inputs, store, path, run)


def log_decision(store: Store, path: str, decision: Decision, what: str = "shape") -> None:
    """The INFO line of a resumable append that does not simply start or resume (it landed, or starts over);
    ``what`` names ``landed`` (a dataset append's: its group's length along ``append_dim``)."""
    if decision.landed is not None:
        _log.info("%s /%s: this append landed already (%s %s): not appended again", store.url, path, what,
                  list(decision.landed))  # fmt: skip
    elif decision.why:
        _log.info("%s /%s: not resuming this append: %s", store.url, path, decision.why)
