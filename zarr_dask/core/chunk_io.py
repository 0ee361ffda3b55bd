"""The only place that reads and writes chunks.

:class:`ChunkIO` binds one array's metadata to its store, codec pipeline and grid, resolved once. Reads fetch a
batch of chunk keys in one store call and decode each chunk straight into the output; writes encode whole
chunks (reading and merging only the chunks a selection covers partly) and store a batch in one call.
Batches run on a small thread pool (:mod:`zarr_dask.core.batches`): codec calls release the GIL and fsspec batches
are concurrent, so this is where a plain ``Array[...]`` gets its parallelism (a dask task runs its batches in its
own thread). How each key of a write is stored -- plainly, by compare-and-swap, created if absent, under a
fence -- is :mod:`zarr_dask.core.key_writes`.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from zarr_dask import native
from zarr_dask.codecs import ChunkSpec, CodecPipeline, pipeline_from_v2, pipeline_from_v3
from zarr_dask.codecs.base import BufferLike
from zarr_dask.codecs.pipeline import V3Pipeline
from zarr_dask.codecs.shard_access import (
    DEFAULT_COALESCING,
    BatchDecode,
    Coalescing,
    InnerPart,
    ShardRead,
    inner_parts,
    write_shard,
)
from zarr_dask.codecs.sharding import ShardingCodec
from zarr_dask.core.batches import fetch_ahead, io_threads, run_batches
from zarr_dask.core.indexing import ChunkProjection, DimSelection, chunk_projections
from zarr_dask.core.key_writes import is_fill, write_keys
from zarr_dask.core.lease import Fence
from zarr_dask.errors import (
    ChunkDecodeError,
    ChunkEncodeError,
    IndexingError,
    MetadataError,
    ZarrDaskError,
)
from zarr_dask.spec import ArrayMetadata, ArrayMetadataV2
from zarr_dask.spec.chunk_grid import RegularDimGrid
from zarr_dask.spec.layout import sharding_of
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.arena import ReadArena, read_arena
from zarr_dask.store.base import Parts
from zarr_dask.store.uploads import WriteBehind

_log = logging.getLogger("zarr_dask.core")
#: ``(shard coords, inner chunks touched, the selection covers the whole shard)``
ShardUnit = tuple[tuple[int, ...], list[InnerPart], bool]
#: what :meth:`ChunkIO._fetch_shards` fetched: the shards' reads, the ranges each still wanted, their bytes
ShardsFetched = tuple[list[ShardRead], list[list[tuple[str, int | None, int | None]]], list[Any]]
_SCRATCH = threading.local()
#: Bytes per store call on stores without batched I/O (local files, memory): small batches keep the stored
#: bytes in cache between reading and decoding (big chunks go one at a time, tiny ones in hundreds).
LOCAL_BATCH_BYTES = 2 << 20
#: Largest chunk the native reader reads (it allocates its buffers up front); larger ones take the Python path,
#: which checks each stored object's size against the chunk before allocating for it.
NATIVE_MAX_CHUNK_BYTES = 64 << 20
#: Decoded bytes of the inner chunks read per step from a shard on a store without batched I/O: a shard larger
#: than this is read in pieces (its index, then the pieces' byte ranges), so a whole read holds about this much
#: of stored bytes per thread rather than whole shards (a 1 GiB read of 64 MiB shards: 1.13x -> 1.0x its size).
LOCAL_SHARD_PIECE_BYTES = 8 << 20


def release_scratch() -> None:
    """Drop this thread's reusable decode buffers (one per chunk shape seen). Long-lived threads that read
    arrays of many chunk shapes call it when done, so the buffers do not outlive the work."""
    _SCRATCH.__dict__.pop("bufs", None)


def _items(out: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``out`` as opaque fixed-size items, which any dtype can export through the buffer protocol (datetimes
    cannot as themselves): what the native reader writes into."""
    return out.view(np.dtype((np.void, out.dtype.itemsize)))


@dataclass(frozen=True)
class ChunkIO:
    """Chunk-level reads and writes of one array (metadata resolved once)."""

    store: Store
    path: str
    metadata: ArrayMetadata
    allow_unsafe_codecs: bool = False
    write_empty_chunks: bool = False
    order: str = "C"
    coalescing: Coalescing = DEFAULT_COALESCING
    #: writes under an append lease: keys beyond the committed shape are created only if absent (see
    #: :mod:`zarr_dask.core.lease`)
    fence: Fence | None = None
    #: the array was just created by this write: keys that reach past its shape are first created if absent
    fresh: bool = False
    _spec_cache: dict[tuple[int, ...], ChunkSpec] = field(default_factory=dict, compare=False, repr=False)
    _shard_codecs: dict[tuple[int, ...], ShardingCodec] = field(default_factory=dict, compare=False, repr=False)
    _inner_batches: dict[tuple[int, ...], BatchDecode | None] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def prefix(self) -> str:
        return key_prefix(self.path)

    @cached_property
    def fill(self) -> np.ndarray[Any, Any]:
        """The value of missing chunks and of padding (v2 ``null`` fill → the dtype's default)."""
        fv = self.metadata.fill_value
        return self.metadata.data_type.default_fill_value() if fv is None else fv

    @cached_property
    def dtype(self) -> np.dtype[Any]:
        return self.metadata.data_type.numpy_dtype

    @cached_property
    def grids(self) -> tuple[Any, ...]:
        return tuple(self.metadata.chunk_grid.dim_grids(self.metadata.shape))

    @cached_property
    def pipeline(self) -> CodecPipeline:
        """The codec pipeline, built once per metadata document (kept in the metadata's memo)."""
        return self.metadata.memo(("pipeline", self.allow_unsafe_codecs), self._build_pipeline)

    def _build_pipeline(self) -> CodecPipeline:
        m = self.metadata
        try:
            if isinstance(m, ArrayMetadataV2):
                return pipeline_from_v2(
                    compressor=m.compressor,
                    filters=list(m.filters) if m.filters is not None else None,
                    data_type=m.data_type,
                    order=m.order,
                    allow_unsafe_codecs=self.allow_unsafe_codecs,
                )
            return pipeline_from_v3(
                list(m.codecs),
                data_type=m.data_type,
                chunk_shape=self.chunk_shape((0,) * len(m.shape)),
                allow_unsafe_codecs=self.allow_unsafe_codecs,
            )
        except ZarrDaskError as e:
            raise e.with_context(store=self.store.url, path=self.path) from None

    def chunk_shape(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(g.size(c) for g, c in zip(self.grids, coords, strict=True))

    def chunk_spec(self, coords: tuple[int, ...]) -> ChunkSpec:
        shape = self.chunk_shape(coords)
        spec = self._spec_cache.get(shape)
        if spec is None:
            order = self.metadata.order if isinstance(self.metadata, ArrayMetadataV2) else "C"
            spec = ChunkSpec(shape=shape, data_type=self.metadata.data_type, fill_value=self.fill, order=order)
            self._spec_cache[shape] = spec
        return spec

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        return self.prefix + self.metadata.chunk_key_encoding.encode(coords)

    # ------------------------------------------------------------------ shards
    @cached_property
    def sharding(self) -> ShardingCodec | None:
        """The ``sharding_indexed`` codec when inner chunks are the read unit (it is the whole codec chain,
        :attr:`zarr_dask.spec.layout.Sharding.whole_chain`), else None.

        Then shards are read partially (index, then coalesced inner-chunk ranges) and written inner chunk by
        inner chunk; a chain with codecs around the sharding codec is read and written as whole shards.
        """
        pipeline = self.pipeline
        layout = sharding_of(self.metadata)
        if layout is None or not layout.whole_chain or not isinstance(pipeline, V3Pipeline):
            return None
        codecs = pipeline.codecs
        assert len(codecs) == 1 and isinstance(codecs[0], ShardingCodec), codecs
        inner = codecs[0].chunk_shape
        for d, (g, n) in enumerate(zip(self.grids, inner, strict=True)):
            sizes = {g.size(0)} if isinstance(g, RegularDimGrid) else {g.size(i) for i in range(g.nchunks())}
            bad = sorted(s for s in sizes if s % n)
            if bad:
                raise MetadataError(
                    f"shard size {bad[0]} along dimension {d} is not a multiple of the inner chunk size {n} of "
                    "'sharding_indexed'; every shard edge must be a multiple of the inner chunk shape",
                    store=self.store.url,
                    path=self.path,
                )
        return codecs[0]

    def shard_codec(self, coords: tuple[int, ...]) -> ShardingCodec:
        """The sharding codec bound to the shape of the shard at ``coords`` (sharded arrays only)."""
        shape = self.chunk_shape(coords)
        codec = self._shard_codecs.get(shape)
        if codec is None:
            assert self.sharding is not None
            codec = self._shard_codecs[shape] = self.sharding.bind(self.chunk_spec(coords))
        return codec

    @property
    def write_unit_shape(self) -> tuple[int | tuple[int, ...], ...]:
        """The storage unit a writer owns: the shard shape if sharded, else the chunk shape.

        For a rectilinear grid a dimension with varying edges gives the tuple of the (stored) sizes of the
        chunks that cover the array instead of an int.

        Examples
        --------
        >>> import zarr_dask
        >>> a = zarr_dask.create_array("memory://doc-unit", shape=(30, 8), dtype="u1", chunks=(5, 4), shards=(10, 8))
        >>> a._io.write_unit_shape
        (10, 8)
        >>> b = zarr_dask.create_array("memory://doc-unit-r", shape=(30, 8), dtype="u1", chunks=((10, 20), 4))
        >>> b._io.write_unit_shape
        ((10, 20), 4)
        """
        return tuple(
            g.size(0) if isinstance(g, RegularDimGrid) else tuple(g.size(i) for i in range(g.nchunks()))
            for g in self.grids
        )

    @cached_property
    def local_batch(self) -> int:
        """Storage keys per store call on stores without batched I/O (about :data:`LOCAL_BATCH_BYTES`)."""
        key_bytes = self.dtype.itemsize * math.prod(int(g.size(0)) if g.nchunks() else 1 for g in self.grids)
        return max(1, LOCAL_BATCH_BYTES // max(key_bytes, 1))

    def _data_shape(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(g.data_size(c) for g, c in zip(self.grids, coords, strict=True))

    def _shard_error(self, key: str, e: ZarrDaskError) -> ChunkDecodeError:
        return ChunkDecodeError(f"shard {key!r}: {e.problem}", store=self.store.url, path=self.path)

    def _read_shards(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
        """Read shards partially: one batched call for indexes (or whole shards), one for inner chunks; large
        shards of stores without batched I/O piece by piece."""
        assert self.sharding is not None
        inner = self.sharding.chunk_shape
        units: list[ShardUnit] = []
        piece = max(1, LOCAL_SHARD_PIECE_BYTES // (math.prod(inner) * self.dtype.itemsize))
        for p in projections:
            unit = self._shard_unit(p)
            parts = unit[1]
            if self.store.batched_io or len(parts) <= piece:
                units.append(unit)
                continue
            for i in range(0, len(parts), piece):  # local files, memory: piece by piece, fetched then decoded
                self.read_shard_units(out, [(p.coords, parts[i : i + piece], False)])
        if units:
            self.read_shard_units(out, units)

    def _shard_unit(self, p: ChunkProjection) -> ShardUnit:
        """The inner chunks of the shard ``p`` selects, as ``(shard coords, parts, complete)``."""
        assert self.sharding is not None
        parts = inner_parts(p.chunk_sel, p.out_sel, self.sharding.chunk_shape, self._data_shape(p.coords))
        return p.coords, parts, p.complete

    def read_shard_units(self, out: np.ndarray[Any, Any], units: Sequence[ShardUnit]) -> None:
        """Read the inner chunks ``parts`` of each ``(shard coords, parts, complete)`` into ``out``: one batched
        call for the indexes (or whole shards), one for the inner chunks' coalesced byte ranges."""
        with read_arena() as arena:  # the fetched bytes live until decoded: reuse memory, no page faults
            self._decode_shards(out, units, self._fetch_shards(units, arena))

    def _fetch_shards(self, units: Sequence[ShardUnit], arena: ReadArena | None) -> ShardsFetched:
        """The I/O of :meth:`read_shard_units` (``arena``: where a store may place the bytes; None: not in an
        arena, for a fetch in another thread)."""
        reads = [
            ShardRead.create(
                self.chunk_key(coords),
                self.shard_codec(coords),
                self.chunk_spec(coords),
                parts,
                complete=complete,
                config=self.coalescing,
            )
            for coords, parts, complete in units
        ]
        get = self.store.get_ranges_into
        first = get([r.first_request() for r in reads], arena)
        wanted: list[list[tuple[str, int | None, int | None]]] = []
        for r, got in zip(reads, first, strict=True):
            try:
                wanted.append(r.plan(got))
            except ZarrDaskError as e:
                raise self._shard_error(r.key, e) from e
        return reads, wanted, get([q for w in wanted for q in w], arena) if any(wanted) else []

    def _decode_shards(self, out: np.ndarray[Any, Any], units: Sequence[ShardUnit], got: ShardsFetched) -> None:
        reads, wanted, fetched = got
        pos = 0
        for r, w, (coords, _, _) in zip(reads, wanted, units, strict=True):
            try:
                r.decode_into(out, fetched[pos : pos + len(w)], self._scratch, self._inner_batch(coords))
            except ZarrDaskError as e:
                raise self._shard_error(r.key, e) from e
            pos += len(w)

    def _inner_batch(self, coords: tuple[int, ...]) -> BatchDecode | None:
        """The native reader's batch decode for the inner chunks of the shard at ``coords``, when it decodes
        their codec (any store: the shard's bytes are already in memory); None otherwise."""
        shape = self.chunk_shape(coords)
        if shape in self._inner_batches:
            return self._inner_batches[shape]
        decode: BatchDecode | None = None
        codec = self.shard_codec(coords)
        inner = codec.inner_spec(self.chunk_spec(coords))
        name = codec.inner_pipeline.direct_codec(inner) if self._fill_bytes is not None else None
        native_id = None if name is None else native.codec_id(name)
        if native_id is not None:
            fill, inner_shape = self._fill_bytes, inner.shape

            def decode(
                sources: list[BufferLike | None], parts: list[InnerPart], out: np.ndarray[Any, Any]
            ) -> list[int]:
                left: list[int] = native.decode_chunks(
                    sources, parts, _items(out), inner_shape, native_id, fill, self._scratch(inner_shape)
                )
                return left

        self._inner_batches[shape] = decode
        return decode

    # ------------------------------------------------------------------ decode / encode one chunk
    def decode_chunk(self, key: str, data: BufferLike, coords: tuple[int, ...]) -> np.ndarray[Any, Any]:
        try:
            return self.pipeline.decode(data, self.chunk_spec(coords))
        except ZarrDaskError as e:
            raise ChunkDecodeError(f"chunk {key!r}: {e.problem}", store=self.store.url, path=self.path) from e
        except Exception as e:  # codec libraries raise all sorts of things on corrupt input
            raise ChunkDecodeError(
                f"chunk {key!r} cannot be decoded ({type(e).__name__}: {e}); the chunk is corrupt or was "
                "written with different codecs than the metadata says",
                store=self.store.url,
                path=self.path,
            ) from e

    def encode_chunk(self, key: str, chunk: np.ndarray[Any, Any], coords: tuple[int, ...]) -> bytes:
        try:
            return self.pipeline.encode(chunk, self.chunk_spec(coords))
        except ZarrDaskError as e:
            raise e.with_context(store=self.store.url, path=self.path) from None
        except Exception as e:
            raise ChunkEncodeError(
                f"chunk {key!r} cannot be encoded ({type(e).__name__}: {e})", store=self.store.url, path=self.path
            ) from e

    # ------------------------------------------------------------------ reads
    def _scratch(self, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
        """A reusable per-thread buffer for one chunk (no fresh allocation, so no page faults, per chunk)."""
        bufs: dict[tuple[Any, ...], np.ndarray[Any, Any]] = _SCRATCH.__dict__.setdefault("bufs", {})
        k = (shape, self.dtype)  # not dtype.str: every record and ml_dtypes type of a size is "|V<n>"
        buf = bufs.get(k)
        if buf is None:
            if len(bufs) > 8:
                bufs.clear()
            buf = bufs[k] = np.empty(shape, dtype=self.dtype)
        return buf

    def decode_chunk_into(self, key: str, data: BufferLike, p: ChunkProjection, out: np.ndarray[Any, Any]) -> None:
        """Decode one chunk into its place in ``out``: straight into it when the chunk is wholly selected and
        its place is contiguous, else through a reused scratch buffer."""
        spec = self.chunk_spec(p.coords)
        if self.dtype.kind == "O":
            out[p.out_sel] = self.decode_chunk(key, data, p.coords)[p.chunk_sel]
            return
        try:
            where: tuple[Any, ...] = (*p.out_sel, Ellipsis)
            target = out[where]  # always a view, also for 0-d arrays
            if target.shape == spec.shape and target.flags.c_contiguous:
                self.pipeline.decode_into(data, spec, target)
                return
            self.pipeline.check_stored(data, spec)  # before the scratch buffer is allocated
            scratch = self._scratch(spec.shape)
            self.pipeline.decode_into(data, spec, scratch)
        except ZarrDaskError as e:
            raise ChunkDecodeError(f"chunk {key!r}: {e.problem}", store=self.store.url, path=self.path) from e
        except Exception as e:
            raise ChunkDecodeError(
                f"chunk {key!r} cannot be decoded ({type(e).__name__}: {e})", store=self.store.url, path=self.path
            ) from e
        out[p.out_sel] = scratch[p.chunk_sel]

    def read_into(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
        """Fetch the chunks of ``projections`` in one store call and decode each into ``out``.

        For a sharded array (``projections`` over the shard grid) each shard's index is read once (a prefix or
        suffix range), then the needed inner chunks' byte ranges, coalesced: one ``get_ranges`` call for all
        indexes and one for all data. A shard the selection covers, or needs most of, is fetched whole; on
        stores without batched I/O (local files, memory) a shard needing more than
        :data:`LOCAL_SHARD_PIECE_BYTES` of inner chunks is read piece by piece instead (bounded memory).
        """
        if self.sharding is not None:
            self._read_shards(out, projections)
            return
        if self._native is not None:
            self._read_native(out, projections, *self._native)
            return
        self._read_chunks(out, projections)

    @cached_property
    def _native_codec(self) -> tuple[int, bytes, tuple[int, ...]] | None:
        """``(codec id, fill bytes, chunk shape)`` when the native code (:mod:`zarr_dask.native`) can decode this
        array's chunks: an unsharded regular grid, a fixed-size type and a direct codec."""
        if self._fill_bytes is None or self.sharding is not None:
            return None
        if not all(isinstance(g, RegularDimGrid) for g in self.grids):
            return None
        spec = self.chunk_spec((0,) * len(self.grids))
        name = self.pipeline.direct_codec(spec)
        codec = None if name is None else native.codec_id(name)
        if codec is None or math.prod(spec.shape) * self.dtype.itemsize > NATIVE_MAX_CHUNK_BYTES:
            return None  # (too large: its buffers would be allocated before a byte is read)
        return codec, self._fill_bytes, spec.shape

    @cached_property
    def _native(self) -> tuple[int, int, bytes, tuple[int, ...]] | None:
        """``(codec id, read buffer size, fill bytes, chunk shape)`` when the native reader can also read this
        array's files: :attr:`_native_codec` on a local store."""
        if self._native_codec is None or self.store.read_paths([]) is None:
            return None
        codec, fill, shape = self._native_codec
        nbytes = math.prod(shape) * self.dtype.itemsize
        # room for an incompressible chunk plus any compressor's overhead; larger files take the Python path
        return codec, nbytes + nbytes // 64 + 4096, fill, shape

    @cached_property
    def _fill_bytes(self) -> bytes | None:
        """One fill item's bytes when the native reader may read this array at all (it is built and on, and
        the data type has a fixed, non-zero size), else None."""
        if not native.available() or self.dtype.hasobject or not self.dtype.itemsize:
            return None
        return np.asarray(self.fill, dtype=self.dtype).tobytes()

    def _read_native(
        self,
        out: np.ndarray[Any, Any],
        projections: Sequence[ChunkProjection],
        codec: int,
        cap: int,
        fill: bytes,
        shape: tuple[int, ...],
    ) -> None:
        """Read a batch through the native reader; the chunks it leaves go through the Python path."""
        projections = list(projections)
        paths = self.store.read_paths([self.chunk_key(p.coords) for p in projections])
        assert paths is not None  # _native checked the store
        with read_arena() as arena:
            _files, nbytes, left = native.read_chunks(
                paths, projections, _items(out), shape, codec, fill, arena.take(cap), self._scratch(shape),
                self.store.read_flags,
            )
        self.store.counters.add(get=len(projections) - len(left), bytes_read=nbytes)
        if left:
            self._read_chunks(out, [projections[i] for i in left])

    def _read_chunks(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
        keys = [self.chunk_key(p.coords) for p in projections]
        with read_arena() as arena:
            self._decode_chunks(out, projections, self.store.get_many_into(keys, arena))

    def _decode_chunks(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection], got: Any) -> None:
        """Decode the fetched values ``got`` (by key) of ``projections`` into ``out`` (fill where missing)."""
        keys = [self.chunk_key(p.coords) for p in projections]
        if self._native_codec is not None:  # fetched bytes (a remote store): decoded in place, GIL released once
            codec, fill, shape = self._native_codec
            sources = [got.get(k) for k in keys]
            left = native.decode_chunks(sources, list(projections), _items(out), shape, codec, fill,
                                        self._scratch(shape))  # fmt: skip
            keys, projections = [keys[i] for i in left], [projections[i] for i in left]
        for key, p in zip(keys, projections, strict=True):
            data = got.get(key)
            if data is None:
                out[p.out_sel] = self.fill
            else:
                self.decode_chunk_into(key, data, p, out)

    def _read_ahead(self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection]) -> None:
        """A remote read in the calling thread (a dask task's): the storage units' fetches all start at once, in
        groups (:func:`~zarr_dask.core.batches.fetch_ahead`), and each group is decoded here as soon as it has
        arrived, while the others are still on the way; the same requests as one batched call."""
        if self.sharding is not None:
            units = [self._shard_unit(p) for p in projections]
            for shards, got in fetch_ahead(lambda us: self._fetch_shards(us, None), units):
                self._decode_shards(out, shards, got)
            return

        def fetch(batch: Sequence[ChunkProjection]) -> dict[str, Any]:
            return self.store.get_many_into([self.chunk_key(p.coords) for p in batch], None)

        for batch, values in fetch_ahead(fetch, projections):
            self._decode_chunks(out, batch, values)

    def read(self, dims: Sequence[DimSelection], *, threads: int | None = None) -> np.ndarray[Any, Any]:
        """Read a normalised selection (full rank, increasing order along each axis)."""
        shape = tuple(d.count for d in dims)
        try:
            out = np.empty(shape, dtype=self.dtype)
        except ValueError:  # more bytes than NumPy can address (even with a zero-length axis beside a huge one)
            raise IndexingError(
                f"the selection has shape {shape} of {self.dtype}, more than NumPy can hold in one array; select "
                "a smaller region (or read the array in blocks with from_zarr)",
                store=self.store.url,
                path=self.path,
            ) from None
        if out.size == 0:
            return out
        projections = list(chunk_projections(dims, self.grids, self.metadata.shape))
        _log.debug("%s /%s: read %d storage keys", self.store.url, self.path, len(projections))
        self.read_projections(out, projections, threads=threads)
        return out

    def batches(self, projections: Sequence[ChunkProjection]) -> list[Sequence[ChunkProjection]]:
        """How storage units are grouped into store calls: all in one on remote stores (one concurrent call),
        :attr:`local_batch` at a time on local ones (the stored bytes stay in cache until decoded)."""
        if self.store.batched_io or not projections:
            return [projections]
        n = self.local_batch
        return [projections[i : i + n] for i in range(0, len(projections), n)]

    def read_projections(
        self, out: np.ndarray[Any, Any], projections: Sequence[ChunkProjection], *, threads: int | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:  # fmt: skip
        """:meth:`read_into` over the batches of ``projections`` (storage units): in the calling thread with
        ``threads=1`` (what a dask task does), else in parallel (:func:`run_batches`; ``pool`` for local
        stores, default the shared I/O pool)."""
        if (io_threads() if threads is None else threads) <= 1 and self.store.fetches_wait and len(projections) > 1:
            self._read_ahead(out, projections)
            return
        self._run(lambda batch: self.read_into(out, batch), projections, threads, pool)

    def _run(
        self, func: Callable[[Sequence[ChunkProjection]], None], projections: Sequence[ChunkProjection],
        threads: int | None, pool: ThreadPoolExecutor | None,
    ) -> None:  # fmt: skip
        if (io_threads() if threads is None else threads) <= 1 or len(projections) <= 1:
            for batch in self.batches(projections):
                func(batch)
            return
        remote = self.store.batched_io
        run_batches(func, projections, threads=threads, batched_io=remote, pool=None if remote else pool,
                    batch_size=None if remote else self.local_batch)  # fmt: skip

    # ------------------------------------------------------------------ writes
    def _new_chunk(self, coords: tuple[int, ...]) -> np.ndarray[Any, Any]:
        return np.full(self.chunk_shape(coords), self.fill, dtype=self.dtype)

    def _assemble(
        self, p: ChunkProjection, value: np.ndarray[Any, Any], existing: BufferLike | None, key: str
    ) -> np.ndarray[Any, Any]:
        where: tuple[Any, ...] = (*p.out_sel, Ellipsis)
        piece: np.ndarray[Any, Any] = value[where]  # a view, also for 0-d (object) arrays where value[()] would be the element
        shape = self.chunk_shape(p.coords)
        if p.complete and piece.shape == shape:
            return piece
        if existing is None:  # (a complete key reaching past the shape keeps what is stored beyond it)
            chunk = self._new_chunk(p.coords)
        else:
            chunk = np.array(self.decode_chunk(key, existing, p.coords), dtype=self.dtype, copy=True)
        chunk[p.chunk_sel] = piece
        return chunk

    def _chunk_bytes(
        self, key: str, p: ChunkProjection, value: np.ndarray[Any, Any], existing: BufferLike | None, parts: bool = False
    ) -> bytes | None:
        """The new stored bytes of one chunk (``existing`` merged where the write covers it only partly), or
        None when the chunk is all fill value and empty chunks are not written (``parts``: unused, a chunk is
        one buffer)."""
        chunk = self._assemble(p, value, existing, key)
        if not self._keeps_empty(p.coords) and is_fill(chunk, self.fill):
            return None
        return self.encode_chunk(key, chunk, p.coords)

    def _shard_bytes(
        self, key: str, unit: tuple[tuple[int, ...], list[InnerPart]], value: np.ndarray[Any, Any],
        existing: BufferLike | None, pieces: bool = False,
    ) -> bytes | Parts | None:  # fmt: skip
        """The new stored value of one shard (``unit``: its coordinates and the inner chunks written, merged with
        ``existing`` inner chunk by inner chunk), or None when no inner chunk is left to store; ``pieces``: as a
        :class:`~zarr_dask.store.base.Parts` of its index and inner chunks, not joined."""
        coords, parts = unit
        check = None if self._keeps_empty(coords) else (lambda chunk: is_fill(chunk, self.fill))
        try:
            new = write_shard(self.shard_codec(coords), self.chunk_spec(coords), parts, value, existing, is_fill=check,
                              pieces=pieces)  # fmt: skip
        except ChunkDecodeError as e:
            raise self._shard_error(key, e) from e
        except ZarrDaskError as e:
            raise e.with_context(store=self.store.url, path=self.path) from None
        except Exception as e:
            raise ChunkEncodeError(
                f"shard {key!r} cannot be encoded ({type(e).__name__}: {e})", store=self.store.url, path=self.path
            ) from e
        return Parts(new) if isinstance(new, list) else new

    def write_from(
        self, value: np.ndarray[Any, Any], projections: Sequence[ChunkProjection], *, behind: WriteBehind | None = None,
        sizes: dict[str, int] | None = None,
    ) -> None:  # fmt: skip
        """Write the storage keys of ``projections`` (chunks, or shards when sharded) from ``value`` (full rank,
        aligned with the selection).

        A key the selection covers whole is encoded and stored (or deleted when it is all fill value) with no
        read and no condition. A key covered only partly is an optimistic transaction when the store can make
        conditional writes (:func:`~zarr_dask.store.versioned.conditional`): read with its version, merge,
        write only if the version is unchanged, and on a conflict read and merge again (see
        :meth:`_merge_conditionally`), so independent writers of the same key never lose each other's data.
        Other stores read, merge and write the key once, protected only against the writers of this process's
        plan (an :class:`~zarr_dask.errors.UnprotectedWriteWarning` says so once per array). ``behind``: the
        write's deferred uploads, to which the keys covered whole are offered (:mod:`zarr_dask.store.uploads`).
        """
        if self.sharding is not None:
            inner = self.sharding.chunk_shape
            self.write_shard_units(
                value,
                [(p.coords, inner_parts(p.chunk_sel, p.out_sel, inner, self._data_shape(p.coords)), p.complete) for p in projections],
                behind=behind,
                sizes=sizes,
            )
            return
        items = [(self.chunk_key(p.coords), p.coords, p.complete, p) for p in projections]
        write_keys(self, value, items, self._chunk_bytes, behind, sizes)

    def write_shard_units(
        self, value: np.ndarray[Any, Any], units: Sequence[ShardUnit], *, behind: WriteBehind | None = None,
        sizes: dict[str, int] | None = None,
    ) -> None:  # fmt: skip
        """Write the inner chunks ``parts`` of each ``(shard coords, parts, complete)`` from ``value``; a shard not
        ``complete`` is merged with its stored inner chunks as :meth:`write_from` merges partly covered keys."""
        write_keys(
            self,
            value,
            [(self.chunk_key(coords), coords, complete, (coords, parts)) for coords, parts, complete in units],
            self._shard_bytes,
            behind,
            sizes,
        )

    def _keeps_empty(self, coords: tuple[int, ...]) -> bool:
        """Store this key even when it is all fill value (``write_empty_chunks``). An append's all-fill keys are
        not stored by default either: such an absent key is the one thing a writer that stalled past its lease
        could still create (see ``docs/safe-writes.md``); ``write_empty_chunks=True`` closes that too."""
        return self.write_empty_chunks

    def write(self, dims: Sequence[DimSelection], value: np.ndarray[Any, Any], *, threads: int | None = None) -> None:
        """Write ``value`` (full rank, increasing order) into a normalised selection."""
        if any(d.count == 0 for d in dims):
            return
        projections = list(chunk_projections(dims, self.grids, self.metadata.shape))
        _log.debug("%s /%s: write %d storage keys", self.store.url, self.path, len(projections))
        self.write_projections(value, projections, threads=threads)

    def write_projections(
        self, value: np.ndarray[Any, Any], projections: Sequence[ChunkProjection], *, threads: int | None = None,
        behind: WriteBehind | None = None, sizes: dict[str, int] | None = None,
    ) -> None:  # fmt: skip
        """:meth:`write_from` over the batches of ``projections``, as :meth:`read_projections` reads them."""
        self._run(lambda batch: self.write_from(value, batch, behind=behind, sizes=sizes), projections, threads, None)
