"""Reading the dimension coordinates with one batched store call, started as early as possible.

Opening a dataset loads its dimension coordinates: xarray peeks at the time values to decode them and builds
pandas indexes from every dimension coordinate. Read one by one, that is one round trip per coordinate.
:class:`CoordinatePrefetch` reads all of them with a single batched store call in a background thread and
hands each out once.

:class:`EarlyCoordinates` starts that read the moment the member documents arrive (it is the ``peek`` of
:func:`~zarr_dask.xarray_backend.hierarchy.load_hierarchy`): the coordinates are recognised from the raw
JSON, only their metadata is parsed, and the round trip for their chunks then overlaps with parsing the rest
of the metadata, building the variables and CF decoding, instead of following them. For a DataTree, the
coordinates of every group found in one batch of documents are read together.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np

from zarr_dask.core.indexing import chunk_projections, normalize_selection
from zarr_dask.errors import ZarrDaskError
from zarr_dask.graph.handle import ArrayHandle, is_sharded
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec import json as zjson
from zarr_dask.spec.paths import join_path
from zarr_dask.store import Store
from zarr_dask.xarray_backend.encoding import DIMENSION_KEY, codec_problem, nczarr_dims

__all__ = ["PREFETCH_LIMIT", "CoordinatePrefetch", "EarlyCoordinates", "coordinate_metadata"]

#: Dimension coordinates larger than this (in total) are not prefetched together.
PREFETCH_LIMIT = 64 * 2**20
#: How long :meth:`CoordinatePrefetch.start` waits for the background thread to issue the request (at most),
#: then how long it steps aside so that the store's I/O thread can put the request on the wire.
_ISSUE_WAIT = 0.05
_ISSUE_YIELD = 0.0005

ArrayMeta = ArrayMetadataV2 | ArrayMetadataV3


def prefetch_bytes(handles: Iterable[ArrayHandle]) -> int:
    """What reading ``handles`` whole costs in memory (8 bytes per element at least, as decoded indexes)."""
    return sum(math.prod(h.shape) * max(h.dtype.itemsize, 8) for h in handles)


class CoordinatePrefetch:
    """Reads several small arrays of one store with a single batched store call, each handed out once.

    Parameters
    ----------
    handles
        The arrays to read together (the dimension coordinates of a group, or of several groups); each is
        handed out by its path.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> g = zarr_dask.create_group("memory://prefetch-doc")
    >>> g.create_array("x", shape=(3,), dtype="i2", dimension_names=["x"])[:] = [1, 2, 3]
    >>> x = ArrayHandle(g.store, "x", g["x"].metadata)
    >>> p = CoordinatePrefetch([x])
    >>> p.start()
    >>> p.take(x, whole=True)
    array([1, 2, 3], dtype=int16)
    >>> p.take(x, whole=True) is None  # handed out once
    True
    """

    def __init__(self, handles: Iterable[ArrayHandle]) -> None:
        self._handles = {h.path: h for h in handles}
        self._cache: dict[str, np.ndarray[Any, Any]] | None = None
        self._lock = threading.Lock()
        self._future: Future[dict[str, np.ndarray[Any, Any]]] | None = None
        self._issued = threading.Event()

    def start(self) -> None:
        """Start the joint read in the background now (xarray decodes and builds the dataset meanwhile).

        On remote stores this returns once the request is on its way: the calling thread goes on with
        CPU-bound work (parsing, CF decoding), and left to the interpreter's GIL switching, the background
        thread and the store's I/O thread would each wait up to a switch interval (5 ms) before the request
        even starts -- a quarter of a 20 ms round trip.
        """
        with self._lock:
            if self._future is not None or self._cache is not None:
                return
            future: Future[dict[str, np.ndarray[Any, Any]]] = Future()
            self._future = future
        # a thread of its own: a shared pool could be busy, and the wait below must not queue behind it
        threading.Thread(target=self._run, args=(future,), name="zarr_dask_prefetch", daemon=True).start()
        if not any(h.store.batched_io for h in self._handles.values()):
            return  # local files and memory: the background thread reads at once, nothing to wait for
        self._issued.wait(_ISSUE_WAIT)
        time.sleep(_ISSUE_YIELD)
        for h in self._handles.values():  # the decoders, built while the request is out
            with contextlib.suppress(ZarrDaskError):  # reported by the read that needs it
                h.io.pipeline  # noqa: B018

    def _run(self, future: Future[dict[str, np.ndarray[Any, Any]]]) -> None:
        try:
            future.set_result(self._load())
        except BaseException as e:  # noqa: BLE001 - handed to the thread that takes the values
            future.set_exception(e)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (CoordinatePrefetch, (list(self._handles.values()),))  # by configuration: nothing read travels

    def holds(self, handle: ArrayHandle) -> bool:
        """True when this prefetch reads the array ``handle`` describes: same store and path, and the same
        shape, data type and chunk grid (the metadata was parsed from the same document; comparing all of it
        costs more than the rest of building the variable)."""
        mine = self._handles.get(handle.path)
        if mine is None or mine.store != handle.store:
            return False
        a, b = mine.metadata, handle.metadata
        return a is b or (a.shape, a.data_type, a.chunk_grid) == (b.shape, b.data_type, b.chunk_grid)

    def take(self, handle: ArrayHandle, *, whole: bool) -> np.ndarray[Any, Any] | None:
        """The array of ``handle`` from the joint read (done on first use), or None once it was read whole.

        Partial reads (xarray peeks at the first and last time values before decoding) are served from the
        cache; the whole read (building the index) hands the array out and forgets it. If the joint read fails
        (say one coordinate has a corrupt chunk), nothing is cached and every array is read on its own, so the
        error is reported for the array it belongs to.
        """
        with self._lock:
            if self._cache is None:
                try:
                    self._cache = self._future.result() if self._future is not None else self._load()
                except (ZarrDaskError, OSError, ValueError):
                    self._cache = {}
                self._future = None
            return self._cache.pop(handle.path, None) if whole else self._cache.get(handle.path)

    def _load(self) -> dict[str, np.ndarray[Any, Any]]:
        try:
            return self._read()
        finally:
            self._issued.set()

    def _read(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every chunk of the unsharded arrays in one store call (keys from the metadata alone, so the call
        goes out before any decoder is built), then the sharded ones (index first) one by one."""
        outs = {path: np.empty(h.shape, dtype=h.dtype) for path, h in self._handles.items()}
        plans, sharded = [], []
        for path, h in self._handles.items():
            if outs[path].size == 0:
                continue
            if is_sharded(h.metadata):
                sharded.append(h)
                continue
            projections = list(chunk_projections(normalize_selection(Ellipsis, h.shape), h.io.grids, h.shape))
            plans.append((h, outs[path], [(h.io.chunk_key(p.coords), p) for p in projections]))
        self._issued.set()
        got = plans[0][0].store.get_many([k for _, _, kp in plans for k, _ in kp]) if plans else {}
        for h, out, kp in plans:
            for key, p in kp:
                data = got.get(key)
                if data is None:
                    out[p.out_sel] = h.io.fill
                else:
                    h.io.decode_chunk_into(key, data, p, out)
        for h in sharded:
            outs[h.path][...] = h.read(normalize_selection(Ellipsis, h.shape))
        return outs


def _mentioning(name: str, docs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``docs`` with raw documents decoded, or None when no raw document mentions ``name`` (a coordinate's
    documents name its dimension, that is itself): most members are passed over without decoding them."""
    raw = [v for v in docs.values() if isinstance(v, bytes)]
    if raw and not any(name.encode() in v or json.dumps(name).encode() in v for v in raw):
        return None
    return {k: zjson.loads(v, what=k) if isinstance(v, bytes) else v for k, v in docs.items()}


def coordinate_metadata(name: str, docs: Mapping[str, Any]) -> ArrayMeta | None:
    """The metadata of member ``name`` if its raw documents show a dimension coordinate (1-d, its only
    dimension named after itself), else None -- also for anything malformed (the full parse reports that).

    ``docs`` maps document names (``"zarr.json"``, or ``".zarray"`` / ``".zattrs"``) to the bytes read or
    to decoded JSON.

    Examples
    --------
    >>> doc = {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "int8",
    ...        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
    ...        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
    ...        "codecs": [{"name": "bytes"}], "dimension_names": ["x"]}
    >>> coordinate_metadata("x", {"zarr.json": doc}).shape
    (2,)
    >>> coordinate_metadata("y", {"zarr.json": doc}) is None
    True
    """
    try:
        decoded = _mentioning(name, docs)
        if decoded is None:
            return None
        doc = decoded.get("zarr.json")
        if isinstance(doc, dict):
            if doc.get("node_type") != "array" or doc.get("dimension_names") != [name]:
                return None
            meta: ArrayMeta = ArrayMetadataV3.from_json(doc)
        else:
            zarray, attrs = decoded.get(".zarray"), decoded.get(".zattrs") or {}
            if not isinstance(zarray, dict) or not isinstance(attrs, dict):
                return None
            dims = attrs[DIMENSION_KEY] if DIMENSION_KEY in attrs else nczarr_dims(zarray, attrs)
            if dims != [name]:
                return None
            meta = ArrayMetadataV2.from_json(zarray, attrs)
    except (ZarrDaskError, TypeError, ValueError, AttributeError):
        return None
    return meta if len(meta.shape) == 1 else None


class EarlyCoordinates:
    """A ``peek`` for :func:`~zarr_dask.xarray_backend.hierarchy.load_hierarchy` that reads the dimension
    coordinates of the groups in each batch of member documents with one :class:`CoordinatePrefetch`,
    started as soon as the documents are fetched.

    Parameters
    ----------
    store, path
        The store and the path of the group being loaded (peeked group paths are relative to it).
    drop_variables
        Names not to read (xarray's ``drop_variables``).
    allow_unsafe_codecs
        As for the open; arrays whose codecs cannot be read are left to the normal path (and its warning).
    """

    def __init__(
        self, store: Store, path: str, *, drop_variables: Iterable[str] = (), allow_unsafe_codecs: bool = False
    ) -> None:
        self._store = store
        self._path = path
        self._drop = frozenset(drop_variables)
        self._unsafe = allow_unsafe_codecs
        self._started: dict[str, CoordinatePrefetch] = {}

    def __call__(self, groups: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        found: dict[str, list[ArrayHandle]] = {}
        budget = PREFETCH_LIMIT
        for group, members in groups.items():
            if group in self._started:
                continue
            handles = [h for name, docs in members.items() if (h := self._handle(group, name, docs)) is not None]
            if handles and prefetch_bytes(handles) <= budget:
                found[group] = handles
                budget -= prefetch_bytes(handles)
        if found:
            prefetch = CoordinatePrefetch(h for handles in found.values() for h in handles)
            prefetch.start()
            self._started.update(dict.fromkeys(found, prefetch))

    def _handle(self, group: str, name: str, docs: Mapping[str, Any]) -> ArrayHandle | None:
        """The handle of member ``name`` if it is a readable dimension coordinate, else None (anything odd is
        left to the full parse to report: names come from the store unchecked)."""
        meta = None if name in self._drop else coordinate_metadata(name, docs)
        try:
            if meta is None or codec_problem(meta, allow_unsafe=self._unsafe) is not None:
                return None
            path = join_path(self._path, group, name)
        except (ZarrDaskError, TypeError, ValueError, KeyError, AttributeError):
            return None
        return ArrayHandle(self._store, path, meta, allow_unsafe_codecs=self._unsafe)

    def get(self, group: str = "") -> CoordinatePrefetch | None:
        """The prefetch holding the coordinates of ``group`` (relative path), if one was started."""
        return self._started.get(group)
