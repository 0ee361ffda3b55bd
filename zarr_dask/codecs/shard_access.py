"""Partial reads and writes of ``sharding_indexed`` shards, without IO (the caller fetches the bytes).

A read of one shard is a small state machine driven by ``core.chunk_io``, so that every shard of a batch
shares the same two store calls:

1. :meth:`ShardRead.first_request` — the index (a prefix or suffix byte range), or the whole shard when the
   selection covers it or needs most of it;
2. :meth:`ShardRead.plan` — decode and validate the index, then coalesce the byte ranges of the needed inner
   chunks (:func:`coalesce`, tuned by :class:`Coalescing`);
3. :meth:`ShardRead.decode_into` — check the fetched ranges and decode every needed inner chunk straight
   into its place in the output (through a scratch buffer when that place is not contiguous).

:func:`write_shard` builds a shard value from new data and, for a shard only partly covered, the shard's
current bytes: untouched inner chunks are copied as bytes (never decoded and re-encoded), partly covered
ones are decoded, merged and re-encoded, and a shard left without any stored inner chunk is not stored.

Corrupt shards (bad checksum, truncated index, entries past the end or overlapping the index) raise
:class:`~zarr_dask.errors.ChunkDecodeError` naming the problem; the caller adds the key, store and node.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from zarr_dask.codecs.base import BufferLike, ChunkSpec, as_byte_view
from zarr_dask.codecs.sharding import EMPTY, ShardingCodec
from zarr_dask.errors import ChunkDecodeError, MetadataError

__all__ = [
    "DEFAULT_COALESCING",
    "Coalescing",
    "InnerPart",
    "ShardRead",
    "coalesce",
    "inner_parts",
    "write_shard",
]

#: ``(key, start, end)`` with fsspec semantics, as ``Store.get_ranges`` takes it.
Request = tuple[str, int | None, int | None]
Scratch = Callable[[tuple[int, ...]], np.ndarray[Any, Any]]
#: Decodes many inner chunks at once (the native reader): ``(sources, parts, out) -> indices left undone``,
#: where ``sources[i]`` holds the stored bytes of ``parts[i]`` (None: not stored, so filled).
BatchDecode = Callable[[list["BufferLike | None"], list["InnerPart"], np.ndarray[Any, Any]], list[int]]


@dataclass(frozen=True, kw_only=True)
class Coalescing:
    """How the byte ranges of the inner chunks of one shard are merged into store requests.

    Parameters
    ----------
    max_gap
        Two needed ranges at most this many bytes apart are fetched as one request (the gap is read and
        dropped). Default 1 MiB: about what an object store delivers in one round trip.
    max_request
        Largest merged request in bytes (a single inner chunk larger than this is still one request).
    whole_shard_fraction
        Fetch the whole shard in one request, without reading its index first, when the selection needs at
        least this fraction of the shard's inner chunks. A selection that covers the shard, or that leaves out
        inner chunks holding at most ``max_gap`` bytes (uncompressed) in total, is always read whole.

    Examples
    --------
    >>> Coalescing(max_gap=0).max_request
    67108864
    """

    max_gap: int = 1 << 20
    max_request: int = 64 << 20
    whole_shard_fraction: float = 0.8

    def __post_init__(self) -> None:
        for name in ("max_gap", "max_request"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise MetadataError(f"Coalescing.{name} must be a non-negative integer, got {value!r}")
        f = self.whole_shard_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1:
            raise MetadataError(f"Coalescing.whole_shard_fraction must be in (0, 1], got {f!r}")


DEFAULT_COALESCING = Coalescing()


# ---------------------------------------------------------------------------------------- projections
class InnerPart(NamedTuple):
    """One inner chunk of a shard touched by a selection (a named tuple, laid out like a chunk projection:
    the native reader takes both).

    ``inner_sel`` indexes the inner chunk, ``out_sel`` the output (or the value written); ``complete`` means
    the selection covers every element of the inner chunk that lies inside the array.
    """

    coords: tuple[int, ...]
    inner_sel: tuple[slice, ...]
    out_sel: tuple[slice, ...]
    complete: bool
    inside: bool  # the inner chunk lies wholly inside the array


def _project(sel: slice, out: slice, size: int, extent: int) -> list[tuple[int, slice, slice, bool, bool]]:
    """Per inner chunk along one axis: (index, inner slice, out slice, complete, inside)."""
    step = sel.step or 1
    first, last = sel.start, sel.stop - 1
    if sel.stop <= sel.start:
        return []
    found = []
    for c in range(first // size, last // size + 1):
        c0, c1 = c * size, min((c + 1) * size, extent)
        f = first if first >= c0 else first + -(-(c0 - first) // step) * step
        if f >= c1 or f > last:
            continue
        n = -(-(min(c1, last + 1) - f) // step)
        o0 = out.start + (f - first) // step
        complete = step == 1 and f == c0 and f + n == c1
        found.append((c, slice(f - c0, f - c0 + (n - 1) * step + 1, step), slice(o0, o0 + n), complete, c1 - c0 == size))
    return found


def inner_parts(
    chunk_sel: Sequence[slice],
    out_sel: Sequence[slice],
    inner_shape: Sequence[int],
    data_shape: Sequence[int],
) -> list[InnerPart]:
    """The inner chunks a selection of one shard touches, in C order.

    Parameters
    ----------
    chunk_sel
        The selection inside the shard: one increasing slice per axis (any positive step).
    out_sel
        Where the selected elements go in the output: one unit-step slice per axis.
    inner_shape
        The inner chunk shape.
    data_shape
        The part of the shard inside the array (the shard shape clipped to the array's extent).

    Examples
    --------
    >>> [p.coords for p in inner_parts((slice(1, 5, 1),), (slice(0, 4),), (2,), (6,))]
    [(0,), (1,), (2,)]
    >>> inner_parts((slice(2, 4, 1),), (slice(0, 2),), (2,), (6,))[0].complete
    True
    """
    per_dim = [
        _project(s, o, n, e) for s, o, n, e in zip(chunk_sel, out_sel, inner_shape, data_shape, strict=True)
    ]
    if not per_dim:
        return [InnerPart((), (), (), True, True)]
    return [
        InnerPart(
            coords=tuple(d[0] for d in combo),
            inner_sel=tuple(d[1] for d in combo),
            out_sel=tuple(d[2] for d in combo),
            complete=all(d[3] for d in combo),
            inside=all(d[4] for d in combo),
        )
        for combo in itertools.product(*per_dim)
    ]


# ---------------------------------------------------------------------------------------- coalescing
@dataclass(slots=True)
class Group:
    """One merged request: bytes ``[start, end)`` of the shard serving the inner chunks ``members``."""

    start: int
    end: int
    members: list[int] = field(default_factory=list)


def coalesce(spans: Sequence[tuple[int, int]], config: Coalescing = DEFAULT_COALESCING) -> list[Group]:
    """Merge byte ranges ``(start, end)`` that are at most ``max_gap`` apart, up to ``max_request`` bytes.

    Returns the groups sorted by start; ``members`` are indexes into ``spans``.

    Examples
    --------
    >>> [(g.start, g.end, g.members) for g in coalesce([(100, 200), (0, 50), (65, 90)], Coalescing(max_gap=10))]
    [(0, 50, [1]), (65, 200, [2, 0])]
    """
    groups: list[Group] = []
    for i in sorted(range(len(spans)), key=lambda k: spans[k]):
        start, end = spans[i]
        g = groups[-1] if groups else None
        if (
            g is not None
            and start - g.end <= config.max_gap
            and max(end, g.end) - g.start <= config.max_request
        ):
            g.end = max(g.end, end)
            g.members.append(i)
        else:
            groups.append(Group(start, end, [i]))
    return groups


# ---------------------------------------------------------------------------------------------- reads
@dataclass
class ShardRead:
    """Reading the inner chunks ``parts`` of the shard ``key`` (one shard of a batch; see the module doc)."""

    key: str
    codec: ShardingCodec  # bound to the shard's shape
    spec: ChunkSpec  # the shard's spec (full shard shape)
    parts: list[InnerPart]
    whole: bool
    config: Coalescing = DEFAULT_COALESCING
    _index: np.ndarray[Any, Any] | None = None
    _whole_view: memoryview | None = None
    _groups: list[Group] = field(default_factory=list)
    _spans: list[tuple[int, int]] = field(default_factory=list)
    _owner: list[int] = field(default_factory=list)  # part number of each span
    _missing: bool = False

    @classmethod
    def create(
        cls, key: str, codec: ShardingCodec, spec: ChunkSpec, parts: list[InnerPart], *, complete: bool,
        config: Coalescing = DEFAULT_COALESCING,
    ) -> ShardRead:
        """Decide up front whether the whole shard is fetched (see :class:`Coalescing`)."""
        n = math.prod(codec.chunks_per_shard)
        wasted = (n - len(parts)) * math.prod(codec.chunk_shape) * spec.dtype.itemsize
        whole = complete or len(parts) >= config.whole_shard_fraction * n or wasted <= config.max_gap
        return cls(key=key, codec=codec, spec=spec, parts=parts, whole=whole, config=config)

    @property
    def missing(self) -> bool:
        """True when the shard is not stored (every inner chunk reads as the fill value)."""
        return self._missing

    def first_request(self) -> Request:
        """The whole shard, or just its index."""
        if self.whole:
            return (self.key, None, None)
        return (self.key, *self.codec.index_request())

    def plan(self, first: BufferLike | None) -> list[Request]:
        """Take the answer to :meth:`first_request`; return the payload ranges still to fetch."""
        if first is None:
            self._missing = True
            return []
        if self.whole:
            view = as_byte_view(first)
            if len(view) < self.codec.index_size():
                raise ChunkDecodeError(
                    f"shard is {len(view)} bytes, smaller than its {self.codec.index_size()}-byte index: "
                    "truncated or corrupt"
                )
            start, stop = self.codec.index_range(len(view))
            self._index = self.codec.decode_index(view[start:stop], len(view))
            self._whole_view = view
            return []
        self._index = index = self.codec.decode_index(first, None)
        for i, part in enumerate(self.parts):
            off, nb = (int(v) for v in index[part.coords])
            if off != EMPTY:
                self._spans.append((off, off + nb))
                self._owner.append(i)
        self._groups = coalesce(self._spans, self.config)
        requests: list[Request] = [(self.key, g.start, g.end) for g in self._groups]
        if requests and self.codec.index_location == "end":
            # read the index's length past the last needed byte: a short answer proves an entry overlaps the
            # index or lies past the end (the shard's size is not known from a suffix read)
            last = max(range(len(self._groups)), key=lambda k: self._groups[k].end)
            requests[last] = (self.key, self._groups[last].start, self._groups[last].end + self.codec.index_size())
        return requests

    def _buffers(self, fetched: Sequence[BufferLike | None]) -> dict[int, tuple[memoryview, int]]:
        """Check the fetched groups; map each span to (buffer, offset of the buffer in the shard)."""
        out: dict[int, tuple[memoryview, int]] = {}
        extra = self.codec.index_size() if self.codec.index_location == "end" else 0
        top = max((g.end for g in self._groups), default=0)
        for g, data in zip(self._groups, fetched, strict=True):
            if data is None:
                raise ChunkDecodeError(
                    "the shard was deleted while it was being read (a concurrent writer?); read it again"
                )
            view = as_byte_view(data)
            wanted = g.end - g.start + (extra if g.end == top else 0)
            if len(view) < wanted:
                size = g.start + len(view)
                where = (
                    f"past the end of the {size}-byte shard"
                    if g.end > size
                    else f"overlapping the {extra}-byte index at bytes [{size - extra}, {size})"
                )
                raise ChunkDecodeError(f"shard index: inner chunk bytes [{g.start}, {g.end}) lie {where}: corrupt index")
            for m in g.members:
                out[m] = (view, g.start)
        return out

    def decode_into(
        self,
        out: np.ndarray[Any, Any],
        fetched: Sequence[BufferLike | None],
        scratch: Scratch,
        batch: BatchDecode | None = None,
    ) -> None:
        """Decode every needed inner chunk into ``out`` (fill value where nothing is stored).

        With ``batch`` (the native reader, for inner codecs it decodes) the inner chunks go to it in one call;
        the ones it leaves are decoded here, which raises the usual errors."""
        fill = self.spec.fill_value
        if self._missing and batch is not None:
            batch([None] * len(self.parts), self.parts, out)  # fills every part: nothing can be left
            return
        if self._missing:
            for part in self.parts:
                out[part.out_sel] = fill
            return
        index = self._index
        assert index is not None, "plan() first"
        sources: dict[int, memoryview] = {}
        if self._whole_view is not None:
            view = self._whole_view
            for i, part in enumerate(self.parts):
                off, nb = (int(v) for v in index[part.coords])
                if off != EMPTY:
                    sources[i] = view[off : off + nb]
        else:
            buffers = self._buffers(fetched)
            for k, (i, (a, b)) in enumerate(zip(self._owner, self._spans, strict=True)):
                buf, base = buffers[k]
                sources[i] = buf[a - base : b - base]
        inner_spec = self.codec.inner_spec(self.spec)
        todo: Sequence[int] = range(len(self.parts))
        if batch is not None:
            todo = batch([sources.get(i) for i in todo], self.parts, out)
        for i in todo:
            part = self.parts[i]
            data = sources.get(i)
            if data is None:
                out[part.out_sel] = fill
            else:
                self._decode_part(part, data, inner_spec, out, scratch)

    def _decode_part(
        self, part: InnerPart, data: memoryview, spec: ChunkSpec, out: np.ndarray[Any, Any], scratch: Scratch
    ) -> None:
        pipeline = self.codec.inner_pipeline
        try:
            if spec.dtype.kind == "O":
                out[part.out_sel] = pipeline.decode(data, spec)[part.inner_sel]
                return
            where: tuple[Any, ...] = (*part.out_sel, Ellipsis)
            target = out[where]
            if part.complete and part.inside and target.flags.c_contiguous:
                pipeline.decode_into(data, spec, target)
                return
            buf = scratch(spec.shape)
            pipeline.decode_into(data, spec, buf)
        except ChunkDecodeError as e:
            raise ChunkDecodeError(f"inner chunk {part.coords}: {e.problem}") from e
        out[part.out_sel] = buf[part.inner_sel]


# --------------------------------------------------------------------------------------------- writes
def _existing_payloads(codec: ShardingCodec, existing: BufferLike | None) -> dict[tuple[int, ...], BufferLike]:
    if existing is None:
        return {}
    view = as_byte_view(existing)
    if len(view) < codec.index_size():
        raise ChunkDecodeError(
            f"shard is {len(view)} bytes, smaller than its {codec.index_size()}-byte index: truncated or corrupt"
        )
    start, stop = codec.index_range(len(view))
    index = codec.decode_index(view[start:stop], len(view))
    payloads: dict[tuple[int, ...], BufferLike] = {}
    for coords in np.ndindex(*codec.chunks_per_shard):
        off, nb = (int(v) for v in index[coords])
        if off != EMPTY:
            payloads[coords] = view[off : off + nb]
    return payloads


def _inner_value(
    part: InnerPart,
    value: np.ndarray[Any, Any],
    old: BufferLike | None,
    codec: ShardingCodec,
    spec: ChunkSpec,
) -> np.ndarray[Any, Any]:
    piece = value[part.out_sel]
    if part.complete and part.inside:
        return piece
    if old is None:  # (a complete inner chunk reaching past the shape keeps what is stored beyond it)
        chunk = np.full(spec.shape, spec.fill_value, dtype=spec.dtype)
    else:
        try:
            chunk = np.array(codec.inner_pipeline.decode(old, spec), dtype=spec.dtype, copy=True)
        except ChunkDecodeError as e:
            raise ChunkDecodeError(f"inner chunk {part.coords}: {e.problem}") from e
    chunk[part.inner_sel] = piece
    return chunk


def write_shard(
    codec: ShardingCodec,
    spec: ChunkSpec,
    parts: Sequence[InnerPart],
    value: np.ndarray[Any, Any],
    existing: BufferLike | None,
    *,
    is_fill: Callable[[np.ndarray[Any, Any]], bool] | None,
    pieces: bool = False,
) -> bytes | list[bytes | memoryview] | None:
    """The new value of a shard after writing ``value`` into the inner chunks ``parts`` (``pieces``: as the
    list of its buffers, index and inner chunks in stored order, not joined).

    Parameters
    ----------
    codec, spec
        The sharding codec bound to this shard's shape, and the shard's spec.
    parts
        The inner chunks written (``out_sel`` indexes ``value``).
    value
        The data (full rank).
    existing
        The shard's current bytes when the write covers it only partly (None: nothing stored, or a
        complete write).
    is_fill
        Tells an inner chunk equal to the fill value everywhere (such chunks are not stored); None stores
        every inner chunk written (``write_empty_chunks=True``).

    Returns
    -------
    bytes or None
        The shard value, or None when no inner chunk is left to store (the shard is to be deleted).
    """
    payloads = _existing_payloads(codec, existing)
    inner_spec = codec.inner_spec(spec)
    pipeline = codec.inner_pipeline
    for part in parts:
        chunk = _inner_value(part, value, payloads.get(part.coords), codec, inner_spec)
        if is_fill is not None and is_fill(chunk):
            payloads.pop(part.coords, None)
            continue
        payloads[part.coords] = pipeline.encode(np.ascontiguousarray(chunk).reshape(chunk.shape), inner_spec)  # 0-d stays 0-d
    return codec.assemble(payloads, pieces=pieces)
