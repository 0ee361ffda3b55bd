"""One answer to "is this array sharded, and what are its read and write units?" (zarr_dask.spec.layout),
the same through Array, explain_write, convert, the ZOM, xarray's encoding and the HTML reprs."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import zarr_dask
from zarr_dask import zom
from zarr_dask.errors import MetadataError
from zarr_dask.spec.layout import flat_codecs, sharding_in, sharding_of

LE = {"name": "bytes", "configuration": {"endian": "little"}}
INDEX = [LE, {"name": "crc32c"}]
SHARDING = {"name": "sharding_indexed",
            "configuration": {"chunk_shape": [2, 3], "codecs": [LE], "index_codecs": INDEX, "index_location": "end"}}  # fmt: skip
GZIP = {"name": "gzip", "configuration": {"level": 1}}


def _array(tmp_path, *compressors):
    arr = zarr_dask.create_array(tmp_path / "a.zarr", shape=(8, 12), chunks=(4, 6), dtype="i2",
                                 serializer=SHARDING, compressors=list(compressors) or None)  # fmt: skip
    arr[...] = np.arange(96, dtype="i2").reshape(8, 12)
    return arr


@pytest.mark.parametrize("outer", [[], [GZIP]], ids=["whole-chain", "sharding+gzip"])
def test_one_answer_everywhere(tmp_path, outer):
    da = pytest.importorskip("dask.array")
    arr = _array(tmp_path, *outer)
    assert json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["codecs"] == [SHARDING, *outer]
    layout = sharding_of(arr.metadata)
    assert layout is not None and layout.inner_chunk_shape == (2, 3) and layout.write_unit == "shard"
    assert layout.whole_chain == (not outer)
    assert layout.read_unit == ("shard" if outer else "inner chunk")

    # Array: the shards are the storage keys, the chunks the inner chunks; reads decode inner chunks only when
    # the shard index is reachable without decoding the whole shard. The public attributes answer as
    # zarr-python's: not sharded unless sharding_indexed is the whole chain (issue 38)
    assert (arr.shards, arr.chunks) == ((None, (4, 6)) if outer else ((4, 6), (2, 3)))
    assert arr.read_chunk_sizes == (((4, 4), (6, 6)) if outer else ((2, 2, 2, 2), (3, 3, 3, 3)))
    assert arr.write_chunk_sizes == ((4, 4), (6, 6))
    np.testing.assert_array_equal(zarr_dask.open_array(tmp_path / "a.zarr")[1:7, 2:9],
                                  np.arange(96, dtype="i2").reshape(8, 12)[1:7, 2:9])  # fmt: skip

    # explain_write: the write unit
    plan = zarr_dask.explain_write(da.zeros((8, 12), chunks=(4, 6), dtype="i2"), tmp_path / "a.zarr",
                                   region=(slice(0, 8), slice(0, 12)))  # fmt: skip
    assert (plan.unit, plan.unit_shape) == ("shard", (4, 6))

    # the ZOM and the HTML reprs
    spec = zom.ArraySpec.from_store(tmp_path / "a.zarr")
    assert spec.sharding == layout
    for html in (arr._repr_html_(), spec._repr_html_()):
        assert re.search(r"Shards</th><td>\(4, 6\)", html), html
        assert re.search(r"Chunks</th><td>\(2, 3\)", html), html

    # convert keeps the shards and the inner chunks (the outer gzip moves inside: a whole-chain layout)
    report = zarr_dask.convert(tmp_path / "a.zarr", tmp_path / "b.zarr")
    source = report.arrays[0].plan.stages[0].source  # a reader of [sharding, gzip] decodes whole shards
    assert (source.unit, source.chunk) == ((4, 6), (4, 6) if outer else (2, 3))
    copied = zarr_dask.open_array(tmp_path / "b.zarr")
    assert (copied.shards, copied.chunks) == ((4, 6), (2, 3))
    assert sharding_of(copied.metadata).inner_codecs == [LE, *outer]
    np.testing.assert_array_equal(copied[...], arr[...])


def test_xarray_encoding_gives_the_same_answer(tmp_path):
    xr = pytest.importorskip("xarray")
    _array(tmp_path, GZIP)
    ds = xr.Dataset({"v": (("y", "x"), np.zeros((8, 12), "i2"))})
    zarr_dask.to_zarr_dataset(ds, tmp_path / "d.zarr", encoding={"v": {"serializer": SHARDING, "compressors": [GZIP],
                                                                       "chunks": (4, 6)}})  # fmt: skip
    assert json.loads((tmp_path / "d.zarr" / "v" / "zarr.json").read_text())["codecs"] == [SHARDING, GZIP]
    enc = xr.open_dataset(tmp_path / "d.zarr", engine="zarr_dask")["v"].encoding
    assert enc["chunks"] == (2, 3) and enc["shards"] == (4, 6)
    assert enc["compressors"][-1] == GZIP


def test_not_sharded():
    assert sharding_in([LE, GZIP]) is None
    assert flat_codecs([LE, GZIP]) == [LE, GZIP]


def test_after_an_array_to_array_codec_the_inner_chunks_are_in_its_coordinates():
    layout = sharding_in([{"name": "transpose", "configuration": {"order": [1, 0]}}, SHARDING])
    assert layout is not None and not layout.leading and not layout.whole_chain


@pytest.mark.parametrize("config", [
    5, None, [], {"chunk_shape": 2}, {"chunk_shape": [2, True]}, {"chunk_shape": [2], "codecs": 5},
    {"chunk_shape": [2], "codecs": {"name": "bytes"}}, {"chunk_shape": [2], "codecs": [5]},
    {"chunk_shape": [2], "index_codecs": "bytes"},
])  # fmt: skip
def test_hostile_sharding_configurations_are_metadata_errors(config):
    with pytest.raises(MetadataError, match="sharding_indexed"):
        sharding_in([{"name": "sharding_indexed", "configuration": config}])
