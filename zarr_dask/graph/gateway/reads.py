# mypy: disable-error-code="no-untyped-call"
# (dask's expression classes are untyped; this package is where zarr_dask meets them)
"""The gateway's read collections: a lazy layer of ``getter(handle, block_slices)`` tasks as a legacy
:class:`ZarrArray`, an expression ``ZarrRead`` (``array.query-planning: True``) or a ``dask_array`` array (see
:mod:`zarr_dask.graph.gateway`).

Examples
--------
>>> import zarr_dask
>>> a = zarr_dask.create_array("memory://gateway-reads-doc", shape=(4,), dtype="i1", chunks=(2,), overwrite=True)
>>> zarr_dask.from_zarr(a, chunks=2).numblocks  # a read collection of two blocks, one getter task each
(2,)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from dask import config
from dask._task_spec import DataNode, List, Task, TaskRef
from dask.array.core import Array as LegacyArray
from dask.array.core import getter
from dask.blockwise import blockwise as core_blockwise
from dask.highlevelgraph import HighLevelGraph
from dask.layers import ArrayBlockwiseDep
from dask.system import CPU_COUNT

from zarr_dask.graph import buffers
from zarr_dask.graph.chunking import Chunks, chunks_token, is_regular
from zarr_dask.graph.gateway.tasks import _TaskLayer, dask_array_registered, query_planning

_blockwise: Any = core_blockwise



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

        class ZarrDaskArray(DaskArrayArray):  # type: ignore[misc, unused-ignore]  # Any without dask-array
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

    class ZarrRead(_IO):
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

    class ZarrAssemble(_Finalize):
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

    class ZarrExprArray(_ExprArray):
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
