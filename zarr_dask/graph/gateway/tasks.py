# mypy: disable-error-code="no-untyped-call"
# (dask's expression classes are untyped; this package is where zarr_dask meets them)
"""The gateway's tasks and graphs: task specs, reduction trees, graph layers, results, and which array mode dask
runs in (see :mod:`zarr_dask.graph.gateway`)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, cast

from dask._task_spec import DataNode, Task, TaskRef
from dask.array.core import Array as LegacyArray
from dask.blockwise import blockwise as core_blockwise
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from zarr_dask.graph.chunking import Chunks

#: The most inputs a reduction task takes (:func:`fan_in`).
FAN_IN = 32

_blockwise: Any = core_blockwise


def query_planning() -> bool:
    """True when ``dask.array.Array`` is dask's expression collection (``array.query-planning: True``)."""
    import dask.array as da

    return da.Array is not LegacyArray


def _dask_array_class() -> type | None:
    """``dask_array.Array`` when the dask-array package has been imported (by the user or by xarray)."""
    mod = sys.modules.get("dask_array._collection")
    return cast(type | None, getattr(mod, "Array", None))


def dask_array_registered() -> bool:
    """True when the ``dask-array`` package is xarray's registered chunk manager
    (``dask_array.xarray.register()``): zarr_dask's arrays are then ``dask_array`` arrays."""
    mod = sys.modules.get("dask_array.xarray")
    return mod is not None and bool(mod.isactive())


def array_module() -> Any:
    """The module whose arrays zarr_dask returns: ``dask_array`` when registered (see
    :func:`dask_array_registered`), else ``dask.array`` (legacy or expression arrays, by dask's config)."""
    if dask_array_registered():
        return sys.modules["dask_array"]
    import dask.array as da

    return da


def is_dask_array(x: Any) -> bool:
    """A dask array of either of dask's modes, or of the dask-array package."""
    if isinstance(x, LegacyArray):
        return True
    cls = _dask_array_class()
    if cls is not None and isinstance(x, cls):
        return True
    if not query_planning():
        return False
    import dask.array as da

    return isinstance(x, da.Array)


def as_dask(arr: Any) -> Any:
    """``arr`` as a dask array of the running mode whose ``name`` is the name of its graph keys (an
    expression is lowered; a legacy array of the other mode is kept: both graph kinds mix)."""
    if isinstance(arr, LegacyArray):
        return arr
    cls = _dask_array_class()
    if cls is not None and isinstance(arr, cls):
        return arr  # a dask_array array's graph is keyed by its name already
    import dask.array as da

    if not isinstance(arr, da.Array):
        arr = cast(Any, da).asarray(arr)
    if query_planning() and not isinstance(arr, LegacyArray):
        return arr.optimize()  # its name is now the name of its keys
    return arr


# --- tasks -------------------------------------------------------------------------------------------------


def task(key: Any, func: Callable[..., Any], *args: Any) -> Task:
    """A task ``func(*args)`` under ``key``; args may be :func:`ref` / :func:`data` nodes or plain values."""
    return Task(key, func, *args)


def ref(key: Any) -> TaskRef:
    """A reference to the result of task ``key``."""
    return TaskRef(key)


def data(value: Any) -> DataNode:
    """``value`` passed to a task as data (never searched for keys)."""
    return DataNode(None, value)


def value(key: Any, obj: Any) -> DataNode:
    """``obj`` as a graph key of its own (one copy in the graph, referenced by many tasks)."""
    return DataNode(key, obj)


def _sum_tokens(*tokens: Any) -> int:
    return sum(int(t) for t in tokens)


def fan_in(
    keys: Sequence[Any],
    name: str,
    final: Any,
    func: Callable[..., Any],
    extra: Sequence[Any] = (),
    reduce: Callable[..., Any] | None = None,
) -> dict[Any, Task]:
    """Tasks that reduce ``keys`` into the single key ``final`` = ``func(*extra, *inputs)`` through a tree
    of at most :data:`FAN_IN` inputs per task; the inner tasks apply ``reduce`` (default: ``func`` when no
    ``extra`` is given, else a sum of integer tokens).

    Examples
    --------
    >>> import dask
    >>> tasks = {("n", i): task(("n", i), int, i) for i in range(100)}
    >>> tasks.update(fan_in(list(tasks), "total", "total", max))
    >>> len(tasks) - 100  # 4 tasks of at most 32 inputs, then the final one
    5
    >>> dask.get(tasks, "total")
    99
    """
    inner = reduce or (func if not extra else _sum_tokens)
    tasks: dict[Any, Task] = {}
    level: list[Any] = list(keys)
    depth = 0
    while len(level) > FAN_IN:
        nxt: list[Any] = []
        for i in range(0, len(level), FAN_IN):
            key = (f"{name}-fan-in-{depth}", i // FAN_IN)
            tasks[key] = Task(key, inner, *(TaskRef(k) for k in level[i : i + FAN_IN]))
            nxt.append(key)
        level, depth = nxt, depth + 1
    tasks[final] = Task(final, func, *extra, *(TaskRef(k) for k in level))
    return tasks


# --- graphs and results ------------------------------------------------------------------------------------


class _TaskLayer(MaterializedLayer):
    """A layer of :class:`Task` / :class:`DataNode` objects that dask's ``graph_manipulation`` (``clone``,
    ``bind``) can rename: the node objects carry their own keys, which the generic ``Layer.clone`` leaves
    as they were (so the renamed graph had tasks whose key differed from their place in it)."""

    def clone(self, keys: set[Any], seed: Hashable, bind_to: Any = None) -> tuple[MaterializedLayer, bool]:
        from dask.base import clone_key
        from dask.graph_manipulation import chunks as gm_chunks

        def new(k: Any) -> Any:
            return clone_key(k, seed) if k in keys else k

        out: dict[Any, Any] = {}
        bound = False
        for key, node in self.items():
            if key not in keys:
                out[key] = node
                continue
            nk = new(key)
            deps: Any = getattr(node, "dependencies", frozenset())
            subs = {d: new(d) for d in deps if d in keys}
            renamed = node.substitute(subs, key=nk) if hasattr(node, "substitute") else node
            if bind_to is not None and not subs:  # a leaf: computed only after bind_to
                renamed = Task(nk, gm_chunks.bind, Task(None, _identity, renamed), TaskRef(bind_to))
                bound = True
            out[nk] = renamed
        return _TaskLayer(out), bound


def _identity(x: Any) -> Any:
    return x


def graph(name: str, tasks: Mapping[Hashable, Any], dependencies: Sequence[Any] = ()) -> HighLevelGraph:
    """A graph of ``tasks`` (one layer called ``name``) on top of the graphs of the dask collections
    ``dependencies`` (legacy or expression arrays, Delayed)."""
    legacy: list[Any] = [d for d in dependencies if isinstance(d, LegacyArray | Delayed)]
    deps: list[Any] = [d for d in dependencies if not isinstance(d, LegacyArray | Delayed)]
    if not deps:
        return HighLevelGraph.from_collections(name, _TaskLayer(dict(tasks)), dependencies=legacy)
    layers: dict[str, Any] = {}
    edges: dict[str, set[str]] = {}
    for i, d in enumerate(deps):  # expression collections: their lowered graph as one layer
        lname = f"{name}-input-{i}"
        layers[lname] = MaterializedLayer(dict(d.__dask_graph__()))
        edges[lname] = set()
    base = HighLevelGraph.merge(HighLevelGraph(layers, edges), *(d.__dask_graph__() for d in legacy))
    layers = dict(base.layers)
    edges = {k: set(v) for k, v in base.dependencies.items()}
    layers[name] = _TaskLayer(dict(tasks))
    edges[name] = set(base.layers)
    return HighLevelGraph(layers, edges)


def culled(hlg: HighLevelGraph, name: str, outputs: Iterable[Hashable]) -> HighLevelGraph:
    """``hlg`` without the tasks ``outputs`` do not depend on, as one layer named ``name`` (dask's own
    ``cull`` renames the layers it keeps, and a collection finds its layer by name)."""
    return HighLevelGraph({name: _TaskLayer(dict(hlg.cull(set(cast(Iterable[Any], outputs)))))}, {name: set()})


def delayed_result(key: Any, hlg: HighLevelGraph, layer: str | None = None) -> Delayed:
    """The :class:`~dask.delayed.Delayed` of ``key`` (in the layer ``layer``, default named ``key``)."""
    return cast(Delayed, cast(Any, Delayed)(key, hlg, layer=layer or key))


def one_block_delayed(arr: Any) -> Delayed:
    """The :class:`~dask.delayed.Delayed` of the one block of the dask array ``arr`` (either mode), its graph
    unoptimized (nothing fused), so tasks shared with other arrays keep their keys and are computed once."""
    if isinstance(arr, LegacyArray):
        return cast(Delayed, arr.to_delayed(optimize_graph=False).item())
    key: Any = arr.__dask_keys__()
    while isinstance(key, list):  # nested one level per dimension
        (key,) = key
    return cast(Delayed, cast(Any, Delayed)(key, dict(arr.__dask_graph__())))


def array_result(hlg: HighLevelGraph, name: str, chunks: Chunks, meta: Any) -> Any:
    """A dask array (of the running mode) whose blocks are the keys ``(name, i, j, ...)`` of ``hlg``."""
    keys = list(itertools.product([name], *(range(len(c)) for c in chunks)))
    if dask_array_registered():
        from dask_array.core import from_graph as dask_array_from_graph

        return dask_array_from_graph(dict(hlg), meta, chunks, keys, name)
    if not query_planning():
        return cast(Any, LegacyArray)(hlg, name, chunks, meta=meta)
    from dask.array._array_expr._collection import from_graph

    return from_graph(dict(hlg), meta, chunks, keys, name.rsplit("-", 1)[0])


