"""``resume=True`` for whole-dataset and datatree writes: the dataset journal (issue 25).

A whole-dataset write (``to_zarr_dataset`` with ``mode="w"``, ``"w-"``, ``"a"`` or ``"r+"``, no ``region=``
nor ``append_dim=``; ``to_zarr_datatree`` likewise) prepares its hierarchy first (``mode="w"`` deletes the
group, then groups, arrays, attributes and consolidated metadata are written), then writes the data. Run again
after a failure, it must neither delete what its first run wrote nor take an older dataset at the same place
for its own. The evidence is one record per run under the written group (the tree's root group):

``<group>/.zd-resume/<run id>/begin``
    written once the hierarchy is prepared, before any data task. Its **run id** is a token of the call: the
    dataset (every variable's dask name, or a hash of data held in memory, dimensions and attributes; a
    tree: every node's), the store, the group, the mode and the options (``resume="a name"`` replaces the
    dataset's part, for graphs with random names). The record holds the **plan token** (every group and
    array document this write writes, each variable's action, region and dask name) and the nodes the first
    run **created** (absent before it).

A run whose ``begin`` is found plans again from the store as it was before its first run (the nodes the
record lists as created taken out of the store's state), and resumes only if that plan has the recorded plan
token, no foreign node appeared in a replaced group, and the stored documents are still the ones the plan
writes (one batched read). A resumed run skips the deletion and the metadata (all stored already) and writes
each dask variable with :func:`~zarr_dask.to_zarr`'s ``resume``, whose own journal (under each array) skips
the writer tasks that finished (a variable whose array journal holds ``complete`` is not written at all);
variables held in memory are small and written again. Anything else starts
over: ``mode="w"`` deletes and writes everything, ``"w-"`` then fails (the group exists and is not this
write's to resume), ``"a"`` writes every variable again.

Since ``begin`` follows the deletion of ``mode="w"``, every key under the group is this run's (or absent) once
it exists: a key an older dataset left is never taken for this run's. A fresh run of another mode deletes the
array journals under the arrays it writes before ``begin`` (a stale journal of a dead run that nobody
resumed must not pass for this run's).

Costs: a new run: one GET (``begin`` absent) and one PUT (``begin``), plus one listing per written dask
variable outside ``mode="w"`` (stale array journals); a resumed run: one GET, the state walk every write makes,
one batched GET of the documents, one listing per dask variable (finished ones). Clean-up: the final task of
the write deletes the array journals and then ``begin`` (one listing and batched delete each). See
docs/design/resume.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zarr_dask.core import nodes
from zarr_dask.errors import ResumeInputsChangedError, UnsupportedFeatureError, ZarrDaskError
from zarr_dask.graph import journal, witness
from zarr_dask.spec.paths import key_prefix, parent_paths
from zarr_dask.store import Store
from zarr_dask.store.transactions import is_transactional
from zarr_dask.xarray_backend.write_plan import GroupPlan, StoreState

__all__ = [
    "DatasetJournal",
    "append_axis",
    "append_run_id",
    "cleanup_prefixes",
    "finished_variables",
    "group_length",
    "prepare",
    "run_id",
    "start",
]

_log = logging.getLogger("zarr_dask.xarray")

Plans = tuple[StoreState, list[GroupPlan]]


@dataclass(frozen=True, kw_only=True)
class DatasetJournal:
    """A whole-dataset write's journal as found when it started."""

    prefix: str  #: ``<group>/.zd-resume/<run id>/``
    run: str  #: the run id
    resumed: bool  #: True when this run's ``begin`` was found and the hierarchy is still the one it prepared
    record: Mapping[str, Any] = field(default_factory=dict)  #: the ``begin`` record (written by :func:`start`)


def run_id(identity: tuple[Any, ...], store: Store, path: str, resume: bool | str) -> str:
    """The run id of a whole-dataset (or tree) write: a token of ``identity`` (the data first -- the dataset,
    or a tree's ``(node path, dataset)`` pairs; a run name replaces it -- then the options), the store and
    the group.

    Examples
    --------
    >>> import dask.array as da, xarray as xr
    >>> from zarr_dask.store import MemoryStore
    >>> ds, store = xr.Dataset({"v": ("t", da.arange(4, chunks=2))}), MemoryStore()
    >>> run_id((ds, "w"), store, "", True) == run_id((ds, "w"), store, "", True)  # the same call again
    True
    >>> run_id((ds, "w"), store, "", True) == run_id((ds * 2, "w"), store, "", True)  # another computation
    False
    """
    from dask.base import tokenize

    first = identity[0]
    content = [(p, _content(d)) for p, d in first] if isinstance(first, list) else _content(first)
    data = (resume, *identity[1:]) if isinstance(resume, str) else (content, *identity[1:])
    return str(tokenize("zarr_dask.resume.dataset", data, store.__dask_tokenize__(), path))


def _content(ds: Any) -> Any:
    """What identifies a dataset's content, without its pandas indexes (tokenizing one imports dask.dataframe,
    which needs pyarrow with the oldest dask we support): per variable its name, dimensions, attributes and
    its dask name, or its values as a NumPy array; and the dataset's attributes."""
    import numpy as np

    def attrs(a: Mapping[Any, Any]) -> list[tuple[str, str]]:
        return sorted((str(k), repr(v)) for k, v in a.items())

    variables = sorted(ds.variables.items(), key=lambda kv: str(kv[0]))
    return attrs(ds.attrs), [
        (str(name), tuple(map(str, v.dims)), attrs(v.attrs), v.data.name if _is_dask(v.data) else np.asarray(v.values))
        for name, v in variables
    ]


def _is_dask(data: Any) -> bool:
    return hasattr(data, "dask") and hasattr(data, "chunks")


def plan_token(plans: list[GroupPlan], resume: bool | str) -> str:
    """A token of everything the plans write: group and array documents, actions, regions, data."""
    import numpy as np
    from dask.base import tokenize

    def data(w: Any) -> Any:
        if isinstance(resume, str):
            return f"{resume}/{w.path}"
        return w.data.name if _is_dask(w.data) else tokenize(np.asarray(w.data))  # (never a pandas index: see _content)

    parts = [
        (
            p.path, p.replace, p.exclusive,
            sorted(nodes.documents(p.path, p.group).items()) if p.group is not None else None,
            [
                (w.path, w.action, sorted(nodes.documents(w.path, w.metadata).items()),
                 [(s.start, s.stop, s.step) for s in w.region or ()], w.write_empty_chunks, data(w))
                for w in p.writes
            ],
        )
        for p in plans
    ]  # fmt: skip
    return str(tokenize("zarr_dask.resume.plan", parts))


def _absent(state: StoreState, path: str) -> bool:
    meta = state.root if not path else state.nodes.get(path)
    return meta is None or isinstance(meta, nodes.ImplicitGroup)


def created_nodes(state: StoreState, plans: list[GroupPlan]) -> list[str]:
    """The nodes the plans create (absent, or implicit, in ``state``): missing parents, groups, new arrays."""
    out: set[str] = set()
    for plan in plans:
        out.update(q for q in parent_paths(plan.path) if _absent(state, q))
        if plan.group is not None and _absent(state, plan.path):
            out.add(plan.path)
        out.update(w.path for w in plan.writes if w.action == "create")
    return sorted(out)


def before_first_run(state: StoreState, record: Mapping[str, Any]) -> StoreState:
    """The store's state as the first run saw it: ``state`` without the nodes that run created."""
    created = set(record.get("created", ()))
    return dataclasses.replace(
        state,
        root=None if "" in created else state.root,
        nodes={k: v for k, v in state.nodes.items() if k not in created},
        zarr_format=record.get("zarr_format"),
        has_consolidated=bool(record.get("has_consolidated")),
    )


def _foreign_nodes(state: StoreState, plans: list[GroupPlan]) -> list[str]:
    """Nodes in a group a plan replaces that the plans do not write (someone else's, added since)."""
    ours = {p.path for p in plans} | {w.path for p in plans for w in p.writes}
    ours |= {q for path in list(ours) for q in parent_paths(path)}
    prefixes = [key_prefix(p.path) for p in plans if p.replace]
    return sorted(k for k in state.nodes if k not in ours and any(k.startswith(x) for x in prefixes))


def check_resumable(store: Store) -> None:
    """Refuse an Icechunk session (what a dead process wrote into it is lost with it)."""
    if is_transactional(store):
        raise UnsupportedFeatureError(
            "resume=True cannot journal a write into an Icechunk session: what it wrote is lost with an uncommitted "
            "session; commit in parts instead (one session per part), or drop resume=True",
            store=store.url,
        )


def prepare(
    store: Store,
    path: str,
    run: str,
    plan: Callable[[Callable[[StoreState], StoreState]], Plans],
    documents: Callable[[StoreState, list[GroupPlan]], dict[str, bytes]],
    resume: bool | str,
    identity: Any = None,
) -> tuple[StoreState, list[GroupPlan], DatasetJournal]:
    """Plan a resumable whole-dataset write: resumed (this run's ``begin`` found, the hierarchy the one it
    prepared, its inputs the ones it read) or fresh. ``plan(adjust)`` loads the store's state, applies
    ``adjust`` and plans; ``documents(state, plans)`` are the documents the write prepares before its data;
    ``identity``: what the run id is a token of (its datasets' dask variables are witnessed:
    :mod:`zarr_dask.graph.witness`; a named run whose inputs changed is refused unless ``mode="w"``)."""
    check_resumable(store)
    prefix = journal.journal_prefix(path, run)
    record = journal.read_begin(store, prefix)
    inputs = witness.of(*dask_data(identity))
    if record is not None and record.get("run") == run:
        _check_inputs(store, path, run, record, inputs, resume, identity)
        found = _resumable(store, plan, documents, record, resume, inputs)
        if not isinstance(found, str):
            return *found, DatasetJournal(prefix=prefix, run=run, resumed=True, record=record)
        why = found
        _log.info("%s /%s: run %s of this write found, but %s: starting over", store.url, path, run, why)
    elif record is None and (others := journal.other_runs(store, path, run)):
        _log.info(
            "%s /%s: resume found no journal of run %s, only of other run(s) (%s): the dataset, its encoding or "
            "the write's options differ from theirs, so this write starts from the beginning (resume='<name>' "
            "names a run across such changes)", store.url, path, run, ", ".join(others[:3]) + (", ..." if len(others) > 3 else ""),
        )  # fmt: skip
    state, plans = plan(lambda s: s)
    record = {
        "run": run, "kind": "dataset", "plan": plan_token(plans, resume), "created": created_nodes(state, plans),
        "zarr_format": state.zarr_format, "has_consolidated": state.has_consolidated, "region": [],
        "tasks": sum(1 for p in plans for w in p.writes if _is_dask(w.data)), "inputs": inputs.record(),
    }  # fmt: skip
    return state, plans, DatasetJournal(prefix=prefix, run=run, resumed=False, record=record)


def dask_data(identity: Any) -> list[Any]:
    """The dask arrays of the dataset (or the tree's datasets) a run id is a token of."""
    if not identity:
        return []
    first = identity[0]
    datasets = [d for _, d in first] if isinstance(first, list) else [first]
    return [v.data for d in datasets for v in d.variables.values() if _is_dask(v.data)]


def _check_inputs(
    store: Store, path: str, run: str, record: Mapping[str, Any], inputs: witness.Witness, resume: bool | str,
    identity: Any,
) -> None:  # fmt: skip
    """A named run whose first run read other inputs is refused, unless it replaces the group (``mode="w"``:
    it starts over); sources that cannot be witnessed are named once, at WARNING."""
    differ = witness.changed(record.get("inputs", {}), inputs)
    if not differ:
        witness.warn_unwitnessed(inputs, store, path, run)
        return
    if isinstance(resume, str) and identity[1] != "w":
        raise ResumeInputsChangedError(
            f"resume={resume!r} found this run's journal, but what it reads changed since that run started "
            f"({', '.join(differ[:3])}): its finished variables and tasks were computed from other data, and "
            f"resuming would mix the two. Fix: pass mode='w' to write it again from the start, or give this run "
            f"another name (resume='{resume}-2')",
            store=store.url,
            path=path,
        )


def _resumable(
    store: Store,
    plan: Callable[[Callable[[StoreState], StoreState]], Plans],
    documents: Callable[[StoreState, list[GroupPlan]], dict[str, bytes]],
    record: Mapping[str, Any],
    resume: bool | str,
    inputs: witness.Witness,
) -> Plans | str:
    """The plans of the found run if it can be resumed, else why not."""
    if differ := witness.changed(record.get("inputs", {}), inputs):
        return f"its inputs changed since ({', '.join(differ[:3])})"
    try:
        state, plans = plan(lambda s: before_first_run(s, record))
    except ZarrDaskError as e:
        return f"the store changed since ({e.problem})"
    if record.get("plan") != plan_token(plans, resume):
        return "its plan changed (another encoding, layout or store state)"
    if foreign := _foreign_nodes(state, plans):
        return f"nodes appeared meanwhile in the group it replaces ({', '.join(foreign[:3])})"
    docs = documents(state, plans)
    if store.get_many(list(docs)) != docs:
        return "its metadata documents were changed meanwhile"
    return state, plans


def _array_journals(path: str) -> str:
    return f"{key_prefix(path)}{journal.JOURNAL_DIR}"


def start(store: Store, found: DatasetJournal, plans: list[GroupPlan]) -> None:
    """Once the hierarchy is prepared, before any data task: a fresh run deletes stale array journals under
    the arrays it writes (a replaced group has none left) and writes its ``begin`` record."""
    if found.resumed:
        return
    for plan in plans:
        if not plan.replace:
            for w in plan.writes:
                if _is_dask(w.data):
                    store.delete_prefix(_array_journals(w.path))
    store.set(found.prefix + journal.BEGIN, json.dumps({**found.record, "started": time.time()}, sort_keys=True).encode())


def finished_variables(store: Store, found: DatasetJournal, plans: list[GroupPlan]) -> set[str]:
    """The dask variables a resumed run need not write at all: their array journal holds a ``complete`` record
    (their write finished before the first run died; its receipts were replaced by that record). One listing
    per dask variable; any array journal there is this run's (a fresh run deleted the others first)."""
    if not found.resumed:
        return set()
    done = set()
    for w in (w for p in plans for w in p.writes if _is_dask(w.data)):
        top = _array_journals(w.path) + "/"
        if any(k.startswith(top) and k.endswith("/" + journal.COMPLETE) for k in store.list_prefix(top.rstrip("/"))):
            done.add(w.path)
    return done


def cleanup_prefixes(found: DatasetJournal, plans: list[GroupPlan]) -> tuple[str, ...]:
    """What the write's final task deletes once everything landed: the array journals, then ``begin``."""
    arrays = [_array_journals(w.path) for p in plans for w in p.writes if _is_dask(w.data) and w.metadata.shape]
    return (*arrays, found.prefix.rstrip("/"))


# ------------------------------------------------------------------------------------ dataset appends
# ``append_dim=`` with ``resume=``: the journal of the group's append (graph/resume_append.py decides, begins and
# ends it as for an array's append, along one axis: the group's length along ``append_dim``).
def append_axis(w: Any, append_dim: Any) -> int | None:
    """The axis of ``append_dim`` in the variable write ``w`` (None: not an append write)."""
    from zarr_dask.xarray_backend.encoding import dims_and_attrs

    if w.action != "append" or w.old_metadata is None:
        return None
    dims, _ = dims_and_attrs(w.old_metadata)
    return dims.index(str(append_dim))


def group_length(plans: list[GroupPlan], append_dim: Any) -> tuple[int, int]:
    """``(committed length, length once committed)`` of the group along ``append_dim``, from its append
    writes (every one starts at the same length: xarray's rule; ``(0, 0)`` when nothing is appended)."""
    for w in (w for p in plans for w in p.writes):
        axis = append_axis(w, append_dim)
        if axis is not None and w.old_metadata is not None:
            return int(w.old_metadata.shape[axis]), int(w.metadata.shape[axis])
    return 0, 0


def append_run_id(
    identity: tuple[Any, ...], store: Store, path: str, resume: bool | str, plans: list[GroupPlan], append_dim: Any,
    encoding: Mapping[str, Any],
) -> str:  # fmt: skip
    """The run id of a resumable dataset append: :func:`run_id` of the call (the dataset's content -- dask
    names, data in memory -- or the run name; the options), with ``append_dim``, the encoding, and every
    planned array's metadata without its length along ``append_dim`` and its attributes -- never the group's
    length, so the same call made again after its append landed finds its journal.

    Examples
    --------
    >>> import dask.array as da, numpy as np, xarray as xr, zarr_dask
    >>> from zarr_dask.store import MemoryStore
    >>> from zarr_dask.xarray_backend.write_plan import StoreState, WriteOptions, plan_group
    >>> store = MemoryStore()
    >>> _ = zarr_dask.to_zarr_dataset(xr.Dataset({"v": ("t", np.arange(4.0))}), store)
    >>> more = xr.Dataset({"v": ("t", da.arange(2.0, chunks=1))})
    >>> def run(ds):
    ...     opts = WriteOptions(mode="a", append_dim="t")
    ...     plans = [plan_group(StoreState.load(store), "", ds, opts)]
    ...     return append_run_id((ds,), store, "", True, plans, "t", {})
    >>> before = run(more)
    >>> _ = zarr_dask.to_zarr_dataset(more, store, append_dim="t")  # the group grew: the same run id
    >>> run(more) == before, run(more * 2) == before
    (True, False)
    """
    arrays = []
    for w in (w for p in plans for w in p.writes):
        axis = append_axis(w, append_dim)
        meta = w.metadata if axis is None else dataclasses.replace(
            w.metadata, shape=tuple(0 if d == axis else n for d, n in enumerate(w.metadata.shape)))
        bare = dataclasses.replace(meta, attributes={})
        chunks = w.data.chunks if _is_dask(w.data) else None
        arrays.append((w.path, w.action, sorted(nodes.documents(w.path, bare).items()), w.write_empty_chunks, chunks))
    options = sorted((str(k), repr(v)) for k, v in encoding.items())
    return run_id((*identity, "append", str(append_dim), options, arrays), store, path, resume)
