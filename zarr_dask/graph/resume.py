"""``resume=True`` for :func:`~zarr_dask.to_zarr`: the target and journal of a resumable write, and its plan
(what a resumed run skips). The journal's keys and costs: :mod:`zarr_dask.graph.journal`; the design:
docs/design/resume.md."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from zarr_dask.core.lease import Fence
from zarr_dask.errors import ContainsArrayError, ResumeInputsChangedError, UnsupportedFeatureError
from zarr_dask.graph import journal, witness
from zarr_dask.graph.journal import Journal
from zarr_dask.graph.plan import WritePlan
from zarr_dask.graph.target import Target, resolve_target
from zarr_dask.store.transactions import is_transactional

__all__ = ["journaled_plan", "resumable_target"]

_log = logging.getLogger("zarr_dask.graph")


def journaled_plan(plan: WritePlan, target: Target, resumed: Journal) -> tuple[WritePlan, Journal]:
    """The plan of a resumable write and its journal: a resumed one skips the tasks whose receipts still
    stand (one listing of the array: :func:`~zarr_dask.graph.witness.standing`); a new one writes its
    journal's ``begin`` record first (deleting a journal of this run with other inputs)."""
    h = target.handle
    if not resumed.resumed:
        if resumed.begun:
            return plan, resumed
        if resumed.restart:
            h.store.delete_prefix(resumed.prefix.rstrip("/"))
        journal.begin(h.store, resumed.prefix, resumed.run, plan.region, plan.tasks, plan.keys, resumed.witness)
        return plan, resumed
    resumed, _ = witness.standing(h.store, h.path, plan, resumed, h.io.chunk_key)
    plan = plan.skipping(resumed.done)
    _log.info(
        "%s /%s: resuming run %s: %d of %d writer tasks (%d of %d keys) finished already, not run again",
        h.store.url, h.path, resumed.run, plan.skipped_tasks, plan.tasks, plan.skipped_keys, plan.keys,
    )  # fmt: skip
    return plan, resumed


def resumable_target(
    arr: Any, url: Any, component: str | None, storage_options: Mapping[str, Any] | None, overwrite: bool,
    region: Any, kwargs: Mapping[str, Any], fence: Fence | None, resume: bool | str,
) -> tuple[Target, Journal]:  # fmt: skip
    """The target and journal of ``resume=True``: a create whose first run created the array (and wrote its
    journal) resumes into it; an overwrite resumes only while the array's documents are still the ones its
    first run wrote (else it starts over: deletes and writes everything again). Either resumes only while
    its inputs are the ones its first run read (:mod:`zarr_dask.graph.witness`): otherwise it starts over, or,
    for a named run, raises :class:`~zarr_dask.errors.ResumeInputsChangedError`. A resumed create whose
    metadata was deleted meanwhile writes it again (``Journal.metadata``).

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.ones((4, 2), chunks=2)
    >>> target, found = resumable_target(x, "memory://resume-doc", None, None, False, None, {}, None, True)
    >>> target.action, found.resumed, found.prefix.startswith(".zd-resume/")
    ('create', False, True)
    """
    if not isinstance(resume, bool | str):
        raise TypeError(f"resume must be True, False or a run name (str), got {resume!r}")
    try:
        target = resolve_target(arr, url, component, storage_options, overwrite, region, kwargs, fence)
    except ContainsArrayError as exc:  # created by a first run of this write?
        target = resolve_target(arr, url, component, storage_options, True, region, kwargs, fence)
        _refuse_transactional(target)
        found, record = journal.open_journal(arr, target, resume)
        if not found.resumed:
            raise _no_journal(exc, target, found) from None
        if not documents_unchanged(target):
            raise exc from None
        found = _check_inputs(arr, target, found, record, resume, starts_over="create")
        if not found.resumed:  # the inputs changed: this job's own array is written again from the start
            return target, found
        return dataclasses.replace(target, action="create"), found
    _refuse_transactional(target)
    found, record = journal.open_journal(arr, target, resume)
    if found.resumed and target.action == "overwrite" and not documents_unchanged(target):
        found = dataclasses.replace(found, resumed=False, done=frozenset(), digests={})  # changed: overwrite again
    found = _check_inputs(arr, target, found, record, resume, starts_over=target.action)
    if found.resumed and target.action == "create":  # its journal is here, its metadata is not: written again
        found = dataclasses.replace(found, metadata=True)
    return target, found


def _refuse_transactional(target: Target) -> None:
    """The documented refusal of an Icechunk session, before any journal I/O."""
    if is_transactional(target.handle.store):
        raise UnsupportedFeatureError(
            "resume=True cannot journal a write into an Icechunk session: what it wrote is lost with an uncommitted "
            "session; commit in parts instead (one session per part), or drop resume=True",
            store=target.handle.store.url,
            path=target.handle.path,
        )


def _check_inputs(
    arr: Any, target: Target, found: Journal, record: Mapping[str, Any] | None, resume: bool | str, starts_over: str
) -> Journal:
    """``found`` with the witness of this run's inputs; a resumed journal whose first run read other inputs
    starts over (``resumed=False``, ``restart``), or raises for a named run that would not start over anyway
    (``starts_over``: the target's action; an overwrite starts over)."""
    h = target.handle
    seen = witness.of(arr, target=h)
    found = dataclasses.replace(found, witness=seen.record())
    if not found.resumed:
        return found
    differ = witness.changed(None if record is None else record.get("inputs"), seen)
    if not differ:
        witness.warn_unwitnessed(seen, h.store, h.path, found.run)
        return found
    named = ", ".join(differ[:3]) + (", ..." if len(differ) > 3 else "")
    if isinstance(resume, str) and starts_over != "overwrite":
        raise ResumeInputsChangedError(
            f"resume={resume!r} found this run's journal, but what it reads changed since that run started "
            f"({named}): its finished tasks were computed from other data, and resuming would mix the two. Fix: "
            "pass overwrite=True to write it again from the start, or give this run another name "
            f"(resume='{resume}-2')",
            store=h.store.url,
            path=h.path,
        )
    _log.info(
        "%s /%s: not resuming run %s: its inputs changed since it started (%s); writing everything again",
        h.store.url, h.path, found.run, named,
    )  # fmt: skip
    return dataclasses.replace(found, resumed=False, done=frozenset(), digests={}, restart=True)


def _no_journal(exc: ContainsArrayError, target: Target, found: Journal) -> ContainsArrayError:
    """The error of ``resume=True`` on an existing array that holds no journal of this write."""
    h = target.handle
    others = journal.other_runs(h.store, h.path, found.run)
    why = (
        f"it holds the journal(s) of other run(s) ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): "
        "this call is not the one that created it (another computation, chunking or target, or dask "
        "names that differ between the two runs: random names, other installed dask packages); name the run "
        "with resume='<name>' in both"
        if others
        else "it holds no journal of a resumable write (it was not created by a write with resume=True)"
    )
    return ContainsArrayError(
        f"resume=True found an array here but cannot resume into it: {why}. Fix: pass overwrite=True to write "
        "it again from the start (deletes its data), or open it instead",
        store=h.store.url,
        path=h.path,
    )


def documents_unchanged(target: Target) -> bool:
    """True when the array's stored documents are the ones this write writes (one batched read)."""
    docs = target.documents
    return target.handle.store.get_many(list(docs)) == docs
