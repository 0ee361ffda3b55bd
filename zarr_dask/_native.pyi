"""Types of the C extension (zarr_dask/_native.c); see :mod:`zarr_dask.native`."""

from typing import Any

def bind(codec: str, library_path: str, /) -> bool: ...
def read_chunks(
    paths: list[str | None],
    projections: list[Any],
    out: Any,
    chunk_shape: tuple[int, ...],
    codec: int,
    fill: bytes,
    readbuf: Any,
    chunkbuf: Any,
    flags: int,
    /,
) -> tuple[int, int, list[int]]: ...
def decode_chunks(
    sources: list[Any],
    projections: list[Any],
    out: Any,
    chunk_shape: tuple[int, ...],
    codec: int,
    fill: bytes,
    chunkbuf: Any,
    /,
) -> list[int]: ...
