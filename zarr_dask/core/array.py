"""`Array`: a Zarr v2/v3 array in a store, with NumPy-style basic indexing."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from zarr_dask.codecs.shard_access import DEFAULT_COALESCING, Coalescing
from zarr_dask.core import nodes
from zarr_dask.core.chunk_io import ChunkIO
from zarr_dask.core.commit import check_no_incomplete_append, commit_held
from zarr_dask.core.consolidated import create_node, refresh_consolidated
from zarr_dask.core.create import build_array_metadata
from zarr_dask.core.describe import codecs_text, info_text
from zarr_dask.core.indexing import (
    DimSelection,
    chunk_projections,
    expand_value,
    finalize_output,
    normalize_selection,
)
from zarr_dask.core.indexing_api import SelectionMixin, as_value
from zarr_dask.core.lease import AppendLease
from zarr_dask.core.node import Node
from zarr_dask.core.resize import resized_metadata, trim_chunks
from zarr_dask.errors import (
    ArrayNotFoundError,
    MetadataError,
    ReadOnlyError,
    ShapeMismatchError,
    UnsupportedFeatureError,
    ZarrDaskError,
)
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.chunk_grid import RegularDimGrid
from zarr_dask.spec.layout import sharding_of
from zarr_dask.spec.paths import key_prefix, normalize_path
from zarr_dask.store import Store, open_store
from zarr_dask.store.versioned import conditional

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3


@dataclass(frozen=True)
class ArrayConfig:
    """An array's runtime configuration (zarr-python's ``ArrayConfig``): ``Array.config``, ``Array.with_config``."""

    order: Literal["C", "F"]
    write_empty_chunks: bool

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "write_empty_chunks": self.write_empty_chunks}


@dataclass(frozen=True)
class ArrayInfo:
    """What `Array.info` reports."""

    path: str
    store: str
    zarr_format: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    chunks: tuple[int, ...]
    fill_value: Any
    codecs: Any
    nchunks: int
    nchunks_initialized: int
    nbytes: int
    nbytes_stored: int
    shards: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        ratio = f"{self.nbytes / self.nbytes_stored:.1f}" if self.nbytes_stored else "-"
        rows = [
            ("Type", "Array"),
            ("Zarr format", self.zarr_format),
            ("Store", self.store),
            ("Path", "/" + self.path),
            ("Shape", self.shape),
            ("Chunk shape", self.chunks),
            *([("Shard shape", self.shards)] if self.shards is not None else []),
            ("Data type", self.dtype),
            ("Fill value", self.fill_value),
            ("Codecs", codecs_text(self.codecs)),
            ("No. bytes", f"{self.nbytes} ({_human(self.nbytes)})"),
            ("No. bytes stored", f"{self.nbytes_stored} ({_human(self.nbytes_stored)})"),
            ("Storage ratio", ratio),
            ("Chunks initialized", f"{self.nchunks_initialized}/{self.nchunks}"),
        ]
        return info_text(rows)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


class Array(SelectionMixin, Node):
    """A Zarr array (v2 or v3) in a store.

    Create with :func:`zarr_dask.create_array`, open with :func:`zarr_dask.open_array`. Reading
    (``a[...]``, ``a[0, ::2]``) and writing (``a[:10] = x``) take integers, slices with any step and
    ``Ellipsis``, and zarr-python's integer-array and boolean-mask selections (:attr:`oindex`, :attr:`vindex`,
    :attr:`blocks`); a read fetches only the chunks the selection touches. Missing chunks read as the fill value.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://doc-array", shape=(4, 6), dtype="i4", chunks=(2, 3))
    >>> a[:] = np.arange(24).reshape(4, 6)
    >>> a[1, ::2]
    array([ 6,  8, 10], dtype=int32)
    >>> a.oindex[[0, 3], [5, 0]]
    array([[ 5,  0],
           [23, 18]], dtype=int32)
    >>> a.vindex[[0, 3], [5, 0]]
    array([ 5, 18], dtype=int32)
    """

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: ArrayMetadata,
        *,
        allow_unsafe_codecs: bool = False,
        write_empty_chunks: bool = False,
        order: Literal["C", "F"] | None = None,
        coalescing: Coalescing = DEFAULT_COALESCING,
    ) -> None:
        self._store = store
        self._path = normalize_path(path)
        self._metadata = metadata
        self._allow_unsafe_codecs = allow_unsafe_codecs
        self._write_empty_chunks = write_empty_chunks
        self._order = order or metadata.order
        self._coalescing = coalescing

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(
        cls,
        store: Any,
        path: str = "",
        *,
        zarr_format: Literal[2, 3] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = False,
        **kwargs: Any,
    ) -> Array:
        s = open_store(store, storage_options=dict(storage_options or {}), read_only=read_only)
        path = normalize_path(path)
        node = nodes.read_node(s, path, zarr_format)
        if not nodes.is_array(node):
            what = "a group" if node is not None else "nothing"
            hint = nodes.not_found_hint(s, path, zarr_format) if node is None else ""
            raise ArrayNotFoundError(
                f"no array found here (found {what}){hint or '; check the URL and path'}",
                store=s.url,
                path=path,
            )
        assert isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)
        array = cls(s, path, node, **kwargs)
        array._io.sharding  # noqa: B018 - unknown or unsafe codecs (and bad shard shapes) fail at open
        return array

    @classmethod
    def create(
        cls,
        store: Any,
        path: str = "",
        *,
        shape: Any,
        dtype: Any = "float64",
        zarr_format: Literal[2, 3] = 3,
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        allow_unsafe_codecs: bool = False,
        write_empty_chunks: bool = False,
        **metadata_kwargs: Any,
    ) -> Array:
        s = open_store(store, storage_options=dict(storage_options or {}))
        path = normalize_path(path)
        try:
            metadata = build_array_metadata(shape=shape, dtype=dtype, zarr_format=zarr_format, **metadata_kwargs)
            array = cls(
                s,
                path,
                metadata,
                allow_unsafe_codecs=allow_unsafe_codecs,
                write_empty_chunks=write_empty_chunks,
                order=metadata_kwargs.get("order"),
            )
            array._io.sharding  # noqa: B018 - build (validate) the codec pipeline before writing anything
        except ZarrDaskError as e:
            raise e.with_context(store=s.url, path=path) from None
        create_node(s, path, metadata, overwrite=overwrite)  # and refresh enclosing consolidated metadata
        return array

    @cached_property
    def _io(self) -> ChunkIO:
        return ChunkIO(
            self._store,
            self._path,
            self._metadata,
            allow_unsafe_codecs=self._allow_unsafe_codecs,
            write_empty_chunks=self._write_empty_chunks,
            coalescing=self._coalescing,
        )

    def _replace_metadata(self, metadata: ArrayMetadata, lease: AppendLease | None = None) -> None:
        """Commit new metadata (resize, append, attributes) over the metadata this object holds, by
        compare-and-swap (:func:`~zarr_dask.core.commit.commit_metadata`: a concurrent change of the attributes
        is merged, any other raises), then bring the consolidated metadata of the enclosing groups up to date.
        Under an append ``lease`` the commit is fenced (:func:`~zarr_dask.core.commit.commit_held`)."""
        if self._store.read_only:
            raise ReadOnlyError(f"the array is read-only; {self._store.read_only_advice}", store=self._store.url, path=self._path)
        held = (self._path, lease.token) if lease is not None else None
        written, _ = commit_held(self._store, held, self._path, self._metadata, metadata, what="change")
        self._metadata = written
        self.__dict__.pop("_io", None)
        if lease is not None:  # committed: the record in the lease is done with (released by _append_turn)
            lease.committed = True
        refresh_consolidated(self._store, self._path, written)

    @contextmanager
    def _append_turn(self) -> Iterator[AppendLease | None]:
        """Hold the array's append lease (:mod:`zarr_dask.core.lease`) and re-read the metadata under it, on
        stores with conditional writes; elsewhere just re-read. Yields the lease (None without one)."""
        lease = AppendLease(self._store, self._path) if conditional(self._store) is not None else None
        if lease is not None:
            lease.acquire()
        try:
            node = nodes.read_node(self._store, self._path, self._metadata.zarr_format)
            if not isinstance(node, ArrayMetadataV2 | ArrayMetadataV3):
                raise ArrayNotFoundError("the array was removed meanwhile", store=self._store.url, path=self._path)
            if node != self._metadata:
                self._metadata = node
                self.__dict__.pop("_io", None)
            yield lease
        finally:
            if lease is not None:
                lease.release()

    def _set_attributes(self, attributes: dict[str, Any]) -> None:
        self._replace_metadata(dataclasses.replace(self._metadata, attributes=attributes))

    # ------------------------------------------------------------------ properties
    @property
    def metadata(self) -> ArrayMetadata:
        return self._metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._metadata.shape)

    @shape.setter
    def shape(self, value: Any) -> None:
        """``a.shape = (105,)`` resizes, as in zarr-python (:meth:`resize`)."""
        self.resize(value)

    @property
    def ndim(self) -> int:
        return len(self._metadata.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._metadata.data_type.numpy_dtype

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> tuple[int, ...]:
        """The chunk shape: the inner chunk shape of a sharded array (as zarr-python spells it).

        For a rectilinear grid: the largest chunk per dimension (see :attr:`read_chunk_sizes` for all). As in
        zarr-python, an array is "sharded" here only when ``sharding_indexed`` is its only codec; with other
        codecs around it (``[sharding_indexed, gzip]``) the chunks are the storage units, as the document's
        chunk grid says (the engine still reads and writes those as shards).
        """
        sharding = sharding_of(self.metadata)
        if sharding is not None and sharding.whole_chain:
            return sharding.inner_chunk_shape
        return self._largest(self._io.grids)

    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shard shape of a sharded array (:func:`~zarr_dask.spec.layout.sharding_of`), else None (the
        largest shard per dimension for a rectilinear shard grid; see :attr:`write_chunk_sizes` for all).

        None, as in zarr-python, when ``sharding_indexed`` is not the only codec (``[sharding_indexed, gzip]``,
        ``[transpose, sharding_indexed]``): :attr:`chunks` is then the storage unit. The engine still knows
        those units hold shards (:attr:`write_chunk_sizes`; they are read whole, :attr:`read_chunk_sizes`)."""
        sharding = sharding_of(self.metadata)
        if sharding is None or not sharding.whole_chain:
            return None
        return self._largest(self._io.grids)

    def _largest(self, grids: Any) -> tuple[int, ...]:
        return tuple(
            g.size(0) if isinstance(g, RegularDimGrid) else max((g.size(i) for i in range(g.nchunks())), default=0)
            for g in grids
        )

    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per dimension, the sizes of the chunks (inner chunks if sharded) inside the array, dask style
        (they sum to the shape; zarr-python 3.4's name)."""
        sharding = self._io.sharding
        if sharding is None:
            return self.write_chunk_sizes
        return tuple(
            tuple(min(c, n - i) for i in range(0, n, c)) for c, n in zip(sharding.chunk_shape, self.shape, strict=True)
        )

    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per dimension, the sizes of the storage units (shards if sharded, else chunks) inside the array,
        dask style: a write that keeps to these blocks never shares a stored object between two writers."""
        return tuple(tuple(g.data_size(i) for i in range(g.nchunks())) for g in self._io.grids)

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Number of chunks (inner chunks if sharded) along each dimension."""
        sharding = self._io.sharding
        if sharding is None:
            return tuple(self._metadata.chunk_grid.grid_shape(self.shape))
        return tuple(-(-n // c) for c, n in zip(sharding.chunk_shape, self.shape, strict=True))

    @property
    def nchunks(self) -> int:
        """Number of chunks (inner chunks if sharded) in the array."""
        return math.prod(self.cdata_shape)

    @property
    def fill_value(self) -> Any:
        fv = self._metadata.fill_value
        return None if fv is None else fv[()]

    @property
    def order(self) -> str:
        return self._order

    @property
    def config(self) -> ArrayConfig:
        """The runtime configuration: memory ``order`` of reads and ``write_empty_chunks`` (see
        :meth:`with_config`)."""
        return ArrayConfig(order=self._order, write_empty_chunks=self._write_empty_chunks)

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        return self._metadata.dimension_names

    @property
    def codecs(self) -> Any:
        return self._io.pipeline.to_json()

    def _roles(self) -> tuple[tuple[Any, ...], Any, tuple[Any, ...]]:
        """The v3 codec chain's JSON split as zarr-python names it: filters (array->array), the serializer
        (array->bytes) and the compressors (bytes->bytes)."""
        chain = list(self.codecs)
        n_filters = len(getattr(self._io.pipeline, "_aa", ()))
        return tuple(chain[:n_filters]), chain[n_filters], tuple(chain[n_filters + 1 :])

    @property
    def filters(self) -> tuple[Any, ...]:
        """zarr-python's ``Array.filters``, as codec JSON objects: the v3 array->array codecs, or the v2
        ``filters``."""
        if isinstance(self._metadata, ArrayMetadataV2):
            return tuple(self._metadata.filters or ())
        return self._roles()[0]

    @property
    def serializer(self) -> Any:
        """zarr-python's ``Array.serializer``, as a codec JSON object: the v3 array->bytes codec (None for v2)."""
        return None if isinstance(self._metadata, ArrayMetadataV2) else self._roles()[1]

    @property
    def compressors(self) -> tuple[Any, ...]:
        """zarr-python's ``Array.compressors``, as codec JSON objects: the v3 bytes->bytes codecs, or the v2
        ``compressor`` (a tuple of one or none)."""
        if isinstance(self._metadata, ArrayMetadataV2):
            return () if self._metadata.compressor is None else (self._metadata.compressor,)
        return self._roles()[2]

    @property
    def compressor(self) -> Any:
        """zarr-python's ``Array.compressor`` of a v2 array (its codec JSON object, or None); v3 arrays have
        :attr:`compressors`."""
        if not isinstance(self._metadata, ArrayMetadataV2):
            raise UnsupportedFeatureError(
                "a v3 array has no single 'compressor'; use Array.compressors", store=self._store.url, path=self._path
            )
        return self._metadata.compressor

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<zarr_dask.Array {self._store.url} {self.name} shape={self.shape} dtype={self.dtype}>"

    def _repr_html_(self) -> str:
        """Notebook display: shape, data type, chunks, shards, codecs and a picture of the chunk grid."""
        from zarr_dask.core.html import array_html

        return array_html(self)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Array)
            and other._store == self._store
            and other._path == self._path
            and other._metadata == self._metadata
        )

    def __hash__(self) -> int:
        return hash((self._store, self._path))

    # ------------------------------------------------------------------ indexing
    def _dims(self, selection: Any) -> tuple[DimSelection, ...]:
        try:
            return normalize_selection(selection, self.shape)
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None

    def get_basic_selection(self, selection: Any = Ellipsis, *, out: Any = None) -> Any:
        """Read a selection of integers, slices and Ellipsis; returns a NumPy array (a scalar for 0-d results),
        or writes it into ``out`` (an array of the selection's shape, see :meth:`_into`) and returns ``out``."""
        dims = self._dims(selection)
        result = finalize_output(self._io.read(dims), dims)
        if out is not None:
            return self._into(out, result)
        if self._order == "F" and result.ndim > 1:
            result = np.asfortranarray(result)
        return result[()] if result.ndim == 0 else result

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` (broadcast to the selection's shape) into a selection."""
        with self._writing(value):
            dims = self._dims(selection)
            full = expand_value(as_value(value, self.dtype), dims)
        self._io.write(dims, full)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        out = np.asarray(self[...])
        return out.astype(dtype) if dtype is not None else out

    # ------------------------------------------------------------------ changes
    def resize(self, *shape: Any) -> None:
        """Change the shape. Chunks wholly outside the new shape are deleted; chunks cut by the new edge
        have their outside part reset to the fill value, so growing again later shows fill, not old data.
        Growing clears what lies beyond the old shape first (rows a failed or killed writer left there never
        show up), then commits the shape. On stores with conditional writes a resize takes the array's append
        lease, so it never runs in the middle of an append.

        A rectilinear dimension grown past the sum of its edges gets one new edge covering the growth
        (rounded up to whole inner chunks when sharded); shrinking keeps the edges
        (:meth:`RectilinearChunkGrid.resized`)."""
        new_shape = tuple(int(s) for s in (shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape))
        if len(new_shape) != self.ndim:
            raise MetadataError(
                f"resize to {new_shape} changes the number of dimensions ({self.ndim})",
                store=self._store.url,
                path=self._path,
            )
        with self._append_turn() as lease:
            old_io, old_shape = self._io, self.shape
            grown = [d for d, (n, o) in enumerate(zip(new_shape, old_shape, strict=True)) if n > o]
            if grown:  # what a failed or killed writer left beyond the shape must not show up
                trim_chunks(self._store, self._path, old_io, old_shape, old_shape, grown, beyond=True,
                            write_empty_chunks=self._write_empty_chunks)  # fmt: skip
            self._replace_metadata(self._resized(new_shape), lease)
            shrunk = [d for d, (n, o) in enumerate(zip(new_shape, old_shape, strict=True)) if n < o]
            if shrunk:
                trim_chunks(self._store, self._path, old_io, old_shape, new_shape, shrunk,
                            write_empty_chunks=self._write_empty_chunks)  # fmt: skip

    def _resized(self, new_shape: tuple[int, ...]) -> ArrayMetadata:
        return resized_metadata(self._metadata, new_shape, self._io.sharding)

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Append ``data`` along ``axis``; returns the new shape.

        The rows are written beyond the stored shape first, then the new shape is committed by
        compare-and-swap, so readers never see rows that are not there yet. On stores with conditional writes
        the array's append lease makes concurrent appends (from any process) take turns."""
        data = as_value(data, self.dtype)
        if data.ndim != self.ndim or any(
            n != s for d, (n, s) in enumerate(zip(data.shape, self.shape, strict=True)) if d != axis % self.ndim
        ):
            raise ShapeMismatchError(
                f"cannot append data of shape {data.shape} along axis {axis} to an array of shape {self.shape}: "
                "every other dimension must match",
                store=self._store.url,
                path=self._path,
            )
        axis = axis % self.ndim
        with self._append_turn() as lease:
            check_no_incomplete_append(self._store, self._path, self._metadata)
            old = self.shape
            new = tuple(s + (data.shape[axis] if d == axis else 0) for d, s in enumerate(old))
            grown = Array(
                self._store, self._path, self._resized(new), allow_unsafe_codecs=self._allow_unsafe_codecs,
                write_empty_chunks=self._write_empty_chunks, coalescing=self._coalescing,
            )
            if lease is not None:  # the rows beyond the committed shape are written under the lease's fence
                grown.__dict__["_io"] = dataclasses.replace(grown._io, fence=lease.fence(old))
            grown[tuple(slice(old[axis], None) if d == axis else slice(None) for d in range(self.ndim))] = data
            self._replace_metadata(grown._metadata, lease)
        return new

    def update_attributes(self, new_attributes: Mapping[str, Any]) -> Array:
        self.attrs.update(new_attributes)
        return self

    # ------------------------------------------------------------------ info
    def _chunk_keys_stored(self) -> list[str]:
        """The stored keys of this array's storage units (shards if sharded), one listing."""
        return [key for key, _ in self._stored_units()]

    def _stored_units(self) -> list[tuple[str, tuple[int, ...]]]:
        prefix = key_prefix(self._path)
        grid_shape = self._metadata.chunk_grid.grid_shape(self.shape)
        found = []
        for key in self._store.list_prefix(prefix):
            try:
                coords = self._metadata.chunk_key_encoding.decode(key[len(prefix) :])
            except ZarrDaskError:
                continue
            if len(coords) == self.ndim and all(0 <= c < g for c, g in zip(coords, grid_shape, strict=True)):
                found.append((key, coords))
        return found

    @property
    def nchunks_initialized(self) -> int:
        """How many chunks are stored (one listing). Sharded: the inner chunks of every stored shard, each shard
        counted at its full size, as zarr-python counts them (so an edge shard may add chunks outside the
        array)."""
        sharding = self._io.sharding
        units = self._stored_units()
        if sharding is None:
            return len(units)
        inner = sharding.chunk_shape
        return sum(math.prod(s // c for s, c in zip(self._io.chunk_shape(k), inner, strict=True)) for _, k in units)

    def nbytes_stored(self) -> int:
        """Bytes stored under this array's prefix (metadata included); a method, as in zarr-python (one
        listing)."""
        sizes = self._store.list_prefix_sizes(key_prefix(self._path))
        return sum(sizes.values())

    @property
    def info(self) -> ArrayInfo:
        """A summary: shape, chunks, codecs, stored bytes and initialized chunks (lists the array's keys)."""
        return ArrayInfo(
            path=self._path,
            store=self._store.url,
            zarr_format=self.zarr_format,
            shape=self.shape,
            dtype=self.dtype,
            chunks=self.chunks,
            fill_value=self.fill_value,
            codecs=self.codecs,
            nchunks=self.nchunks,
            nchunks_initialized=self.nchunks_initialized,
            nbytes=self.nbytes,
            nbytes_stored=self.nbytes_stored(),
            shards=self.shards,
        )

    def info_complete(self) -> ArrayInfo:
        """All the information about the array, including what needs the store (stored bytes, initialized
        chunks), as zarr-python's ``Array.info_complete()``; here the same as :attr:`info`."""
        return self.info

    def with_config(self, config: Any) -> Array:
        """A new ``Array`` on the same store and node with another runtime configuration (zarr-python's
        ``Array.with_config``): ``config`` is a mapping (or an object with attributes) of ``order`` (``"C"`` or
        ``"F"``) and ``write_empty_chunks``; keys not given keep this array's values."""
        if isinstance(config, Mapping):
            given = dict(config)
        else:
            given = {k: getattr(config, k) for k in ("order", "write_empty_chunks") if hasattr(config, k)}
        unknown = sorted(set(given) - {"order", "write_empty_chunks"})
        order = given.get("order", self._order)
        if unknown or order not in ("C", "F"):
            raise MetadataError(
                f"with_config takes 'order' ('C' or 'F') and 'write_empty_chunks', got {given!r}",
                store=self._store.url,
                path=self._path,
            )
        return Array(
            self._store,
            self._path,
            self._metadata,
            allow_unsafe_codecs=self._allow_unsafe_codecs,
            write_empty_chunks=bool(given.get("write_empty_chunks", self._write_empty_chunks)),
            order=order,
            coalescing=self._coalescing,
        )

    def iter_chunk_coords(self) -> Iterator[tuple[int, ...]]:
        """Coordinates of every storage unit in the grid (shards if sharded, else chunks), C order."""
        dims = normalize_selection(Ellipsis, self.shape)
        for p in chunk_projections(dims, self._io.grids, self.shape):
            yield p.coords
