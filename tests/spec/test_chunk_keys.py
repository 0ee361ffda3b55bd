"""zarr_dask.spec.chunk_keys: default and v2 chunk key encodings (digest §1.5, §2.11)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_dask.errors import IndexingError, MetadataError, UnknownExtensionError
from zarr_dask.spec.chunk_keys import (
    DefaultChunkKeyEncoding,
    V2ChunkKeyEncoding,
    parse_chunk_key_encoding,
)


@pytest.mark.parametrize(
    ("enc", "coords", "key"),
    [
        (DefaultChunkKeyEncoding(), (1, 23, 45), "c/1/23/45"),
        (DefaultChunkKeyEncoding(separator="."), (1, 23, 45), "c.1.23.45"),
        (DefaultChunkKeyEncoding(), (), "c"),
        (DefaultChunkKeyEncoding(separator="."), (), "c"),
        (DefaultChunkKeyEncoding(), (0,), "c/0"),
        (V2ChunkKeyEncoding(), (1, 23, 45), "1.23.45"),
        (V2ChunkKeyEncoding(separator="/"), (1, 23, 45), "1/23/45"),
        (V2ChunkKeyEncoding(), (), "0"),
        (V2ChunkKeyEncoding(), (7,), "7"),
    ],
)
def test_encode_decode(enc: Any, coords: tuple[int, ...], key: str) -> None:
    assert enc.encode(coords) == key
    assert enc.decode(key, ndim=len(coords)) == coords


def test_encode_accepts_numpy_integers() -> None:
    assert DefaultChunkKeyEncoding().encode((np.int64(2), np.uint8(3))) == "c/2/3"


@pytest.mark.parametrize("coords", [(-1,), (1.0,), ("1",), (True,), (None,)])
def test_encode_rejects_non_integers(coords: tuple[Any, ...]) -> None:
    for enc in (DefaultChunkKeyEncoding(), V2ChunkKeyEncoding()):
        with pytest.raises(IndexingError):
            enc.encode(coords)


@pytest.mark.parametrize(
    "key", ["", "c/", "c//1", "c/a", "c/-1", "c/01", "x/1", "c.1", "c/1/", "c/../1", "c/１", "c/1 ", "c/+1"]
)
def test_default_decode_garbage(key: str) -> None:
    with pytest.raises(MetadataError):
        DefaultChunkKeyEncoding().decode(key)


@pytest.mark.parametrize("key", ["", "a", "1..2", "1/2", "-1", "01", "1.", "c"])
def test_v2_decode_garbage(key: str) -> None:
    with pytest.raises(MetadataError):
        V2ChunkKeyEncoding().decode(key)


def test_decode_ndim_checks() -> None:
    with pytest.raises(MetadataError, match="has 2 indices"):
        DefaultChunkKeyEncoding().decode("c/1/2", ndim=3)
    with pytest.raises(MetadataError, match="0-d"):
        V2ChunkKeyEncoding().decode("1", ndim=0)
    assert V2ChunkKeyEncoding().decode("0") == (0,)
    with pytest.raises(MetadataError, match="must be a string"):
        DefaultChunkKeyEncoding().decode(1)  # type: ignore[arg-type]


def test_to_json_as_zarr_python() -> None:
    assert DefaultChunkKeyEncoding().to_json() == {"name": "default", "configuration": {"separator": "/"}}
    assert V2ChunkKeyEncoding().to_json() == {"name": "v2", "configuration": {"separator": "."}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"name": "default", "configuration": {"separator": "/"}}, DefaultChunkKeyEncoding()),
        ({"name": "default", "configuration": {"separator": "."}}, DefaultChunkKeyEncoding(separator=".")),
        ({"name": "default"}, DefaultChunkKeyEncoding()),
        ({"name": "default", "configuration": {}}, DefaultChunkKeyEncoding()),
        ("default", DefaultChunkKeyEncoding()),
        ({"name": "v2", "configuration": {"separator": "/"}}, V2ChunkKeyEncoding(separator="/")),
        ({"name": "v2"}, V2ChunkKeyEncoding()),
        ("v2", V2ChunkKeyEncoding()),
    ],
)
def test_parse(obj: Any, expected: Any) -> None:
    assert parse_chunk_key_encoding(obj) == expected


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        (
            {"name": "default", "configuration": {"separator": "-"}},
            MetadataError,
            "separator must be '.' or '/'",
        ),
        ({"name": "default", "configuration": {"separator": 1}}, MetadataError, "separator"),
        ({"name": "default", "configuration": {"separator": ["/"]}}, MetadataError, "separator"),
        ({"name": "default", "configuration": {"sep": "/"}}, MetadataError, "unexpected key"),
        ({"name": "default", "must_understand": False}, MetadataError, "does not allow"),
        ({"name": "suffix", "configuration": {}}, UnknownExtensionError, "'suffix' is an extension"),
        ("hashed", UnknownExtensionError, "does not support"),
        (5, MetadataError, "name string or an object"),
    ],
)
def test_parse_errors(obj: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_chunk_key_encoding(obj)


def test_invalid_separator_in_constructor() -> None:
    with pytest.raises(MetadataError):
        DefaultChunkKeyEncoding(separator="-")  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 10**12), max_size=6), st.sampled_from([".", "/"]))
def test_round_trip(coords: list[int], sep: Any) -> None:
    for enc in (DefaultChunkKeyEncoding(separator=sep), V2ChunkKeyEncoding(separator=sep)):
        key = enc.encode(tuple(coords))
        assert enc.decode(key, ndim=len(coords)) == tuple(coords)
        assert parse_chunk_key_encoding(enc.to_json()) == enc
