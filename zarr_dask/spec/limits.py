"""Geometry limits: what an array's metadata may declare before anything is allocated for it.

Metadata comes from storage we do not control, so a 200-byte document must not make us allocate terabytes,
build tuples of 2**62 block sizes or hand NumPy a rank it cannot represent. Every array document is checked
here when it is parsed (:class:`~zarr_dask.spec.ArrayMetadataV2` / ``V3`` call :func:`check_geometry` from
``__post_init__``), with a :class:`~zarr_dask.errors.MetadataError` naming the value and the limit (the
layer that knows the store and node adds them).

Hard limits (what NumPy and the formats can represent):

* at most :data:`MAX_NDIM` (32) dimensions;
* at most ``2**63 - 1`` elements in an array, a chunk or a shard (an index must fit an int64).

Policy limits (generous defaults, configurable with :func:`set_limits` or environment variables, which dask
workers in other processes inherit):

* ``max_chunk_bytes`` (``ZARR_DASK_MAX_CHUNK_BYTES``, default 8 GiB): the decoded size of one chunk, the unit
  a reader decodes whole (the inner chunk of a sharded array);
* ``max_shard_chunks`` (``ZARR_DASK_MAX_SHARD_CHUNKS``, default 2**22): inner chunks per shard (the shard
  index holds 16 bytes per inner chunk: 64 MiB at the limit).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from zarr_dask import config
from zarr_dask.errors import MetadataError
from zarr_dask.spec.layout import sharding_in

__all__ = [
    "MAX_ELEMENTS",
    "MAX_NDIM",
    "Limits",
    "check_geometry",
    "check_sharding",
    "get_limits",
    "limits",
    "set_limits",
]

#: Most dimensions an array may have (NumPy 1.x and the native reader stop at 32; real data uses a handful).
MAX_NDIM = 32
#: Most elements an array, chunk or shard may have: an element index must fit an int64.
MAX_ELEMENTS = 2**63 - 1
_MAX_NESTING = 8


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Policy limits on what metadata may declare (see the module notes for the defaults).

    Examples
    --------
    >>> Limits().max_chunk_bytes == 8 * 2**30
    True
    """

    max_chunk_bytes: int = 8 * 2**30
    max_shard_chunks: int = 2**22

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MetadataError(f"limit {f.name} must be a positive integer, got {value!r}")


def _from_env() -> Limits:
    """The limits of the ``max_chunk_bytes`` / ``max_shard_chunks`` knobs (:mod:`zarr_dask.config`)."""
    return Limits(max_chunk_bytes=int(config.get("max_chunk_bytes")), max_shard_chunks=int(config.get("max_shard_chunks")))


_current: Limits | None = None


def get_limits() -> Limits:
    """The limits in force (the defaults, changed by environment variables and :func:`set_limits`).

    Examples
    --------
    >>> get_limits().max_chunk_bytes >= 2**20
    True
    """
    global _current
    if _current is None:
        _current = _from_env()
    return _current


def set_limits(**changes: int) -> Limits:
    """Change policy limits for this process; returns the previous :class:`Limits`.

    Examples
    --------
    >>> old = set_limits(max_chunk_bytes=2**40)
    >>> get_limits().max_chunk_bytes
    1099511627776
    >>> _ = set_limits(**dataclasses.asdict(old))
    """
    global _current
    old = get_limits()
    unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(Limits)})
    if unknown:
        raise MetadataError(f"unknown limit(s) {unknown}; the limits are max_chunk_bytes and max_shard_chunks")
    _current = dataclasses.replace(old, **changes)
    return old


@contextmanager
def limits(**changes: int) -> Iterator[Limits]:
    """:func:`set_limits` for the duration of a ``with`` block."""
    old = set_limits(**changes)
    try:
        yield get_limits()
    finally:
        set_limits(**dataclasses.asdict(old))


def _elements(shape: Sequence[int], what: str) -> int:
    # NumPy refuses a shape whose non-zero extents multiply beyond 2**63-1 even when another extent is 0
    n = math.prod(max(s, 1) for s in shape)
    if n > MAX_ELEMENTS:
        raise MetadataError(
            f"{what} {list(shape)} spans {n} elements (zero extents aside), more than 2**63-1 (an element index "
            "must fit an int64); the metadata is corrupt or describes an array no reader can address"
        )
    return math.prod(shape)


def _check_chunk(shape: Sequence[int], itemsize: int, what: str) -> None:
    nbytes = _elements(shape, what) * max(itemsize, 1)
    limit = get_limits().max_chunk_bytes
    if nbytes > limit:
        raise MetadataError(
            f"{what} {list(shape)} declares {nbytes} bytes per decoded chunk, more than the limit of {limit} bytes "
            "(max_chunk_bytes); if the metadata is right, raise it with zarr_dask.set_limits(max_chunk_bytes=...) "
            "or ZARR_DASK_MAX_CHUNK_BYTES"
        )


def check_geometry(
    shape: Sequence[int], chunk_shape: Sequence[int], itemsize: int, codecs: Sequence[Any] = ()
) -> None:
    """Check an array's rank, size, chunk (or shard) size and, for a v3 ``sharding_indexed`` chain, the inner
    chunks: rank, divisibility and count per shard.

    ``chunk_shape`` is the largest stored chunk (the largest edge per dimension of a rectilinear grid).

    Raises
    ------
    MetadataError
        Naming the value and the limit it breaks.

    Examples
    --------
    >>> check_geometry((10, 10), (5, 5), 8)
    >>> check_geometry((2**40,), (2**40,), 8)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.MetadataError: chunk shape [1099511627776] declares 8796093022208 bytes per decoded chunk, ...
    """
    if len(shape) > MAX_NDIM:
        raise MetadataError(
            f"the array has {len(shape)} dimensions, more than the {MAX_NDIM} zarr_dask (and NumPy) support; "
            "the metadata is corrupt or needs fewer dimensions"
        )
    _elements(shape, "shape")
    sharding = sharding_in(codecs)
    if sharding is None or not sharding.leading:  # after an array->array codec: the codec checks its input
        _check_chunk(chunk_shape, itemsize, "chunk shape")
        return
    _elements(chunk_shape, "shard shape")
    check_sharding(chunk_shape, sharding.configuration, itemsize)


def check_sharding(shard: Sequence[int], config: Mapping[str, Any], itemsize: int, depth: int = 0) -> None:
    """Check a ``sharding_indexed`` configuration against the shard shape (nested sharding recursively)."""
    inner = config.get("chunk_shape")
    if not isinstance(inner, list | tuple) or any(isinstance(c, bool) or not isinstance(c, int) for c in inner):
        return  # a malformed configuration is reported by the codec itself, with its own message
    if depth > _MAX_NESTING:
        raise MetadataError(f"'sharding_indexed' is nested more than {_MAX_NESTING} levels deep; zarr_dask refuses it")
    if len(inner) != len(shard):
        raise MetadataError(
            f"'sharding_indexed' chunk_shape {list(inner)} has {len(inner)} dimensions, the shard {list(shard)} "
            f"has {len(shard)}; give one inner chunk size per dimension"
        )
    for d, (s, c) in enumerate(zip(shard, inner, strict=True)):
        if c < 1 or s % c:
            raise MetadataError(
                f"shard size {s} along dimension {d} is not a multiple of the inner chunk size {c} of "
                "'sharding_indexed'; every shard edge must be a multiple of the inner chunk shape"
            )
    count = math.prod(s // c for s, c in zip(shard, inner, strict=True))
    limit = get_limits().max_shard_chunks
    if count > limit:
        raise MetadataError(
            f"shard {list(shard)} holds {count} inner chunks of {list(inner)}, more than the limit of {limit} "
            "(max_shard_chunks; the index needs 16 bytes per inner chunk); if the metadata is right, raise it with "
            "zarr_dask.set_limits(max_shard_chunks=...) or ZARR_DASK_MAX_SHARD_CHUNKS"
        )
    nested = sharding_in(config.get("codecs") or [])
    if nested is None or not nested.leading:
        _check_chunk(inner, itemsize, "inner chunk shape")
    else:
        check_sharding(inner, nested.configuration, itemsize, depth + 1)
