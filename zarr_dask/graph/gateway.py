# mypy: disable-error-code="no-untyped-call"
# (dask's expression classes are untyped; this module is where zarr_dask meets them)
"""The gateway to dask's internals: the only zarr_dask module that imports private dask APIs.

Everything else in zarr_dask builds its graphs through the functions here, so a change in dask touches one
file. What it offers:

* tasks: :func:`task`, :func:`ref`, :func:`data`, and :func:`fan_in` (a reduction tree of at most 32 inputs
  per task, used by writes and conversions alike);
* graphs and results: :func:`graph`, :func:`delayed_result`, :func:`array_result` (a dask array of tasks
  already built, in whichever array mode dask runs);
* the read collection: :func:`read_collection` -- a lazy layer of ``getter(handle, block_slices)`` tasks
  whose size does not depend on the number of blocks, as a :class:`ZarrArray` (dask's legacy arrays), or
  an expression ``ZarrRead`` that builds its tasks only when computed (``array.query-planning: True``);
* :func:`as_dask` / :func:`lowered`: any array-like as a dask array whose name is the name of its keys;
* the ``dask-array`` package (the ``dask_array`` module, dask's separate expression arrays): when it is
  registered as xarray's chunk manager (``dask_array.xarray.register()``), :func:`array_module` is
  ``dask_array`` and reads, ``to_zarr(compute=False)`` results and read-backs are ``dask_array`` arrays
  (:func:`dask_array_registered`); its arrays are accepted as input in every mode.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from dask import config
from dask._task_spec import DataNode, List, Task, TaskRef
from dask.array.core import Array as LegacyArray
from dask.array.core import getter
from dask.blockwise import blockwise as core_blockwise
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.layers import ArrayBlockwiseDep
from dask.system import CPU_COUNT

from zarr_dask.graph import buffers
from zarr_dask.graph.chunking import Chunks, chunks_token, is_regular

__all__ = [
    "FAN_IN",
    "ZarrArray",
    "array_module",
    "array_result",
    "as_dask",
    "dask_array_registered",
    "data",
    "delayed_result",
    "one_block_delayed",
    "fan_in",
    "graph",
    "is_dask_array",
    "query_planning",
    "read_collection",
    "ref",
    "task",
    "value",
]

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


# --- the read collection -----------------------------------------------------------------------------------


class BlockSlices(ArrayBlockwiseDep):
    """Block index -> the block's slices, computed on demand (nothing is stored per block)."""

    def __init__(self, chunks: Chunks) -> None:
        super().__init__(chunks)
        self._regular = [is_regular(c) for c in chunks]
        self._starts = [
            None if reg else np.concatenate([[0], np.cumsum(np.asarray(c, dtype=np.int64))])
            for reg, c in zip(self._regular, chunks, strict=True)
        ]
        self._extent = [sum(c) for c in chunks]

    def __getitem__(self, idx: tuple[int, ...]) -> tuple[slice, ...]:
        out = []
        for d, i in enumerate(idx):
            starts = self._starts[d]
            if starts is None:
                size = self.chunks[d][0]
                out.append(slice(i * size, min((i + 1) * size, self._extent[d]), None))
            else:
                out.append(slice(int(starts[i]), int(starts[i + 1]), None))
        return tuple(out)

    def __dask_tokenize__(self) -> Any:
        return ("zarr_dask.BlockSlices", chunks_token(self.chunks))


class ZarrArray(LegacyArray):
    """What :func:`~zarr_dask.from_zarr` returns with dask's legacy arrays: a dask array in every respect
    (operations on it return plain dask arrays; a basic selection returns a :class:`ZarrArray` again, whose
    only difference is the direct ``compute()``), except that ``compute()`` of the whole, untransformed array
    -- or of a basic selection of it, ``x[0, 10:20]`` -- on a local scheduler (threads or sync) reads the
    chunks straight into the result with the scheduler's number of threads: one allocation, no per-block
    copies and no scheduler, instead of reading blocks and concatenating them."""

    def compute(self, **kwargs: Any) -> Any:
        direct = self.__dict__.get("_zarr_direct")  # (handle, selection or None, the name it was made with)
        threads = local_threads(self, kwargs)
        if direct is None or threads is None or direct[2] != self.name:  # not local, or changed in place
            return cast(Any, super()).compute(**kwargs)
        handle, selection, _ = direct
        return handle.read_all(threads) if selection is None else handle.read_selection(selection, threads)

    def __getitem__(self, index: Any) -> Any:
        out = super().__getitem__(index)
        direct = self.__dict__.get("_zarr_direct")
        if direct is None or direct[1] is not None or direct[2] != self.name or type(out) is not LegacyArray:
            return out
        if not _basic_index(index):
            return out
        selected = cast(ZarrArray, cast(Any, ZarrArray)(out.dask, out.name, out.chunks, meta=out._meta))
        selected.__dict__["_zarr_direct"] = (direct[0], index, out.name)
        return selected

    def __dask_postcompute__(self) -> Any:
        """Assemble the computed blocks into memory from the block pool (``dask.compute(x)``, distributed
        ``client.compute(x)``), like the direct ``compute()`` result, instead of fresh memory."""
        return assemble, (self.chunks, self.dtype)


def assemble(results: Any, chunks: Chunks, dtype: np.dtype[Any]) -> Any:
    """The blocks (nested lists, one level per dimension) copied into one pooled array; anything but the
    expected NumPy blocks goes to dask's own ``finalize``."""
    from dask.array import core

    finalize: Any = core.finalize

    def leaves(nested: Any, depth: int, index: tuple[int, ...]) -> Any:
        if depth == len(chunks):
            yield index, nested
            return
        for i, sub in enumerate(nested):
            yield from leaves(sub, depth + 1, (*index, i))

    if not chunks or not isinstance(results, list | tuple):
        return finalize(results)
    found = list(leaves(results, 0, ()))
    expected = list(itertools.product(*(range(len(c)) for c in chunks)))
    if len(found) <= 1 or [i for i, _ in found] != expected:
        return finalize(results)
    starts = [np.concatenate([[0], np.cumsum(c)]).astype(int).tolist() for c in chunks]
    for index, block in found:
        shape = tuple(chunks[d][i] for d, i in enumerate(index))
        if type(block) is not np.ndarray or block.dtype != dtype or block.shape != shape:
            return finalize(results)
    out = buffers.empty(tuple(int(sum(c)) for c in chunks), dtype)
    for index, block in found:
        out[tuple(slice(starts[d][i], starts[d][i + 1]) for d, i in enumerate(index))] = block
    return out


_DIRECT_KWARGS = frozenset({"scheduler", "num_workers", "optimize_graph", "traverse"})


def local_threads(x: Any, kwargs: dict[str, Any]) -> int | None:
    """Threads of the local scheduler ``compute(**kwargs)`` would use; None for any other scheduler."""
    if set(kwargs) - _DIRECT_KWARGS:
        return None
    from dask import local, threaded
    from dask.base import get_scheduler

    get = cast(Any, get_scheduler)(scheduler=kwargs.get("scheduler"), collections=[x])
    if get is local.get_sync:
        return 1
    if get is threaded.get:  # dask's threaded scheduler defaults to dask.system.CPU_COUNT (affinity, cgroups)
        return int(kwargs.get("num_workers") or config.get("num_workers", None) or CPU_COUNT)
    return None


def _legacy_read(handle: Any, chunks: Chunks, name: str, inline_array: bool) -> HighLevelGraph:
    out_ind = tuple(range(len(chunks)))
    slices = BlockSlices(chunks)
    if inline_array:
        layer = _blockwise(getter, name, out_ind, handle, None, slices, out_ind, numblocks={}, _data_producer=True)
        return HighLevelGraph.from_collections(name, layer, dependencies=())
    original = "original-" + name
    layers = {
        # a DataNode, not a bare object: a legacy layer would make dask's culling visit every key
        original: _TaskLayer({original: DataNode(original, handle)}),
        name: _blockwise(
            getter, name, out_ind, TaskRef(original), None, slices, out_ind, numblocks={}, _data_producer=True
        ),
    }
    return HighLevelGraph(layers, {original: set(), name: {original}})


_DASK_ARRAY_COLLECTION: Any = None


def _dask_array_collection() -> Any:
    """:class:`ZarrArray` for the dask-array package: a ``dask_array.Array`` whose ``compute()`` (and
    ``np.asarray``) of the whole, untransformed read on a local scheduler reads straight into the result."""
    global _DASK_ARRAY_COLLECTION
    if _DASK_ARRAY_COLLECTION is None:
        from dask_array import Array as DaskArrayArray

        class ZarrDaskArray(DaskArrayArray):  # type: ignore[misc,valid-type]
            """What :func:`~zarr_dask.from_zarr` returns with the dask-array package registered (operations
            on it return plain ``dask_array`` arrays)."""

            def compute(self, **kwargs: Any) -> Any:
                handle, read = self.__dict__.get("_zarr_handle"), self.__dict__.get("_zarr_read")
                threads = local_threads(self, kwargs)
                if handle is None or threads is None or self.expr._name != read:  # changed in place (out=)
                    return super().compute(**kwargs)
                return handle.read_all(threads)

        _DASK_ARRAY_COLLECTION = ZarrDaskArray
    return _DASK_ARRAY_COLLECTION


def _dask_array_read(handle: Any, chunks: Chunks, name: str, inline_array: bool, meta: Any) -> Any:
    """The read as a ``dask_array`` array: its ``from_array`` of the handle (selections pushed into it read
    only the selected region), under zarr_dask's name."""
    import dask_array

    plain = dask_array.from_array(
        handle, chunks=chunks, name=name, inline_array=inline_array, meta=meta, asarray=False, fancy=False
    )
    out = _dask_array_collection()(plain.expr)
    out.__dict__.update(_zarr_handle=handle, _zarr_read=plain.expr._name)
    return out


def read_collection(handle: Any, chunks: Chunks, name: str, inline_array: bool) -> Any:
    """The dask array of ``handle`` read in blocks ``chunks``: a :class:`ZarrArray` over one lazy layer
    (legacy mode), or the expression ``ZarrRead`` in a :class:`ZarrArray`-like collection (query planning)."""
    meta = np.empty((0,) * handle.ndim, dtype=handle.dtype)
    if dask_array_registered():
        return _dask_array_read(handle, chunks, name, inline_array, meta)
    if query_planning():
        read, collection = _expr_classes()
        return collection(read(handle, chunks, meta, name, inline_array))
    hlg = _legacy_read(handle, chunks, name, inline_array)
    out = cast(ZarrArray, cast(Any, ZarrArray)(hlg, name, chunks, meta=meta))
    out.__dict__["_zarr_direct"] = (handle, None, name)
    return out


def _basic_index(index: Any) -> bool:
    """Integers, slices with a positive step, and at most one Ellipsis (what a direct read takes)."""
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if isinstance(item, bool | np.bool_):
            return False
        if isinstance(item, slice):
            if item.step is not None and (not isinstance(item.step, int | np.integer) or item.step <= 0):
                return False
            if not all(v is None or isinstance(v, int | np.integer) for v in (item.start, item.stop)):
                return False
        elif item is not Ellipsis and not isinstance(item, int | np.integer):
            return False
    return sum(item is Ellipsis for item in items) <= 1


# --- query planning (array-expr) ---------------------------------------------------------------------------

try:  # dask's expression arrays (the classes exist whether or not query planning is on)
    from dask.array._array_expr._collection import Array as _ExprArray
    from dask.array._array_expr._expr import FinalizeComputeArray as _Finalize
    from dask.array._array_expr._io import IO as _IO
    from dask.array._array_expr._slicing import SliceSlicesIntegers as _Slice
except ImportError:  # pragma: no cover - a dask without array-expr: legacy arrays only
    _ExprArray = _IO = _Slice = _Finalize = None  # type: ignore[misc,assignment]


def _task_refs(keys: Any) -> Any:
    """The nested lists of block keys as nested lists of :func:`ref` (a task argument)."""
    return List(*(_task_refs(k) for k in keys)) if isinstance(keys, list) else TaskRef(keys)


def _narrowed(chunks: Chunks, index: Sequence[Any]) -> tuple[Chunks, tuple[int, ...], list[Any]] | None:
    """For a basic selection ``index`` of an array of ``chunks``: the chunks of just the selected elements
    (the array's blocks cut to the selection), their first element, and the selection relative to it; None
    when it is not a selection of step-1 slices and non-negative integers, or when it selects everything."""
    if len(index) != len(chunks):
        return None
    out: list[tuple[int, ...]] = []
    first: list[int] = []
    rel: list[Any] = []
    for c, i in zip(chunks, index, strict=True):
        starts = np.concatenate([[0], np.cumsum(np.asarray(c, dtype=np.int64))])
        if isinstance(i, int | np.integer) and not isinstance(i, bool) and 0 <= i < starts[-1]:
            lo, hi = int(i), int(i) + 1
            rel.append(0)
        elif isinstance(i, slice) and i.step in (None, 1):
            lo, hi, _ = i.indices(int(starts[-1]))
            if hi <= lo:
                return None
            rel.append(slice(None))
        else:
            return None
        cuts = sorted({lo, hi, *(int(b) for b in starts if lo < b < hi)})
        out.append(tuple(b - a for a, b in itertools.pairwise(cuts)))
        first.append(lo)
    if all(o == tuple(c) for o, c in zip(out, chunks, strict=True)):
        return None
    return tuple(out), tuple(first), rel

_EXPR: tuple[Any, Any] | None = None


def _expr_classes() -> tuple[Any, Any]:
    """``(ZarrRead, ZarrExprArray)``."""
    if _EXPR is None:
        raise RuntimeError("this dask has no array-expr module; turn array.query-planning off")
    return _EXPR


if _IO is not None:

    class ZarrRead(_IO):  # type: ignore[misc,valid-type]
        """The blocks of one array: ``getter(handle, block_slices)`` tasks, built only when the graph is
        (after dask's optimizer has pushed selections down), so building the array costs nothing per block."""

        _parameters = ["handle", "chunks", "_meta", "name", "inline_array", "offset"]
        _defaults = {"offset": None}

        @property
        def _meta(self) -> Any:
            return self.operand("_meta")

        @property
        def chunks(self) -> Any:
            return self.operand("chunks")

        @property
        def _name(self) -> str:
            return cast(str, self.operand("name"))

        def __str__(self) -> str:
            return f"ZarrRead({self.operand('handle')!r})"

        def _simplify_up(self, parent: Any, dependents: Any) -> Any:
            """``x[a:b, i]``: read only the selected elements, in the blocks the selection touches cut to it
            (dask's legacy graphs get this from culling and fusing; expressions build the tasks of every block
            they hold)."""
            if type(parent) is not _Slice:
                return None
            found = _narrowed(self.chunks, parent.operand("index"))
            if found is None:
                return None
            chunks, first, rel = found
            base = self.operand("offset") or (0,) * len(chunks)
            offset = tuple(o + f for o, f in zip(base, first, strict=True))
            from dask.base import tokenize

            name = f"{self._name.split('--', 1)[0]}--{tokenize(self._name, chunks, first)}"
            sub = ZarrRead(self.operand("handle"), chunks, self._meta, name, self.operand("inline_array"), offset)
            return _Slice(sub, tuple(rel), parent.operand("allow_getitem_optimization"))

        def _layer(self) -> dict[Any, Any]:
            chunks, name, handle = self.chunks, self._name, self.operand("handle")
            offset = self.operand("offset")
            slices: Any = BlockSlices(chunks)
            if offset is not None and any(offset):
                plain = slices
                slices = _Shifted(plain, offset)
            dsk: dict[Any, Any] = {}
            if self.operand("inline_array"):
                source: Any = DataNode(None, handle)
            else:
                source = TaskRef("original-" + name)
                dsk[source.key] = DataNode(source.key, handle)
            for idx in itertools.product(*(range(len(c)) for c in chunks)):
                dsk[(name, *idx)] = Task((name, *idx), getter, source, DataNode(None, slices[idx]))
            return dsk

        def finalize_compute(self) -> Any:
            """``dask.compute(x)`` of the whole read: its blocks assembled into one pooled array (as
            :meth:`ZarrArray.__dask_postcompute__` in legacy mode), not concatenated by dask."""
            if len(self.chunks) == 0 or all(len(c) == 1 for c in self.chunks):
                return super().finalize_compute()
            return ZarrAssemble(self)

    class ZarrAssemble(_Finalize):  # type: ignore[misc,valid-type]
        """One block: every block of a :class:`ZarrRead` copied into one pooled array (:func:`assemble`)."""

        def _simplify_down(self) -> Any:
            return None  # (dask's own finalize turns itself into a rechunk to one block)

        @property
        def chunks(self) -> Any:
            return tuple((int(sum(c)),) for c in self.arr.chunks)

        def _layer(self) -> dict[Any, Any]:
            arr = self.arr
            key = (self._name, *(0,) * len(arr.chunks))
            args = (_task_refs(arr.__dask_keys__()), DataNode(None, arr.chunks), DataNode(None, arr.dtype))
            return {key: Task(key, assemble, *args)}

    class ZarrExprArray(_ExprArray):  # type: ignore[misc,valid-type]
        """:class:`ZarrArray` under query planning: the direct ``compute()`` of the whole array."""

        def compute(self, **kwargs: Any) -> Any:
            threads = local_threads(self, kwargs)
            if threads is None or not isinstance(self.expr, ZarrRead):
                return super().compute(**kwargs)
            return self.expr.operand("handle").read_all(threads)

        def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
            """``np.asarray(x)`` reads the array (dask's expression arrays have no ``__array__`` yet)."""
            out = self.compute()
            return out if dtype is None else out.astype(dtype, copy=False)

    _EXPR = (ZarrRead, ZarrExprArray)


class _Shifted:
    """Block slices moved by ``offset`` (the first element of a narrowed read)."""

    def __init__(self, slices: BlockSlices, offset: tuple[int, ...]) -> None:
        self.slices, self.offset = slices, offset

    def __getitem__(self, idx: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(s.start + o, s.stop + o) for s, o in zip(self.slices[idx], self.offset, strict=True))
