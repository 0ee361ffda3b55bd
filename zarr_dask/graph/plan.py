"""The write planner: which dask blocks feed which storage keys, and which task owns each key.

Along each dimension the storage keys (chunks, or shards when sharded) that the written region touches are cut
into *segments*: runs of consecutive keys fed by the same dask blocks. A writer task is one segment per
dimension (their product): it owns exactly the keys inside it, receives exactly the blocks that overlap them,
and is the only task that writes those keys. When blocks are whole multiples of keys every block is one
segment, so there is one task per block and no gathering at all; when a key straddles blocks, its task gathers
the pieces. Keys only partly covered by the region (its edges, an append's first key) are read, merged and
written once, by their owner. Everything is computed per dimension with NumPy: a plan over 10^6 keys costs
milliseconds and holds nothing per key.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.spec import DimGrid, RegularDimGrid, VaryingDimGrid

__all__ = ["DimPlan", "Segment", "WritePlan", "plan_dim"]

IntArray = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Segment:
    """Consecutive keys along one dimension that are fed by the same dask blocks."""

    keys: range  #: storage-key indices along this dimension
    blocks: range  #: dask block indices along this dimension
    start: int  #: first array index written
    stop: int  #: end (exclusive) of the array indices written


@dataclass(frozen=True, kw_only=True)
class DimPlan:
    """The plan along one dimension."""

    segments: tuple[Segment, ...]
    block_starts: tuple[int, ...]  #: array index where each dask block starts, then the end of the last
    nkeys: int  #: keys touched along this dimension
    complete_keys: int  #: of those, keys whose part inside the array lies wholly inside the region
    partial_keys: tuple[int, ...]  #: key indices only partly covered (at most two: the region edges)

    @property
    def aligned(self) -> bool:
        """True when every segment is fed by one block and every non-empty block feeds one segment."""
        nonempty = sum(1 for a, b in itertools.pairwise(self.block_starts) if b > a)
        return all(len(s.blocks) == 1 for s in self.segments) and len(self.segments) == nonempty


def _key_extents(grid: DimGrid, keys: range, extent: int) -> tuple[IntArray, IntArray]:
    """Start and (clipped to the array) stop of every key in ``keys``."""
    idx = np.arange(keys.start, keys.stop, dtype=np.int64)
    if isinstance(grid, RegularDimGrid):
        starts = idx * grid.chunk_size
        stops = starts + grid.chunk_size
    elif isinstance(grid, VaryingDimGrid):
        ends = np.asarray(grid.ends, dtype=np.int64)
        stops = ends[idx]
        starts = np.where(idx > 0, ends[np.maximum(idx - 1, 0)], 0)
    else:
        starts = np.asarray([grid.start(int(i)) for i in idx], dtype=np.int64)
        stops = starts + np.asarray([grid.size(int(i)) for i in idx], dtype=np.int64)
    return starts, np.minimum(stops, extent)


def plan_dim(grid: DimGrid, extent: int, offset: int, chunks: Sequence[int]) -> DimPlan:
    """Plan one dimension: the region ``[offset, offset + sum(chunks))`` cut into dask blocks ``chunks``.

    Examples
    --------
    >>> from zarr_dask.spec import RegularDimGrid
    >>> p = plan_dim(RegularDimGrid(chunk_size=30, extent=200), 200, 0, [100, 100])
    >>> [(s.keys, s.blocks) for s in p.segments]
    [(range(0, 3), range(0, 1)), (range(3, 4), range(0, 2)), (range(4, 7), range(1, 2))]
    """
    block_starts = offset + np.concatenate([[0], np.cumsum(np.asarray(chunks, dtype=np.int64))])
    n = int(block_starts[-1] - offset)
    if n == 0:
        return DimPlan(segments=(), block_starts=tuple(int(b) for b in block_starts), nkeys=0, complete_keys=0,
                       partial_keys=())
    keys = grid.chunk_range(offset, offset + n)
    starts, stops = _key_extents(grid, keys, extent)
    lo = np.maximum(starts, offset)
    hi = np.minimum(stops, offset + n)
    complete = (starts >= offset) & (stops <= offset + n)
    b0 = np.searchsorted(block_starts, lo, side="right") - 1
    b1 = np.searchsorted(block_starts, hi - 1, side="right") - 1
    breaks = np.flatnonzero((np.diff(b0) != 0) | (np.diff(b1) != 0)) + 1
    bounds = np.concatenate([[0], breaks, [len(b0)]])
    segments = tuple(
        Segment(
            keys=range(keys.start + int(i), keys.start + int(j)),
            blocks=range(int(b0[i]), int(b1[j - 1]) + 1),
            start=int(lo[i]),
            stop=int(hi[j - 1]),
        )
        for i, j in itertools.pairwise(bounds)
    )
    return DimPlan(
        segments=segments,
        block_starts=tuple(int(b) for b in block_starts),
        nkeys=len(keys),
        complete_keys=int(complete.sum()),
        partial_keys=tuple(keys.start + int(i) for i in np.flatnonzero(~complete)),
    )


@dataclass(frozen=True, kw_only=True)
class WritePlan:
    """What a write will do, computed before any graph exists (see :func:`~zarr_dask.explain_write`).

    Attributes
    ----------
    store, path
        The target array.
    action
        ``"create"``, ``"overwrite"``, ``"region"`` or ``"append"``.
    unit
        ``"shard"`` when the storage keys are shards, else ``"chunk"``.
    shape, region
        The array's shape once written, and the region the dask array fills.
    dims
        The per-dimension plans (segments of keys and the blocks feeding them).
    nblocks
        Number of dask blocks in the source array.
    metadata_documents
        Metadata documents written (up front; for appends, after the data).
    """

    store: str
    path: str
    action: str
    unit: str
    unit_shape: tuple[int, ...]
    shape: tuple[int, ...]
    region: tuple[slice, ...]
    dtype: np.dtype[Any]
    dims: tuple[DimPlan, ...]
    nblocks: int
    metadata_documents: int
    key_names: Any = None  #: ``coords -> key`` for :meth:`partial_key_names` (not compared)
    skipped_tasks: int = 0  #: ``resume=True``: writer tasks this run's journal shows finished (not run again)
    skipped_keys: int = 0  #: ``resume=True``: the storage keys those tasks own (neither recomputed nor rewritten)

    def skipping(self, done: frozenset[str]) -> WritePlan:
        """This plan resumed: the writer tasks named in ``done`` (see :func:`zarr_dask.graph.journal.task_name`)
        are skipped."""
        if not done:
            return self
        tasks = keys = 0
        index = itertools.product(*(range(len(d.segments)) for d in self.dims))
        for gidx, segs in zip(index, self.groups(), strict=True):
            if ".".join(map(str, gidx)) in done:
                tasks += 1
                keys += math.prod(len(s.keys) for s in segs)
        return dataclasses.replace(self, skipped_tasks=tasks, skipped_keys=keys)

    @property
    def keys(self) -> int:
        """Storage keys written (each by exactly one task)."""
        return math.prod(d.nkeys for d in self.dims)

    @property
    def tasks(self) -> int:
        """Writer tasks (one per segment combination)."""
        return math.prod(len(d.segments) for d in self.dims)

    @property
    def read_modify_writes(self) -> int:
        """Keys only partly covered by the region: read, merged and rewritten by their owner."""
        return self.keys - math.prod(d.complete_keys for d in self.dims)

    @property
    def bytes(self) -> int:
        """Uncompressed bytes written from the dask array."""
        return int(math.prod(s.stop - (s.start or 0) for s in self.region)) * self.dtype.itemsize

    @property
    def aligned(self) -> bool:
        """True when every writer task takes exactly one dask block (blocks made of whole keys)."""
        return all(d.aligned for d in self.dims)

    @property
    def max_task_bytes(self) -> int:
        """The largest box of data one writer task assembles (uncompressed)."""
        biggest = (max((s.stop - s.start for s in d.segments), default=0) for d in self.dims)
        return math.prod(biggest) * self.dtype.itemsize

    @property
    def expected_requests(self) -> dict[str, int]:
        """Store requests the data tasks make (at most: keys equal to the fill value are deleted instead
        of set), plus the metadata documents."""
        return {"get": self.read_modify_writes, "set": self.keys, "metadata": self.metadata_documents}

    def groups(self) -> Iterator[tuple[Segment, ...]]:
        """Every writer task's segments (one per dimension), in C order."""
        return itertools.product(*(d.segments for d in self.dims))

    def partial_key_coords(self) -> Iterator[tuple[int, ...]]:
        """Coordinates of the keys that are read-merged-written (only the region's edges are visited)."""
        return _edge_coords(self.dims)

    def blocks_of(self, coords: Sequence[int]) -> list[tuple[int, ...]]:
        """The dask blocks that feed the key at ``coords``."""
        per_dim = []
        for c, d in zip(coords, self.dims, strict=True):
            seg = next(s for s in d.segments if c in s.keys)
            per_dim.append(seg.blocks)
        return list(itertools.product(*per_dim))

    def partial_key_names(self, limit: int = 8) -> list[str]:
        """The first ``limit`` read-merge-written keys as store keys."""
        out: list[str] = []
        if self.key_names is None or limit <= 0:
            return out
        for coords in self.partial_key_coords():
            out.append(self.key_names(coords))
            if len(out) >= limit:
                break
        return out

    def _rows(self) -> list[tuple[str, str]]:
        region = ", ".join(f"{s.start}:{s.stop}" for s in self.region)
        rmw = self.partial_key_names(4)
        rows = [
            ("array", f"{self.store} {'/' + self.path}"),
            ("action", self.action),
            ("shape", f"{self.shape} {self.dtype}"),
            ("region", f"[{region}]"),
            (f"storage keys ({self.unit}s)", f"{self.keys} of shape {self.unit_shape}"),
            ("dask blocks", str(self.nblocks)),
            ("writer tasks", f"{self.tasks} ({'aligned: one per block' if self.aligned else 'gathering'})"),
            ("bytes", _human(self.bytes)),
            ("largest task", _human(self.max_task_bytes)),
            ("read-modify-writes", str(self.read_modify_writes) + (f" e.g. {', '.join(rmw)}" if rmw else "")),
            ("expected requests", ", ".join(f"{k} {v}" for k, v in self.expected_requests.items())),
        ]
        if self.skipped_tasks:
            rows.append(("resumed: skips", f"{self.skipped_tasks} of {self.tasks} writer tasks, "
                                           f"{self.skipped_keys} of {self.keys} keys"))  # fmt: skip
        return rows

    def __repr__(self) -> str:
        return "WritePlan\n" + "\n".join(f"  {k:<26}{v}" for k, v in self._rows())

    def _repr_html_(self) -> str:
        """Notebook display: the same rows as ``repr``, in the style of the array and group reprs."""
        from zarr_dask.core.html import record_html

        return record_html("zarr_dask.WritePlan", self._rows()[1:], name="/" + self.path, where=self.store)


def _edge_coords(dims: Sequence[DimPlan]) -> Iterator[tuple[int, ...]]:
    """Partial keys without visiting the interior: fix one dimension to a partial index, others free."""
    seen: set[tuple[int, ...]] = set()
    spans = [range(d.segments[0].keys.start, d.segments[-1].keys.stop) if d.segments else range(0) for d in dims]
    for axis, d in enumerate(dims):
        for p in d.partial_keys:
            ranges = [range(p, p + 1) if a == axis else r for a, r in enumerate(spans)]
            for coords in itertools.product(*ranges):
                if coords not in seen:
                    seen.add(coords)
                    yield coords


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
