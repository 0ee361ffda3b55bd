"""zarr_dask.spec.v2: .zarray/.zgroup/.zattrs <-> ArrayMetadataV2 / GroupMetadataV2."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.spec._oracle import same_json, zarr_documents, zarr_or_skip
from zarr_dask.errors import DataTypeError, FillValueError, MetadataError
from zarr_dask.spec import (
    ArrayMetadataV2,
    GroupMetadataV2,
    RegularChunkGrid,
    V2ChunkKeyEncoding,
    data_type_from_numpy,
    parse_array_metadata,
    parse_group_metadata,
)
from zarr_dask.spec.json import loads

# digest §1.2, exactly as zarr-python writes it (key order included)
GOLDEN_ZARRAY = {
    "shape": [5, 7],
    "chunks": [2, 3],
    "dtype": "<i4",
    "fill_value": 0,
    "order": "C",
    "filters": None,
    "dimension_separator": ".",
    "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zarr_format": 2,
}


def zarray(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOLDEN_ZARRAY)
    for key, value in changes.items():
        if value is _DROP:
            del doc[key]
        else:
            doc[key] = value
    return doc


_DROP = object()


def test_golden_zarray_round_trip_bytes() -> None:
    meta = ArrayMetadataV2.from_json(GOLDEN_ZARRAY)
    docs = meta.to_documents()
    assert docs[".zarray"] == json.dumps(GOLDEN_ZARRAY, indent=2).encode()
    assert docs[".zattrs"] == b"{}"  # always written, as zarr-python


def test_golden_properties() -> None:
    meta = ArrayMetadataV2.from_json(GOLDEN_ZARRAY, {"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K"})
    assert meta.zarr_format == 2 and meta.node_type == "array"
    assert meta.shape == (5, 7) and meta.chunks == (2, 3) and meta.chunk_shape == (2, 3) and meta.ndim == 2
    assert meta.chunk_grid == RegularChunkGrid(chunk_shape=(2, 3))
    assert meta.chunk_key_encoding == V2ChunkKeyEncoding(separator=".")
    assert meta.chunk_key_encoding.encode((1, 2)) == "1.2"
    assert meta.dimension_names == ("y", "x")
    assert meta.order == "C"
    assert meta.data_type.numpy_dtype == np.dtype("<i4")
    assert meta.fill_value is not None and meta.fill_value.shape == () and meta.fill_value[()] == 0
    assert meta.compressor == GOLDEN_ZARRAY["compressor"]
    assert meta.filters is None
    assert json.loads(meta.to_documents()[".zattrs"]) == {"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K"}


@pytest.mark.parametrize("dims", [["y"], ["y", 1], "yx", None, ["y", "x", "z"]])
def test_dimension_names_only_when_valid(dims: Any) -> None:
    meta = ArrayMetadataV2.from_json(GOLDEN_ZARRAY, {"_ARRAY_DIMENSIONS": dims})
    assert meta.dimension_names is None


def test_lenient_reading() -> None:
    meta = ArrayMetadataV2.from_json(
        zarray(filters=[], dimension_separator=_DROP, compressor=_DROP, extra_key={"x": 1}), None
    )
    assert meta.filters is None and meta.compressor is None and meta.dimension_separator == "."
    written = json.loads(meta.to_documents()[".zarray"])
    assert written["filters"] is None and written["compressor"] is None and "extra_key" not in written
    assert ArrayMetadataV2.from_json(zarray(dimension_separator=None)).dimension_separator == "."
    assert ArrayMetadataV2.from_json(zarray(filters=_DROP)).filters is None


def test_slash_separator_and_f_order() -> None:
    meta = ArrayMetadataV2.from_json(zarray(dimension_separator="/", order="F"))
    assert meta.chunk_key_encoding.encode((1, 2)) == "1/2"
    assert meta.order == "F"


def test_object_codec_from_filters_or_compressor() -> None:
    meta = ArrayMetadataV2.from_json(zarray(dtype="|O", fill_value="", filters=[{"id": "vlen-utf8"}]))
    assert meta.data_type.vlen == "str"
    meta = ArrayMetadataV2.from_json(zarray(dtype="|O", fill_value=None, compressor={"id": "vlen-bytes"}))
    assert meta.data_type.vlen == "bytes"
    assert meta.fill_value is None


def test_null_fill_value() -> None:
    meta = ArrayMetadataV2.from_json(zarray(fill_value=None))
    assert meta.fill_value is None
    assert json.loads(meta.to_documents()[".zarray"])["fill_value"] is None


def test_nan_fill_equality_hash_pickle_and_replace() -> None:
    a = ArrayMetadataV2.from_json(zarray(dtype="<f8", fill_value="NaN"), {"x": float("nan")})
    b = ArrayMetadataV2.from_json(zarray(dtype="<f8", fill_value="NaN"), {"x": float("nan")})
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a
    c = dataclasses.replace(a, shape=[6, 7])  # type: ignore[arg-type]
    assert c.shape == (6, 7) and c != a
    with pytest.raises(MetadataError, match="same length"):
        dataclasses.replace(a, shape=(6,))
    assert a.__dask_tokenize__() == b.__dask_tokenize__()


@pytest.mark.parametrize("field", ["zarr_format", "shape", "chunks", "dtype", "fill_value", "order"])
def test_missing_required_field(field: str) -> None:
    with pytest.raises(MetadataError, match=rf"invalid \.zarray: missing required field\(s\) \['{field}'\]"):
        ArrayMetadataV2.from_json(zarray(**{field: _DROP}))


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"zarr_format": 3}, MetadataError, "'zarr_format' must be 2, got 3"),
        ({"zarr_format": 2.0}, MetadataError, "'zarr_format' must be 2"),
        ({"shape": "5"}, MetadataError, "field 'shape' must be a list"),
        ({"shape": [5, -1]}, MetadataError, r"field 'shape'\[1\] must be an integer"),
        ({"shape": [5, 7.0]}, MetadataError, r"field 'shape'\[1\]"),
        ({"chunks": [2, 0]}, MetadataError, r"field 'chunks'\[1\] must be an integer in \[1"),
        ({"chunks": [2]}, MetadataError, "chunks \\[2\\] and shape \\[5, 7\\] must have the same length"),
        ({"order": "X"}, MetadataError, "field 'order' must be 'C' or 'F', got 'X'"),
        ({"compressor": "blosc"}, MetadataError, "field 'compressor' must be a numcodecs configuration"),
        ({"compressor": {"cname": "lz4"}}, MetadataError, "with a string 'id'"),
        ({"filters": {"id": "delta"}}, MetadataError, "field 'filters' must be null or a list"),
        ({"filters": [1]}, MetadataError, r"field 'filters'\[0\] must be a numcodecs"),
        ({"dimension_separator": "-"}, MetadataError, "field 'dimension_separator' must be '.' or '/'"),
        ({"dtype": "<i3"}, DataTypeError, "<i3"),
        ({"dtype": 5}, DataTypeError, "5"),
        ({"fill_value": "abc"}, FillValueError, "abc"),
        ({"fill_value": [1, 2]}, FillValueError, r"\[1, 2\]"),
    ],
)
def test_bad_zarray(changes: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        ArrayMetadataV2.from_json(zarray(**changes))
    assert str(info.value).startswith("invalid .zarray")


def test_bad_documents() -> None:
    with pytest.raises(MetadataError, match="must be a JSON object"):
        ArrayMetadataV2.from_json([1, 2])
    with pytest.raises(MetadataError, match=".zattrs must be a JSON object"):
        ArrayMetadataV2.from_json(GOLDEN_ZARRAY, [1])
    with pytest.raises(MetadataError, match="not valid JSON"):
        parse_array_metadata(2, {".zarray": b'{"shape": [1,}'})
    with pytest.raises(MetadataError, match="'.zarray' document is missing"):
        parse_array_metadata(2, {".zattrs": b"{}"})
    with pytest.raises(MetadataError, match="describe an array"):
        parse_group_metadata(
            2, {".zgroup": b'{"zarr_format": 2}', ".zarray": json.dumps(GOLDEN_ZARRAY).encode()}
        )


def test_constructor_checks() -> None:
    dt = data_type_from_numpy("<i4", zarr_format=2)
    fill = dt.default_fill_value()
    ok = ArrayMetadataV2(shape=(4,), chunks=(2,), data_type=dt, fill_value=fill, filters=())
    assert ok.filters is None
    with pytest.raises(FillValueError, match="0-d NumPy array"):
        ArrayMetadataV2(shape=(4,), chunks=(2,), data_type=dt, fill_value=np.zeros(2, "<i4"))
    with pytest.raises(FillValueError, match="dtype"):
        ArrayMetadataV2(shape=(4,), chunks=(2,), data_type=dt, fill_value=np.array(0.0))
    with pytest.raises(MetadataError, match="Zarr v2 DataType"):
        ArrayMetadataV2(
            shape=(4,), chunks=(2,), data_type=data_type_from_numpy("<i4", zarr_format=3), fill_value=fill
        )
    with pytest.raises(MetadataError, match="order"):
        ArrayMetadataV2(shape=(4,), chunks=(2,), data_type=dt, fill_value=fill, order="K")  # type: ignore[arg-type]
    with pytest.raises(MetadataError, match="attribute names must be strings"):
        ArrayMetadataV2(shape=(4,), chunks=(2,), data_type=dt, fill_value=fill, attributes={1: 2})  # type: ignore[dict-item]


def test_attributes_with_numpy_values_are_written_as_json() -> None:
    dt = data_type_from_numpy("<f4", zarr_format=2)
    meta = ArrayMetadataV2(
        shape=(4,), chunks=(2,), data_type=dt, fill_value=dt.default_fill_value(),
        attributes={"scale_factor": np.float32(0.5), "valid_range": np.array([0, 10])},
    )  # fmt: skip
    assert json.loads(meta.to_documents()[".zattrs"]) == {"scale_factor": 0.5, "valid_range": [0, 10]}
    bad = dataclasses.replace(meta, attributes={"when": object()})
    with pytest.raises(MetadataError, match=r"attributes\['when'\]"):
        bad.to_documents()


# ---------------------------------------------------------------------------------------------- groups


def test_group_round_trip() -> None:
    meta = GroupMetadataV2.from_json({"zarr_format": 2}, {"title": "t", "nan": float("nan")})
    docs = meta.to_documents()
    assert docs[".zgroup"] == b'{\n  "zarr_format": 2\n}'
    assert docs[".zattrs"] == b'{\n  "title": "t",\n  "nan": NaN\n}'
    assert GroupMetadataV2.from_json(loads(docs[".zgroup"]), loads(docs[".zattrs"])) == meta
    assert GroupMetadataV2().to_documents()[".zattrs"] == b"{}"
    assert meta.zarr_format == 2 and meta.node_type == "group"


@pytest.mark.parametrize(
    ("zgroup", "match"),
    [
        ({"zarr_format": 2, "extra": 1}, r"unexpected key\(s\) \['extra'\]"),
        ({"zarr_format": 2, "attributes": {}}, "attributes belong in .zattrs"),
        ({"zarr_format": 3}, "must be 2, got 3"),
        ({}, "must be 2, got None"),
        ([], "must be a JSON object"),
    ],
)
def test_bad_zgroup(zgroup: Any, match: str) -> None:
    with pytest.raises(MetadataError, match=match) as info:
        GroupMetadataV2.from_json(zgroup)
    assert str(info.value).startswith("invalid .zgroup")


NCZARR_ARRAY = {"dimrefs": ["/time", "/g/x"], "storage": "chunked"}


@pytest.mark.parametrize("key", ["_nczarr_array", "_NCZARR_ARRAY"])
def test_nczarr_array_keys_are_kept_and_written_back(key: str) -> None:
    meta = ArrayMetadataV2.from_json(zarray(**{key: NCZARR_ARRAY, "other_tool": 1}), {"_nczarr_attr": {"types": {}}})
    assert meta.nczarr == {key: NCZARR_ARRAY}  # other unknown keys are still ignored, as zarr-python does
    written = json.loads(meta.to_documents()[".zarray"])
    assert list(written) == [*GOLDEN_ZARRAY, key] and written[key] == NCZARR_ARRAY and "other_tool" not in written
    assert ArrayMetadataV2.from_json(written, meta.attributes) == meta
    assert meta != ArrayMetadataV2.from_json(GOLDEN_ZARRAY, meta.attributes)  # part of the document
    assert dataclasses.replace(meta, shape=(9, 7)).nczarr == meta.nczarr
    assert pickle.loads(pickle.dumps(meta)) == meta


@pytest.mark.parametrize("layout", ["4.8", "4.9"])
def test_nczarr_group_keys_are_kept_and_written_back(layout: str) -> None:
    upper = layout == "4.8"
    superblock, group = ("_NCZARR_SUPERBLOCK", "_NCZARR_GROUP") if upper else ("_nczarr_superblock", "_nczarr_group")
    doc = {"zarr_format": 2, superblock: {"version": "2.0.0"}, group: {"dims": {"x": 3}, "vars": ["x"], "groups": []}}
    meta = GroupMetadataV2.from_json(doc, {"title": "t"})
    assert meta.nczarr == {k: v for k, v in doc.items() if k != "zarr_format"}
    assert json.loads(meta.to_documents()[".zgroup"]) == doc
    assert GroupMetadataV2.from_json(doc, {"title": "t"}) == meta != GroupMetadataV2(attributes={"title": "t"})
    assert GroupMetadataV2(attributes={"a": 1}).to_documents()[".zgroup"] == b'{\n  "zarr_format": 2\n}'


def test_nczarr_field_holds_only_nczarr_keys() -> None:
    with pytest.raises(MetadataError, match=r"only keys starting with '_nczarr'.*\['zarr_format'\]"):
        GroupMetadataV2(nczarr={"zarr_format": 3})
    with pytest.raises(MetadataError, match=r"\['shape'\]"):
        ArrayMetadataV2(
            shape=(1,), chunks=(1,), data_type=data_type_from_numpy("<i4", zarr_format=2), fill_value=None,
            nczarr={"shape": [2]},
        )  # fmt: skip


@pytest.mark.oracle
def test_zarr_python_reads_documents_with_nczarr_keys() -> None:
    zarr = zarr_or_skip()
    docs = {
        **GroupMetadataV2.from_json({"zarr_format": 2, "_nczarr_superblock": {"version": "2.0.0"}}).to_documents(),
        **{f"a/{k}": v for k, v in ArrayMetadataV2.from_json(zarray(_nczarr_array=NCZARR_ARRAY)).to_documents().items()},
    }  # fmt: skip
    store = zarr.storage.MemoryStore(store_dict={k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in docs.items()})
    group = zarr.open_group(store, mode="r", zarr_format=2)
    assert group["a"].shape == (5, 7)


def test_parse_group_helpers() -> None:
    g = parse_group_metadata(2, {".zgroup": b'{"zarr_format": 2}', ".zattrs": None})
    assert g == GroupMetadataV2()
    with pytest.raises(MetadataError, match="'.zgroup' document is missing"):
        parse_group_metadata(2, {})


# ---------------------------------------------------------------------------------------------- hypothesis

attr_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=10,
)
v2_dtypes = st.sampled_from(["<i4", ">u2", "|b1", "<f8", ">f4", "<c16", "|S3", "<U2", "<M8[s]", "|V2"])


@st.composite
def v2_arrays(draw: st.DrawFn) -> ArrayMetadataV2:
    ndim = draw(st.integers(0, 4))
    shape = draw(st.lists(st.integers(0, 50), min_size=ndim, max_size=ndim))
    chunks = draw(st.lists(st.integers(1, 20), min_size=ndim, max_size=ndim))
    dt = data_type_from_numpy(draw(v2_dtypes), zarr_format=2)
    return ArrayMetadataV2(
        shape=tuple(shape),
        chunks=tuple(chunks),
        data_type=dt,
        fill_value=draw(st.sampled_from([None, dt.default_fill_value()])),
        order=draw(st.sampled_from(["C", "F"])),
        compressor=draw(st.sampled_from([None, {"id": "zstd", "level": 3}])),
        filters=draw(st.sampled_from([None, ({"id": "delta", "dtype": "<i4"},)])),
        dimension_separator=draw(st.sampled_from([".", "/"])),
        attributes=draw(st.dictionaries(st.text(max_size=5), attr_values, max_size=4)),
    )


@settings(max_examples=60, deadline=None)
@given(v2_arrays())
def test_array_round_trip(meta: ArrayMetadataV2) -> None:
    docs = meta.to_documents()
    again = parse_array_metadata(2, docs)
    assert again == meta
    assert again.to_documents() == docs


# ---------------------------------------------------------------------------------------------- oracle


def _create_v2_arrays(store: Any) -> None:
    import numcodecs
    import zarr

    root = zarr.open_group(
        store, mode="w", zarr_format=2, attributes={"title": "t", "nan": float("nan"), "ü": 1}
    )
    root.create_array(
        "i4", shape=(5, 7), chunks=(2, 3), dtype="<i4", attributes={"_ARRAY_DIMENSIONS": ["y", "x"]}
    )
    root.create_array("f4nan", shape=(4,), chunks=(3,), dtype="<f4", fill_value=float("nan"), order="F")
    root.create_array(
        "f8inf", shape=(4,), chunks=(3,), dtype=">f8", fill_value=-float("inf"), compressors=None
    )
    root.create_array("u8max", shape=(3,), dtype="<u8", fill_value=2**64 - 1)
    root.create_array("f4pt1", shape=(3,), dtype="<f4", fill_value=0.1)
    root.create_array("c16", shape=(3,), dtype="<c16", fill_value=complex(float("nan"), 1.0))
    root.create_array("b1", shape=(3,), dtype=bool, fill_value=True)
    root.create_array("s", shape=(3,), dtype="S2", fill_value=b"ab")
    root.create_array("u", shape=(3,), dtype="<U3", fill_value="xy")
    root.create_array("str", shape=(3,), dtype=str)
    root.create_array("m8", shape=(3,), dtype="<M8[ns]")
    root.create_array("v", shape=(3,), dtype="V3")
    root.create_array("rec", shape=(3,), dtype=[("a", "<f4"), ("b", "<i2")], fill_value=(1.5, 3))
    root.create_array("zero_d", shape=(), dtype="<i2", fill_value=7)
    root.create_array(
        "empty", shape=(0, 4), chunks=(1, 2), dtype="<i8", chunk_key_encoding={"name": "v2", "separator": "/"}
    )
    root.create_array(
        "filtered", shape=(10,), chunks=(5,), dtype="<i4",
        filters=[numcodecs.Delta(dtype="<i4")], compressors=numcodecs.Zstd(level=3),
    )  # fmt: skip


@pytest.mark.oracle
def test_oracle_zarr_python_v2_documents_reproduced() -> None:
    docs = zarr_documents(_create_v2_arrays)
    checked = 0
    for key, data in sorted(docs.items()):
        prefix, _, name = key.rpartition("/")
        p = prefix + "/" if prefix else ""
        meta: Any
        if name == ".zarray":
            meta = parse_array_metadata(2, {".zarray": data, ".zattrs": docs.get(p + ".zattrs")})
        elif name == ".zgroup":
            meta = parse_group_metadata(2, {".zgroup": data, ".zattrs": docs.get(p + ".zattrs")})
        else:
            continue
        ours = meta.to_documents()
        for doc_name, doc in ours.items():
            assert same_json(doc, docs[p + doc_name]), (p + doc_name, doc, docs[p + doc_name])
            assert doc == docs[p + doc_name], (p + doc_name, doc, docs[p + doc_name])
        checked += 1
    assert checked == 17


@pytest.mark.oracle
def test_oracle_zarr_python_reads_our_v2_documents() -> None:
    zarr = zarr_or_skip()

    dt = data_type_from_numpy("<f4", zarr_format=2)
    meta = ArrayMetadataV2(
        shape=(5, 4), chunks=(2, 3), data_type=dt, fill_value=dt.cast_fill_value(float("nan")),
        order="F", compressor={"id": "zstd", "level": 1}, dimension_separator="/",
        attributes={"_ARRAY_DIMENSIONS": ["y", "x"], "units": "m"},
    )  # fmt: skip
    store = zarr.storage.MemoryStore()
    proto = zarr.core.buffer.default_buffer_prototype()
    import asyncio

    async def put() -> None:
        for name, data in meta.to_documents().items():
            await store.set("a/" + name, proto.buffer.from_bytes(data))
        await store.set(".zgroup", proto.buffer.from_bytes(GroupMetadataV2().to_documents()[".zgroup"]))

    asyncio.run(put())
    arr = zarr.open_array(store, path="a", zarr_format=2, mode="r")
    assert arr.shape == (5, 4) and arr.chunks == (2, 3) and arr.dtype == np.dtype("<f4")
    assert arr.order == "F" and np.isnan(arr.fill_value)
    assert arr.attrs["units"] == "m"
    assert np.isnan(arr[:]).all()
