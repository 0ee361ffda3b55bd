"""The zarr-extensions ``conditional`` codec (bytes->bytes): nested bytes->bytes codecs applied per chunk.

Each chunk starts with a bitmask of ``header_bits`` bits (little-endian; default the number of nested codecs
rounded up to whole bytes): bit ``i`` set means nested codec ``i`` was applied. Decoding undoes the applied
codecs in reverse order; a set reserved bit (beyond the nested codecs) is a decode error. zarr_dask writes with
the registry's ``compress_if_smaller`` heuristic: each nested codec is applied when its output is smaller than
its input (so a checksum, which always grows the data, is never applied). Nested codecs that can run code
(``numcodecs.pickle`` & co.) are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from zarr_dask.codecs.base import BufferLike, BytesBytesCodec, ChunkSpec, Codec, as_byte_view, nbytes_of
from zarr_dask.errors import ChunkDecodeError, MetadataError

__all__ = ["ConditionalCodec", "parse_conditional"]


class ConditionalCodec(BytesBytesCodec):
    """``{"name": "conditional", "configuration": {"codecs": [...], "header_bits": 8}}``.

    Examples
    --------
    >>> codec = parse_conditional({"codecs": [{"name": "gzip", "configuration": {"level": 1}}]})
    >>> bytes(codec.encode(b"abc"))  # gzip would grow 3 bytes: skipped, header 0
    b'\\x00abc'
    >>> encoded = bytes(codec.encode(b"a" * 1000))
    >>> encoded[0], len(encoded) < 100, bytes(codec.decode(encoded, 1000)) == b"a" * 1000
    (1, True, True)
    """

    name = "conditional"

    def __init__(self, codecs: Sequence[BytesBytesCodec], header_bits: int, config: Mapping[str, Any]) -> None:
        self.codecs, self.header_bits, self.config = tuple(codecs), header_bits, dict(config)
        ratio: int | None = 1
        for codec in self.codecs:
            ratio = None if ratio is None or codec.max_ratio is None else ratio * codec.max_ratio
        self.max_ratio = ratio

    def bind(self, spec: ChunkSpec) -> Self:
        return type(self)([c.bind(spec) for c in self.codecs], self.header_bits, self.config)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": dict(self.config)}

    def encode(self, data: BufferLike) -> BufferLike:
        buf, mask = data, 0
        for i, codec in enumerate(self.codecs):
            trial = codec.encode(buf)
            if nbytes_of(trial) < nbytes_of(buf):  # compress_if_smaller
                buf, mask = trial, mask | 1 << i
        return mask.to_bytes(self.header_bits // 8, "little") + bytes(as_byte_view(buf))

    def decode(self, data: BufferLike, expected: int | None) -> BufferLike:
        view = as_byte_view(data)
        size = self.header_bits // 8
        if len(view) < size:
            raise ChunkDecodeError(f"codec 'conditional': the chunk has {len(view)} bytes, fewer than its "
                                   f"{size}-byte header")  # fmt: skip
        mask = int.from_bytes(view[:size], "little")
        if mask >> len(self.codecs):
            raise ChunkDecodeError(f"codec 'conditional': the header {mask:#x} sets bits beyond its "
                                   f"{len(self.codecs)} codecs (written with more codecs than configured?)")  # fmt: skip
        buf: BufferLike = view[size:]
        for i in reversed(range(len(self.codecs))):
            if mask >> i & 1:
                buf = self.codecs[i].decode(buf, expected if not mask & ((1 << i) - 1) else None)
        if expected is not None and nbytes_of(buf) != expected:
            raise ChunkDecodeError(f"codec 'conditional': the chunk decodes to {nbytes_of(buf)} bytes, expected "
                                   f"{expected}: truncated or corrupt")  # fmt: skip
        return buf


def parse_conditional(configuration: Mapping[str, Any] | None) -> Codec:
    """``conditional``: ``codecs`` (bytes->bytes codec objects, required) and ``header_bits`` (optional)."""
    from zarr_dask.codecs.registry import codec_from_v3  # the registry imports this module

    config = dict(configuration or {})
    unknown = sorted(set(config) - {"codecs", "header_bits"})
    if unknown:
        raise MetadataError(f"codec 'conditional': unknown configuration key(s) {unknown}")
    entries = config.get("codecs")
    if not isinstance(entries, list) or not entries:
        raise MetadataError(f"codec 'conditional': 'codecs' must be a non-empty list of codecs, got {entries!r}")
    codecs = [codec_from_v3(entry) for entry in entries]
    for entry, codec in zip(entries, codecs, strict=True):
        if not isinstance(codec, BytesBytesCodec):
            raise MetadataError(f"codec 'conditional': nested codec {entry!r} is not a bytes->bytes codec")
    bits = config.get("header_bits", -(-len(codecs) // 8) * 8)
    if isinstance(bits, bool) or not isinstance(bits, int) or bits % 8 or not len(codecs) <= bits <= 512:
        raise MetadataError(f"codec 'conditional': 'header_bits' must be a multiple of 8 from the number of "
                            f"codecs ({len(codecs)}) to 512, got {bits!r}")  # fmt: skip
    return ConditionalCodec([c for c in codecs if isinstance(c, BytesBytesCodec)], bits, config)
