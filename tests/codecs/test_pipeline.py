"""Pipeline behaviour: pickling, dask tokens, decode_into, to_json, thread safety, docs, speed."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import zarr_dask.codecs
from tests.codecs._helpers import dt2, dt3, sample, spec
from zarr_dask.codecs import CodecPipeline, pipeline_from_v2, pipeline_from_v3

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}


def _pipelines() -> list[CodecPipeline]:
    return [
        pipeline_from_v3(
            [{"name": "transpose", "configuration": {"order": "F"}}, LE, ZSTD, {"name": "crc32c"}],
            data_type=dt3("f4"),
            chunk_shape=(3, 4),
        ),
        pipeline_from_v3([{"name": "vlen-utf8"}], data_type=dt3(None, vlen="str"), chunk_shape=(5,)),
        pipeline_from_v2(
            compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
            filters=[{"id": "delta", "dtype": "<i4"}],
            data_type=dt2("<i4"),
            order="F",
        ),
    ]


def test_public_api():
    assert set(zarr_dask.codecs.__all__) >= {
        "ChunkSpec",
        "CodecPipeline",
        "pipeline_from_v2",
        "pipeline_from_v3",
        "v2_codecs_from_user",
        "v3_codecs_from_user",
    }


@pytest.mark.parametrize("index", range(3))
def test_pickles_by_configuration(index):
    p = _pipelines()[index]
    q = pickle.loads(pickle.dumps(p))
    assert q == p and hash(q) == hash(p) and q.to_json() == p.to_json()
    shape = (3, 4) if index != 1 else (5,)
    s = spec(shape, p.data_type, order="F" if index == 2 else "C")
    chunk = sample(shape, p.data_type)
    assert q.encode(chunk, s) == p.encode(chunk, s)


def test_dask_tokens():
    tokenize = pytest.importorskip("dask.base").tokenize
    a, b = _pipelines()[0], _pipelines()[0]
    assert tokenize(a) == tokenize(b)
    other = pipeline_from_v3(
        [LE, {"name": "zstd", "configuration": {"level": 1}}], data_type=dt3("f4"), chunk_shape=(3, 4)
    )
    assert tokenize(a) != tokenize(other)
    assert tokenize(_pipelines()[2]) != tokenize(
        pipeline_from_v2(compressor=None, filters=None, data_type=dt2("<i4"), order="F")
    )


def test_to_json_forms():
    v3, _, v2 = _pipelines()
    assert v3.to_json()[0] == {"name": "transpose", "configuration": {"order": [1, 0]}}
    assert v3.zarr_format == 3 and v2.zarr_format == 2
    assert v2.to_json() == {
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
        "filters": [{"id": "delta", "dtype": "<i4"}],
    }
    empty = pipeline_from_v2(compressor=None, filters=[], data_type=dt2("<i4"), order="C")
    assert empty.to_json() == {"compressor": None, "filters": None}
    shorthand = pipeline_from_v3(
        ["bytes", "zstd", {"name": "crc32c", "must_understand": True}], data_type=dt3("u1"), chunk_shape=(2,)
    )
    assert shorthand.to_json() == [{"name": "bytes"}, ZSTD, {"name": "crc32c"}]


@pytest.mark.parametrize(
    "codecs",
    [
        [LE, ZSTD],
        [BE, ZSTD],
        [
            LE,
            {
                "name": "blosc",
                "configuration": {
                    "cname": "lz4",
                    "clevel": 1,
                    "shuffle": "shuffle",
                    "typesize": 4,
                    "blocksize": 0,
                },
            },
        ],
        [LE, {"name": "numcodecs.lz4", "configuration": {}}],
        [LE, {"name": "gzip", "configuration": {"level": 1}}],
        [LE],
        [{"name": "transpose", "configuration": {"order": [1, 0]}}, LE, ZSTD],
        [LE, ZSTD, {"name": "crc32c"}],
    ],
    ids=lambda c: "+".join(x["name"] if isinstance(x, dict) else x for x in c),
)
def test_decode_into(codecs):
    dt = dt3("i4")
    p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(3, 4))
    s = spec((3, 4), dt)
    chunk = sample((3, 4), dt)
    encoded = p.encode(chunk, s)
    block = np.full((6, 4), -1, dtype="i4")
    p.decode_into(encoded, s, block[3:])
    np.testing.assert_array_equal(block[3:], chunk)
    assert (block[:3] == -1).all()
    strided = np.zeros((3, 8), dtype="i4")
    p.decode_into(encoded, s, strided[:, ::2])  # non-contiguous destination: decoded then copied
    np.testing.assert_array_equal(strided[:, ::2], chunk)
    with pytest.raises(ValueError, match="shape"):
        p.decode_into(encoded, s, np.zeros((4, 3), "i4"))


def test_v2_blosc_decode_into_is_zero_copy_for_native_order():
    dt = dt2("<f8")
    p = pipeline_from_v2(
        compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
        filters=None,
        data_type=dt,
        order="C",
    )
    s = spec((64,), dt)
    encoded = p.encode(np.arange(64, dtype="<f8"), s)
    out = np.zeros(64, "<f8")
    assert p._plan_for(s).decode_into(encoded, s, out) is True
    np.testing.assert_array_equal(out, np.arange(64))


def test_concurrent_decode_from_threads():
    dt = dt3("f8")
    p = pipeline_from_v3([LE, ZSTD], data_type=dt, chunk_shape=(8,))
    shapes = [(8,), (3,), (5,), (8,)]
    encoded = {sh: p.encode(np.arange(sh[0], dtype="f8"), spec(sh, dt)) for sh in shapes}
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                for sh in shapes:
                    assert p.decode(encoded[sh], spec(sh, dt)).tolist() == list(range(sh[0]))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


BB_OPTIONS = [
    ZSTD,
    {"name": "gzip", "configuration": {"level": 1}},
    {"name": "crc32c"},
    {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 1, "shuffle": "bitshuffle", "blocksize": 0},
    },
    {"name": "numcodecs.lz4", "configuration": {}},
    {"name": "numcodecs.shuffle", "configuration": {}},
]


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(["u1", "i2", "i4", "u8", "f4", "f8", "c8", "U2", "S3", "bool"]),
    shape=st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple),
    endian=st.sampled_from([LE, BE]),
    bb=st.lists(st.sampled_from(BB_OPTIONS), max_size=3),
    transpose=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_chains_roundtrip(dtype, shape, endian, bb, transpose, seed):
    assume(all(c["name"] != "numcodecs.shuffle" for c in bb[1:]))  # shuffle needs whole elements
    dt = dt3(dtype)
    aa = (
        [{"name": "transpose", "configuration": {"order": list(reversed(range(len(shape))))}}]
        if transpose
        else []
    )
    p = pipeline_from_v3([*aa, endian, *bb], data_type=dt, chunk_shape=shape)
    s = spec(shape, dt)
    chunk = sample(shape, dt, seed=seed)
    decoded = p.decode(p.encode(chunk, s), s)
    assert decoded.shape == shape and decoded.dtype == dt.numpy_dtype
    assert decoded.tobytes() == chunk.tobytes()


