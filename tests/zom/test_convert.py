"""to_format(3): v2 specs become v3 specs that read the very same chunk bytes."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_dask
from tests.zom._trees import v2_tree, v3_tree
from zarr_dask.errors import MetadataError
from zarr_dask.spec import ArrayMetadataV2
from zarr_dask.zom import ArraySpec, GroupSpec, from_store

CASES = {
    "f_big": (np.arange(24, dtype=">f8").reshape(4, 6), {"order": "F", "chunks": (3, 4)}),
    "f_3d": (np.arange(60, dtype="<i2").reshape(3, 4, 5), {"order": "F", "chunks": (2, 3, 2), "compressors": "zstd"}),
    "delta": (
        np.arange(30, dtype="<i4").reshape(5, 6),
        {"filters": [{"id": "delta", "dtype": "<i4"}], "compressors": {"id": "zlib", "level": 3}, "chunks": (2, 4),
         "dimension_separator": "/"},  # fmt: skip
    ),
    "text": (np.array(["a", "bb", "ccc", "dddd"], dtype=object), {"chunks": (3,)}),
    "utf32": (np.array(["x", "yy"], dtype=">U3"), {"chunks": (1,)}),
    "record": (np.array([(1.5, 2), (3.0, 4)], dtype=[("x", ">f4"), ("y", ">i2")]), {"chunks": (1,)}),
    "times": (np.array(["2000-01-01", "NaT", "2001-01-01"], dtype="M8[s]"), {"chunks": (2,), "fill_value": 0}),
    "nofill": (np.arange(5, dtype="u1"), {"chunks": (2,), "compressors": None}),
}


def test_in_place_migration_reads_the_same_data(tmp_path):
    root = zarr_dask.create_group(tmp_path, zarr_format=2, attributes={"title": "t"})
    sub = root.create_group("sub")
    for name, (data, kwargs) in CASES.items():
        array = sub.create_array(name, shape=data.shape, dtype=data.dtype, **kwargs)
        array[...] = data
    v2 = from_store(tmp_path)
    v3 = v2.to_format(3)
    store = zarr_dask.open_store(str(tmp_path))
    store.delete_many([key for key in store.list_prefix("") if key.rpartition("/")[2] in (".zarray", ".zgroup", ".zattrs")])
    v3.to_store(str(tmp_path))
    migrated = zarr_dask.open_group(str(tmp_path))
    assert migrated.zarr_format == 3 and dict(migrated.attrs) == {"title": "t"}
    for name, (data, _) in CASES.items():
        got = migrated[f"sub/{name}"][...]
        np.testing.assert_array_equal(got, data)
        assert got.dtype == data.dtype.newbyteorder("=") or data.dtype.kind in "OU" or data.dtype.fields is not None


def test_codec_and_field_translation():
    v3 = v2_tree().to_format(3)
    temp = v3["temp"].to_json()
    assert [c["name"] for c in temp["codecs"]] == ["transpose", "bytes", "blosc"]
    assert temp["codecs"][0]["configuration"] == {"order": [1, 0]}
    assert temp["codecs"][1]["configuration"] == {"endian": "big"}
    assert temp["data_type"] == "float64" and temp["dimension_names"] == ["y", "x"]
    assert "_ARRAY_DIMENSIONS" not in temp["attributes"]
    assert temp["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "."}}
    delta = v3["delta"].to_json()
    assert [c["name"] for c in delta["codecs"]] == ["numcodecs.delta", "bytes", "numcodecs.zlib"]
    assert delta["chunk_key_encoding"]["configuration"] == {"separator": "/"}
    text = v3["sub/text"].to_json()
    assert text["data_type"] == "string" and text["codecs"][0]["name"] == "vlen-utf8" and text["fill_value"] == ""
    record = v3["sub/rec"].to_json()
    assert record["data_type"]["name"] == "struct" and record["fill_value"] == {"x": 0.0, "y": 0}
    assert v3["sub"].attributes == {"a": 1} and v3.attributes == {"title": "v2 tree"}
    fresh = v2_tree().to_format(3, chunk_key_encoding="default")
    assert fresh["temp"].to_json()["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}


def test_null_fill_and_invalid_dimension_attribute():
    meta = ArrayMetadataV2.from_json(
        {"zarr_format": 2, "shape": [3, 2], "chunks": [3, 2], "dtype": "<f4", "fill_value": None, "order": "C",
         "filters": None, "compressor": None},  # fmt: skip
        {"_ARRAY_DIMENSIONS": ["x"]},  # wrong length: kept as an attribute, no dimension_names
    )
    v3 = ArraySpec(metadata=meta).to_format(3)
    assert v3.to_json()["fill_value"] == 0.0 and v3.dimension_names is None
    assert v3.attributes == {"_ARRAY_DIMENSIONS": ["x"]}


def test_unconvertible_hierarchies_name_the_node():
    mixed = ArraySpec.build(zarr_format=2, shape=(2,), dtype=[("a", "<i4"), ("b", ">i4")])
    with pytest.raises(MetadataError, match=r"node '/g/mixed': .*mixes little- and big-endian"):
        GroupSpec(zarr_format=2, members={"g": GroupSpec(zarr_format=2, members={"mixed": mixed})}).to_format(3)
    bad_order = ArraySpec(metadata=ArrayMetadataV2.from_json(
        {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<i4", "fill_value": 0, "order": "C",
         "filters": [{"id": "zlib", "level": 1}, {"id": "delta", "dtype": "<i4"}], "compressor": None}))  # fmt: skip
    with pytest.raises(MetadataError, match="'delta' works on arrays but comes after a byte codec"):
        bad_order.to_format(3)
    with pytest.raises(MetadataError, match="v3 specs to v2 is not supported"):
        v3_tree().to_format(2)
    with pytest.raises(MetadataError, match="only v2 -> v3"):
        v3_tree()["rect"].to_format(2)


def test_same_format_is_identity():
    assert v3_tree().to_format(3) == v3_tree()
    spec = v3_tree()["rect"]
    assert spec.to_format(3) == spec
