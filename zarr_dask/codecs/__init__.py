"""Codecs: pure, synchronous encode/decode of whole chunks (no IO). numcodecs is imported only here.

The contract the core codes against:

- :class:`ChunkSpec` — shape, data type, fill value and (v2) memory order of one chunk;
- :class:`CodecPipeline` — ``decode(bytes, spec) -> ndarray``, ``encode(ndarray, spec) -> bytes``,
  ``decode_into(bytes, spec, out)``, ``to_json()``;
- :func:`pipeline_from_v3` / :func:`pipeline_from_v2` — from array metadata;
- :func:`v3_codecs_from_user` / :func:`v2_codecs_from_user` — ``create_array`` arguments -> codec JSON.
"""

from zarr_dask.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from zarr_dask.codecs.create import v2_codecs_from_user, v3_codecs_from_user
from zarr_dask.codecs.pipeline import CodecPipeline, pipeline_from_v2, pipeline_from_v3

__all__ = [
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BytesBytesCodec",
    "ChunkSpec",
    "Codec",
    "CodecPipeline",
    "pipeline_from_v2",
    "pipeline_from_v3",
    "v2_codecs_from_user",
    "v3_codecs_from_user",
]
