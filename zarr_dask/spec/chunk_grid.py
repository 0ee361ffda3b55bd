"""Chunk grids: the core ``regular`` grid and the registered ``rectilinear`` extension.

A grid says how an array of a given shape is cut into chunks.  Per dimension it is described by a
:class:`DimGrid` — :class:`RegularDimGrid` (one chunk size, O(1) arithmetic, nothing stored per chunk) or
:class:`VaryingDimGrid` (explicit edge lengths held as a NumPy array of cumulative ends, O(log n) lookups).

Stored chunks always have their full size: a regular edge chunk overhangs the array, and a rectilinear
chunk keeps its declared edge length even if the array is shorter.  ``data_size`` gives the part that lies
inside the array.

Rectilinear JSON (digest §2.10)::

    {"name": "rectilinear",
     "configuration": {"kind": "inline", "chunk_shapes": [4, [1, 2, 3], [[4, 2]], [[1, 3], 3]]}}

A bare integer ``m`` means "``m`` repeated until the dimension is covered"; a list holds edge lengths or
``[value, count]`` run-length pairs.  Written like zarr-python: bare integers stay bare integers, edge lists
are run-length compressed (``[3, 3, 4]`` -> ``[[3, 2], 4]``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from zarr_dask.errors import IndexingError, MetadataError, UnknownExtensionError
from zarr_dask.spec.json import MAX_INT, parse_int, parse_int_tuple, parse_named_config

__all__ = [
    "MAX_RECTILINEAR_EDGES",
    "ChunkGrid",
    "DimGrid",
    "RectilinearChunkGrid",
    "RegularChunkGrid",
    "RegularDimGrid",
    "VaryingDimGrid",
    "parse_chunk_grid",
]

#: Largest number of explicit chunk edges per dimension of a rectilinear grid (guards against run-length
#: bombs such as ``[[1, 1000000000000]]``).
MAX_RECTILINEAR_EDGES = 1 << 22

IntArray = np.ndarray[Any, np.dtype[np.int64]]


def _index(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise IndexingError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


class DimGrid(ABC):
    """How one array dimension of length ``extent`` is cut into chunks."""

    extent: int

    @property
    @abstractmethod
    def is_regular(self) -> bool:
        """True when every chunk has the same stored size."""

    @abstractmethod
    def nchunks(self, extent: int | None = None) -> int:
        """Number of chunks needed to cover ``extent`` (default: this dimension's extent)."""

    @abstractmethod
    def start(self, i: int) -> int:
        """Array index of the first element of chunk ``i``."""

    @abstractmethod
    def size(self, i: int) -> int:
        """Stored (full) size of chunk ``i`` along this dimension."""

    @abstractmethod
    def index_of(self, x: int) -> int:
        """The chunk holding array index ``x``."""

    @abstractmethod
    def chunk_range(self, start: int, stop: int) -> range:
        """The chunks overlapping the index interval ``[start, stop)`` (empty range if ``stop <= start``)."""

    def data_size(self, i: int) -> int:
        """Number of elements of chunk ``i`` inside the array (``size(i)`` minus any overhang)."""
        return max(0, min(self.size(i), self.extent - self.start(i)))


@dataclass(frozen=True, kw_only=True)
class RegularDimGrid(DimGrid):
    """A dimension cut into chunks of one size (the last one overhangs the array)."""

    chunk_size: int
    extent: int

    @property
    def is_regular(self) -> bool:
        return True

    def nchunks(self, extent: int | None = None) -> int:
        e = self.extent if extent is None else extent
        return -(-e // self.chunk_size)

    def start(self, i: int) -> int:
        if i < 0:
            raise IndexingError(f"chunk index {i} is negative")
        return i * self.chunk_size

    def size(self, i: int) -> int:
        if i < 0:
            raise IndexingError(f"chunk index {i} is negative")
        return self.chunk_size

    def index_of(self, x: int) -> int:
        if x < 0:
            raise IndexingError(f"array index {x} is negative")
        return x // self.chunk_size

    def chunk_range(self, start: int, stop: int) -> range:
        if start < 0:
            raise IndexingError(f"array index {start} is negative")
        if stop <= start:
            return range(0)
        return range(start // self.chunk_size, -(-stop // self.chunk_size))


@dataclass(frozen=True, kw_only=True, eq=False)
class VaryingDimGrid(DimGrid):
    """A dimension cut at explicit edges; ``ends[i]`` is the exclusive end of chunk ``i``."""

    ends: IntArray
    extent: int

    @property
    def is_regular(self) -> bool:
        return False

    def nchunks(self, extent: int | None = None) -> int:
        e = self.extent if extent is None else extent
        if e <= 0:
            return 0
        n = int(np.searchsorted(self.ends, e - 1, side="right")) + 1
        if n > len(self.ends):
            total = int(self.ends[-1]) if len(self.ends) else 0
            raise MetadataError(
                f"rectilinear chunk edges sum to {total}, less than the dimension length {e}; "
                "add edges so that they cover the array"
            )
        return n

    def _check(self, i: int) -> None:
        if not 0 <= i < len(self.ends):
            raise IndexingError(f"chunk index {i} is outside the grid's {len(self.ends)} chunks")

    def start(self, i: int) -> int:
        self._check(i)
        return int(self.ends[i - 1]) if i else 0

    def size(self, i: int) -> int:
        self._check(i)
        return int(self.ends[i]) - (int(self.ends[i - 1]) if i else 0)

    def index_of(self, x: int) -> int:
        total = int(self.ends[-1]) if len(self.ends) else 0
        if not 0 <= x < total:
            raise IndexingError(f"array index {x} is outside the chunk edges (which cover [0, {total}))")
        return int(np.searchsorted(self.ends, x, side="right"))

    def chunk_range(self, start: int, stop: int) -> range:
        if stop <= start:
            return range(0)
        return range(self.index_of(start), self.index_of(stop - 1) + 1)


class ChunkGrid(ABC):
    """Base class of chunk grids (see :class:`RegularChunkGrid`, :class:`RectilinearChunkGrid`)."""

    name: ClassVar[str]

    @property
    @abstractmethod
    def ndim(self) -> int:
        """Number of dimensions."""

    @abstractmethod
    def validate_shape(self, shape: Sequence[int]) -> None:
        """Raise ``MetadataError`` unless this grid fits an array of ``shape``."""

    @abstractmethod
    def dim_grids(self, shape: Sequence[int]) -> tuple[DimGrid, ...]:
        """One :class:`DimGrid` per dimension for an array of ``shape``."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The ``chunk_grid`` JSON object, as zarr-python writes it."""

    def grid_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Number of chunks along each dimension for an array of ``shape``."""
        return tuple(g.nchunks() for g in self.dim_grids(shape))

    def resized(self, shape: Sequence[int], *, multiple_of: Sequence[int] | None = None) -> ChunkGrid:
        """The grid for the array resized to ``shape`` (a regular grid fits every shape: itself)."""
        self._check_ndim(shape)
        return self

    def nchunks(self, shape: Sequence[int]) -> int:
        """Total number of chunks for an array of ``shape`` (1 for a 0-d array)."""
        return math.prod(self.grid_shape(shape))

    def _coords(self, coords: Sequence[int]) -> tuple[int, ...]:
        if len(coords) != self.ndim:
            raise IndexingError(
                f"chunk coordinates {tuple(coords)!r} have {len(coords)} entries, the grid has {self.ndim} dimensions"
            )
        out = tuple(_index(c, "a chunk coordinate") for c in coords)
        if any(c < 0 for c in out):
            raise IndexingError(f"chunk coordinates {out!r} must not be negative")
        return out

    def _check_ndim(self, shape: Sequence[int]) -> None:
        if len(shape) != self.ndim:
            raise MetadataError(
                f"the {self.name} chunk grid has {self.ndim} dimensions but the array shape {tuple(shape)!r} "
                f"has {len(shape)}; give one chunk size per dimension"
            )


def _check_positive(values: Sequence[Any], what: str) -> tuple[int, ...]:
    return tuple(parse_int(v, f"{what}[{i}]", minimum=1) for i, v in enumerate(values))


@dataclass(frozen=True, kw_only=True)
class RegularChunkGrid(ChunkGrid):
    """The core ``regular`` grid: every chunk has shape ``chunk_shape`` (``()`` for 0-d arrays).

    Examples
    --------
    >>> g = RegularChunkGrid(chunk_shape=(2, 3))
    >>> g.grid_shape((5, 7))
    (3, 3)
    >>> g.chunk_origin((2, 1))
    (4, 3)
    """

    name: ClassVar[str] = "regular"
    chunk_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.chunk_shape, Sequence) or isinstance(self.chunk_shape, str):
            raise MetadataError(
                f"chunk_shape must be a sequence of positive integers, got {self.chunk_shape!r}"
            )
        object.__setattr__(self, "chunk_shape", _check_positive(self.chunk_shape, "chunk_shape"))

    @property
    def ndim(self) -> int:
        return len(self.chunk_shape)

    def validate_shape(self, shape: Sequence[int]) -> None:
        self._check_ndim(shape)

    def dim_grids(self, shape: Sequence[int]) -> tuple[DimGrid, ...]:
        self._check_ndim(shape)
        return tuple(
            RegularDimGrid(chunk_size=c, extent=int(n)) for c, n in zip(self.chunk_shape, shape, strict=True)
        )

    def grid_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        self._check_ndim(shape)
        return tuple(-(-int(n) // c) for c, n in zip(self.chunk_shape, shape, strict=True))

    def chunk_origin(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """Array index of the first element of the chunk at ``coords``."""
        return tuple(i * c for i, c in zip(self._coords(coords), self.chunk_shape, strict=True))

    def chunk_shape_at(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """Stored shape of the chunk at ``coords``: always ``chunk_shape`` (edge chunks overhang)."""
        self._coords(coords)
        return self.chunk_shape

    def to_json(self) -> dict[str, Any]:
        return {"name": "regular", "configuration": {"chunk_shape": list(self.chunk_shape)}}


def _coerce_dim(spec: Any, dim: int) -> int | tuple[int, ...]:
    what = f"chunk_shapes[{dim}]"
    if isinstance(spec, int | np.integer) and not isinstance(spec, bool):
        return parse_int(spec, what, minimum=1)
    if not isinstance(spec, Sequence) or isinstance(spec, str):
        raise MetadataError(f"{what} must be a positive integer or a sequence of edge lengths, got {spec!r}")
    if len(spec) > MAX_RECTILINEAR_EDGES:
        raise MetadataError(f"{what} has {len(spec)} edges; at most {MAX_RECTILINEAR_EDGES} are supported")
    edges = _check_positive(spec, what)
    if sum(edges) > MAX_INT:
        raise MetadataError(f"{what}: the edges sum to more than 2**63-1")
    return edges


def _compress_rle(edges: Sequence[int]) -> list[Any]:
    out: list[Any] = []
    i, n = 0, len(edges)
    while i < n:
        j = i
        while j + 1 < n and edges[j + 1] == edges[i]:
            j += 1
        run = j - i + 1
        out.append([edges[i], run] if run > 1 else edges[i])
        i = j + 1
    return out


@dataclass(frozen=True, kw_only=True)
class RectilinearChunkGrid(ChunkGrid):
    """The registered ``rectilinear`` grid (kind ``inline``): per dimension a chunk size or explicit edges.

    Parameters
    ----------
    chunk_shapes
        One entry per dimension: an int ``m`` (chunks of ``m``, repeated to cover the dimension) or the
        tuple of chunk edge lengths (their sum must cover the dimension; checked with the array shape).

    Examples
    --------
    >>> g = RectilinearChunkGrid(chunk_shapes=((3, 3, 4), 6))
    >>> g.grid_shape((10, 12))
    (3, 2)
    >>> g.to_json()["configuration"]["chunk_shapes"]
    [[[3, 2], 4], 6]
    """

    name: ClassVar[str] = "rectilinear"
    chunk_shapes: tuple[tuple[int, ...] | int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.chunk_shapes, Sequence) or isinstance(self.chunk_shapes, str):
            raise MetadataError(
                f"chunk_shapes must be a sequence with one entry per dimension, got {self.chunk_shapes!r}"
            )
        object.__setattr__(
            self, "chunk_shapes", tuple(_coerce_dim(s, d) for d, s in enumerate(self.chunk_shapes))
        )

    @property
    def ndim(self) -> int:
        return len(self.chunk_shapes)

    @cached_property
    def _per_dim(self) -> tuple[int | IntArray, ...]:
        """Per dimension: the chunk size, or the cumulative ends of the explicit edges."""
        return tuple(
            s if isinstance(s, int) else np.cumsum(np.asarray(s, dtype=np.int64), dtype=np.int64)
            for s in self.chunk_shapes
        )

    def validate_shape(self, shape: Sequence[int]) -> None:
        self._check_ndim(shape)
        for d, (spec, n) in enumerate(zip(self._per_dim, shape, strict=True)):
            total = spec if isinstance(spec, int) else (int(spec[-1]) if len(spec) else 0)
            if not isinstance(spec, int) and total < n:
                raise MetadataError(
                    f"rectilinear chunk_shapes[{d}] sums to {total}, less than the array length {n} "
                    f"along dimension {d}; the edges must cover the array"
                )

    def dim_grids(self, shape: Sequence[int]) -> tuple[DimGrid, ...]:
        self.validate_shape(shape)
        return tuple(self._dim(d, int(n)) for d, n in enumerate(shape))

    def _dim(self, d: int, extent: int | None = None) -> DimGrid:
        spec = self._per_dim[d]
        if isinstance(spec, int):
            return RegularDimGrid(chunk_size=spec, extent=MAX_INT if extent is None else extent)
        total = int(spec[-1]) if len(spec) else 0
        return VaryingDimGrid(ends=spec, extent=total if extent is None else extent)

    def chunk_origin(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """Array index of the first element of the chunk at ``coords``."""
        return tuple(self._dim(d).start(i) for d, i in enumerate(self._coords(coords)))

    def chunk_shape_at(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """Stored (full) shape of the chunk at ``coords``."""
        return tuple(self._dim(d).size(i) for d, i in enumerate(self._coords(coords)))

    def resized(self, shape: Sequence[int], *, multiple_of: Sequence[int] | None = None) -> RectilinearChunkGrid:
        """The grid for the array resized to ``shape``.

        Growing a dimension past the sum of its edges appends **one** edge covering the growth (as zarr-python
        3.4 does), so an append of ``k`` elements becomes one new chunk of ``k``; with ``multiple_of`` (the
        inner chunk shape of a sharded array) that edge is rounded up to a whole number of inner chunks and the
        edges may then overhang the array, which the spec allows. Shrinking keeps every edge (trailing edges
        beyond the array are allowed), so growing back restores the same chunks. Dimensions given as one
        repeated size never change.

        Examples
        --------
        >>> g = RectilinearChunkGrid(chunk_shapes=((10, 20, 5), 4))
        >>> g.resized((42, 9)).chunk_shapes
        ((10, 20, 5, 7), 4)
        >>> g.resized((42, 9), multiple_of=(5, 4)).chunk_shapes
        ((10, 20, 5, 10), 4)
        >>> g.resized((12, 9)).chunk_shapes
        ((10, 20, 5), 4)
        """
        self._check_ndim(shape)
        unit = tuple(multiple_of) if multiple_of is not None else (1,) * self.ndim
        out: list[tuple[int, ...] | int] = []
        for spec, n, u in zip(self.chunk_shapes, shape, unit, strict=True):
            total = spec if isinstance(spec, int) else sum(spec)
            if isinstance(spec, int) or n <= total:
                out.append(spec)
            else:
                out.append((*spec, -(-(n - total) // u) * u))
        return RectilinearChunkGrid(chunk_shapes=tuple(out))

    def to_json(self) -> dict[str, Any]:
        shapes = [s if isinstance(s, int) else _compress_rle(s) for s in self.chunk_shapes]
        return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}


def _parse_rectilinear_dim(spec: Any, dim: int) -> int | tuple[int, ...]:
    what = f"chunk_grid.configuration.chunk_shapes[{dim}]"
    if not isinstance(spec, list):
        return parse_int(spec, what, minimum=1)
    edges: list[int] = []
    for j, item in enumerate(spec):
        if isinstance(item, list):
            if len(item) != 2:
                raise MetadataError(
                    f"{what}[{j}] must be an edge length or a [value, count] pair, got {item!r}"
                )
            value = parse_int(item[0], f"{what}[{j}][0]", minimum=1)
            count = parse_int(item[1], f"{what}[{j}][1]", minimum=1)
        else:
            value, count = parse_int(item, f"{what}[{j}]", minimum=1), 1
        if len(edges) + count > MAX_RECTILINEAR_EDGES:
            raise MetadataError(
                f"{what} expands to more than {MAX_RECTILINEAR_EDGES} chunk edges; zarr_dask refuses such grids"
            )
        edges.extend([value] * count)
    return tuple(edges)


def _parse_regular(config: dict[str, Any]) -> RegularChunkGrid:
    extra = sorted(set(config) - {"chunk_shape"})
    if extra:
        raise MetadataError(
            f"regular chunk_grid configuration has unexpected key(s) {extra}; only 'chunk_shape' is allowed"
        )
    if "chunk_shape" not in config:
        raise MetadataError(
            "regular chunk_grid configuration is missing 'chunk_shape' (a list of positive integers)"
        )
    return RegularChunkGrid(
        chunk_shape=parse_int_tuple(config["chunk_shape"], "chunk_grid.configuration.chunk_shape", minimum=1)
    )


def _parse_rectilinear(config: dict[str, Any]) -> RectilinearChunkGrid:
    extra = sorted(set(config) - {"kind", "chunk_shapes"})
    if extra:
        raise MetadataError(
            f"rectilinear chunk_grid configuration has unexpected key(s) {extra}; only 'kind' and 'chunk_shapes' are allowed"
        )
    kind = config.get("kind")
    if kind != "inline":
        raise UnknownExtensionError(
            f"rectilinear chunk_grid kind {kind!r} is not supported; zarr_dask reads only kind 'inline'"
        )
    shapes = config.get("chunk_shapes")
    if not isinstance(shapes, list):
        raise MetadataError(
            f"rectilinear chunk_grid configuration needs 'chunk_shapes', a list with one entry per dimension; got {shapes!r}"
        )
    return RectilinearChunkGrid(
        chunk_shapes=tuple(_parse_rectilinear_dim(s, d) for d, s in enumerate(shapes))
    )


def parse_chunk_grid(obj: Any) -> RegularChunkGrid | RectilinearChunkGrid:
    """Parse the v3 ``chunk_grid`` JSON value.

    Parameters
    ----------
    obj
        ``{"name": "regular", "configuration": {"chunk_shape": [...]}}``, a ``rectilinear`` object, or a
        short-hand name (which fails: both grids need a configuration).

    Returns
    -------
    RegularChunkGrid or RectilinearChunkGrid

    Raises
    ------
    MetadataError
        For a malformed value (missing configuration, non-positive sizes...).
    UnknownExtensionError
        For a grid other than ``regular`` / ``rectilinear`` (inline).

    Examples
    --------
    >>> parse_chunk_grid({"name": "regular", "configuration": {"chunk_shape": [2, 3]}})
    RegularChunkGrid(chunk_shape=(2, 3))
    >>> parse_chunk_grid({"name": "rectilinear",
    ...                   "configuration": {"kind": "inline", "chunk_shapes": [[[1, 3], 3], 4]}}).chunk_shapes
    ((1, 1, 1, 3), 4)
    """
    name, config = parse_named_config(obj, "chunk_grid")
    if name not in ("regular", "rectilinear"):
        raise UnknownExtensionError(
            f"chunk_grid {name!r} is an extension zarr_dask does not support (supported: 'regular', "
            "'rectilinear'); the array cannot be opened"
        )
    if config is None:
        example = (
            '{"chunk_shape": [...]}' if name == "regular" else '{"kind": "inline", "chunk_shapes": [...]}'
        )
        raise MetadataError(f"chunk_grid {name!r} needs a configuration object, e.g. {example}")
    return _parse_regular(config) if name == "regular" else _parse_rectilinear(config)
