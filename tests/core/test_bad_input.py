"""Bad input: clear errors from zarr_dask.errors naming store, node and problem; nothing written; no code run."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import zarr_dask
from zarr_dask import errors


def v3_doc(**over):
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }
    doc.update(over)
    return {k: v for k, v in doc.items() if v is not None}


def put(store, path, doc):
    store.set(f"{path}/zarr.json", json.dumps(doc).encode())


@pytest.mark.parametrize(
    "raw, exc, match",
    [
        (b"{not json", errors.MetadataError, "JSON"),
        (json.dumps(v3_doc(shape=None)).encode(), errors.MetadataError, "shape"),
        (json.dumps(v3_doc(shape="4")).encode(), errors.MetadataError, "shape"),
        (json.dumps(v3_doc(codecs=[{"name": "bytes"}, {"name": "no-such-codec"}])).encode(), errors.UnknownCodecError, "no-such-codec"),
        (json.dumps(v3_doc(foo={"bar": 1})).encode(), errors.UnknownExtensionError, "foo"),
        (json.dumps(v3_doc(data_type="int33")).encode(), errors.DataTypeError, "int33"),
    ],
)
def test_bad_metadata(raw, exc, match):
    store = zarr_dask.MemoryStore()
    store.set("arr/zarr.json", raw)
    with pytest.raises(exc, match=match) as info:
        zarr_dask.open_array(store, path="arr")[:]
    msg = str(info.value)
    assert "memory" in msg and "/arr" in msg


def test_must_understand_false_is_accepted():
    store = zarr_dask.MemoryStore()
    put(store, "arr", v3_doc(extra={"must_understand": False, "x": 1}))
    assert zarr_dask.open_array(store, path="arr")[:].tolist() == [0, 0, 0, 0]


def test_wrong_size_and_truncated_chunks():
    store = zarr_dask.MemoryStore()
    put(store, "arr", v3_doc())
    store.set("arr/c/0", np.arange(3, dtype="<i4").tobytes())  # 12 bytes, expected 8
    a = zarr_dask.open_array(store, path="arr")
    with pytest.raises(errors.ChunkDecodeError, match=r"arr/c/0") as info:
        a[:]
    assert "/arr" in str(info.value)
    b = zarr_dask.create_array(store, path="z", shape=(100,), dtype="f8", chunks=(100,), compressors="zstd")
    b[:] = np.arange(100.0)
    store.set("z/c/0", store.get("z/c/0")[:-10])
    with pytest.raises(errors.ChunkDecodeError, match="z/c/0"):
        b[:]


class Boom:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))


def test_pickle_filter_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = zarr_dask.MemoryStore()
    zarray = {
        "zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "|O", "compressor": None,
        "fill_value": None, "order": "C", "filters": [{"id": "pickle"}],
    }
    store.set("p/.zarray", json.dumps(zarray).encode())
    store.set("p/0", pickle.dumps(np.array([Boom()], dtype=object)))
    with pytest.raises(errors.UnsafeCodecError, match="pickle"):
        zarr_dask.open_array(store, path="p")[:]
    assert not (tmp_path / "PWNED").exists()
    with pytest.raises(errors.UnsafeCodecError):
        zarr_dask.create_array(store, path="q", shape=(1,), dtype=object, filters=[{"id": "pickle"}], zarr_format=2)
    assert not store.exists("q/.zarray")


@pytest.mark.parametrize("path", ["../evil", "a/../../evil", "a/./b"])
def test_dotdot_paths_refused(tmp_path, path):
    root = tmp_path / "root.zarr"
    with pytest.raises(errors.InvalidPathError):
        zarr_dask.create_array(str(root), path=path, shape=(1,), dtype="i1")
    assert not (tmp_path / "evil").exists()
    with pytest.raises(errors.InvalidPathError):
        zarr_dask.open_group(str(root), path=path)


def test_consolidated_key_traversal_refused():
    store = zarr_dask.MemoryStore()
    zarr_dask.create_group(store, zarr_format=2)
    zmeta = {"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, "../x/.zgroup": {"zarr_format": 2}}}
    store.set(".zmetadata", json.dumps(zmeta).encode())
    with pytest.raises(errors.ZarrDaskError, match=r"\.\."):
        zarr_dask.open_group(store).members()


def test_errors_pickle_and_mix_builtins():
    e = errors.ArrayNotFoundError("nope", store="memory://x", path="a")
    assert isinstance(e, FileNotFoundError)
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == str(e) == "store 'memory://x', node '/a': nope"


@pytest.mark.parametrize("fmt", [2, 3])
def test_wrong_zarr_format_names_the_format_there(tmp_path, fmt):
    """Opening with the other zarr_format says which format is there, not only "nothing found"."""
    url = str(tmp_path / "x.zarr")
    zarr_dask.create_array(url, path="a", shape=(2,), dtype="i1", zarr_format=fmt)
    other = 5 - fmt
    with pytest.raises(errors.ArrayNotFoundError, match=f"there is a Zarr v{fmt} array there: pass zarr_format={fmt}"):
        zarr_dask.open_array(url, path="a", zarr_format=other, mode="r")
    with pytest.raises(errors.ArrayNotFoundError, match="found nothing\\); check the URL and path"):
        zarr_dask.open_array(url, path="b", zarr_format=other, mode="r")


def test_missing_bucket_is_named(s3_storage_options):
    """A bucket that does not exist is named as such, not as a missing array or group."""
    url = "s3://zd-no-such-bucket-here/data.zarr"
    with pytest.raises(errors.ArrayNotFoundError, match="the bucket 'zd-no-such-bucket-here' does not exist"):
        zarr_dask.open_array(url, mode="r", storage_options=s3_storage_options)
