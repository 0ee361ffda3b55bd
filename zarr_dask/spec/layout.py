"""The one answer to "is this array sharded, and what are its read and write units?", from parsed metadata.

A v3 array is **sharded** when its array->bytes codec is ``sharding_indexed``, wherever it sits in the chain
(array->array codecs may come before it, bytes->bytes codecs after it): its storage keys are then shards of
inner chunks. The **write unit** (what one writer owns, one storage key) is the shard of a sharded array, else
the chunk. The **read unit** (what a read decodes at least) is the inner chunk when ``sharding_indexed`` is the
whole chain (the shard index says where each inner chunk is), else the whole storage key: with
``[sharding_indexed, gzip]`` a reader must un-gzip the whole shard before it can find an inner chunk.

``explain_write``, ``convert``, the ZOM, the HTML reprs, xarray's encoding and the metadata limits all ask
:func:`sharding_of`; the public ``Array.shards`` / ``Array.chunks`` answer as zarr-python does (``shards`` is
None for a sharding codec that is not the whole chain, although the keys hold shards).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zarr_dask.errors import MetadataError

__all__ = ["SHARDING", "Sharding", "flat_codecs", "sharding_in", "sharding_of"]

SHARDING = "sharding_indexed"


@dataclass(frozen=True, kw_only=True)
class Sharding:
    """How an array is sharded.

    Attributes
    ----------
    configuration
        The ``sharding_indexed`` configuration (``chunk_shape``, ``codecs``, ``index_codecs``, ...).
    inner_chunk_shape
        ``configuration["chunk_shape"]``: the inner chunk, in the coordinates the sharding codec sees.
    whole_chain
        ``sharding_indexed`` is the array's only codec: inner chunks are read (and written) one by one.
    leading
        No array->array codec comes before it: the inner chunk shape is in array coordinates.

    Examples
    --------
    >>> s = sharding_in([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2], "codecs": []}},
    ...                  {"name": "gzip"}])
    >>> s.inner_chunk_shape, s.whole_chain, s.read_unit, s.write_unit
    ((2, 2), False, 'shard', 'shard')
    """

    configuration: Mapping[str, Any]
    inner_chunk_shape: tuple[int, ...]
    whole_chain: bool
    leading: bool

    @property
    def read_unit(self) -> Literal["inner chunk", "shard"]:
        """What a read decodes at least: an inner chunk when the index locates it, else the whole shard."""
        return "inner chunk" if self.whole_chain else "shard"

    @property
    def write_unit(self) -> Literal["shard"]:
        """What one writer owns: the shard (one storage key)."""
        return "shard"

    @property
    def inner_codecs(self) -> list[Any]:
        """The inner codec chain (checked to be a list)."""
        codecs: list[Any] = self.configuration.get("codecs", [])
        return codecs


def _name(entry: Any) -> Any:
    return entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, Mapping) else None


def _configuration(entry: Any) -> Mapping[str, Any]:
    config = entry.get("configuration") if isinstance(entry, Mapping) else None
    if not isinstance(config, Mapping):
        raise MetadataError(f"codec {SHARDING!r} needs a 'configuration' object, got {config!r}")
    shape = config.get("chunk_shape")
    if not isinstance(shape, list | tuple) or any(isinstance(c, bool) or not isinstance(c, int) for c in shape):
        raise MetadataError(f"codec {SHARDING!r}: 'chunk_shape' must be a list of integers, got {shape!r}")
    for key in ("codecs", "index_codecs"):
        value = config.get(key, [])
        if not isinstance(value, list | tuple) or not all(isinstance(c, str | Mapping) for c in value):
            raise MetadataError(f"codec {SHARDING!r}: {key!r} must be a list of codec objects, got {value!r}")
    return config


def sharding_in(codecs: Any) -> Sharding | None:
    """The sharding of a v3 codec chain (a list of codec JSON objects), or None when it has no sharding codec.

    Raises
    ------
    MetadataError
        The chain is not a list, or the ``sharding_indexed`` configuration is not an object with a
        ``chunk_shape`` list of integers and ``codecs`` / ``index_codecs`` lists.
    """
    if not isinstance(codecs, list | tuple):
        raise MetadataError(f"'codecs' must be a list of codec objects, got {codecs!r}")
    at = next((i for i, entry in enumerate(codecs) if _name(entry) == SHARDING), None)
    if at is None:
        return None
    config = _configuration(codecs[at])
    return Sharding(configuration=config, inner_chunk_shape=tuple(config["chunk_shape"]),
                    whole_chain=len(codecs) == 1, leading=at == 0)  # fmt: skip


def flat_codecs(codecs: Sequence[Any]) -> list[Any]:
    """The chain with its ``sharding_indexed`` codec replaced by the inner codecs (what an unsharded copy, or
    a re-sharded one, of the same data uses).

    Examples
    --------
    >>> flat_codecs([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [
    ...     {"name": "bytes"}]}}, {"name": "gzip"}])
    [{'name': 'bytes'}, {'name': 'gzip'}]
    """
    chain = list(codecs)
    sharding = sharding_in(chain)
    if sharding is None:
        return chain
    at = next(i for i, entry in enumerate(chain) if _name(entry) == SHARDING)
    return [*chain[:at], *sharding.inner_codecs, *chain[at + 1 :]]


def sharding_of(metadata: Any) -> Sharding | None:
    """The sharding of an array's parsed metadata (v2 arrays are never sharded).

    Examples
    --------
    >>> from zarr_dask.spec import ArrayMetadataV3
    >>> meta = ArrayMetadataV3.from_json({
    ...     "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint8", "fill_value": 0,
    ...     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
    ...     "chunk_key_encoding": {"name": "default"},
    ...     "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [
    ...         {"name": "bytes"}], "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}}]})
    >>> sharding_of(meta).read_unit
    'inner chunk'
    """
    codecs: Sequence[Any] | None = getattr(metadata, "codecs", None)
    return None if codecs is None else sharding_in(list(codecs))
