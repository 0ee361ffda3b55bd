"""The interop cases peers write and read that we once refused or wrote differently (issue 16, item 5):
v2 zstd configs, 0-d sharded arrays, numcodecs ``Categorize`` over object dtype. Each is checked against
zarr-python and tensorstore (test-only oracles) where they read it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import zarr_dask

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.oracle


def _ts() -> object:
    return pytest.importorskip("tensorstore", reason="tensorstore is a test extra (not installable on this Python?)")


# ------------------------------------------------------------------------------------ v2 zstd
@pytest.mark.parametrize("level", [0, 3])
def test_v2_zstd_as_zarr_python_and_tensorstore_write_it(tmp_path: Path, level: int) -> None:
    ts = _ts()
    data = np.arange(30, dtype="<i4").reshape(5, 6)
    ours = zarr_dask.create_array(str(tmp_path / "ours"), shape=data.shape, chunks=(2, 4), dtype="<i4",
                                  zarr_format=2, compressors=numcodecs.Zstd(level=level))
    ours[:] = data
    theirs = zarr.create_array(str(tmp_path / "zp"), shape=data.shape, chunks=(2, 4), dtype="<i4", zarr_format=2,
                               compressors=numcodecs.Zstd(level=level))
    theirs[:] = data
    meta = json.loads((tmp_path / "ours" / ".zarray").read_text())
    assert meta["compressor"] == json.loads((tmp_path / "zp" / ".zarray").read_text())["compressor"]
    assert meta["compressor"] == {"id": "zstd", "level": level}
    for key in ("0.0", "2.1"):  # byte-identical chunks
        assert (tmp_path / "ours" / key).read_bytes() == (tmp_path / "zp" / key).read_bytes()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "ours"))[:], data)
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "ours")}}).result()
    np.testing.assert_array_equal(t.read().result(), data)
    # and tensorstore's own v2 zstd array reads here
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "ts")}, "create": True,
            "metadata": {"shape": [5, 6], "chunks": [2, 4], "dtype": "<i4", "compressor": {"id": "zstd", "level": level}}}
    w = ts.open(spec).result()
    w[...] = data
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path / "ts"))[:], data)


# ------------------------------------------------------------------------------------ 0-d sharded
def test_0d_sharded_array_from_zarr_python_and_back(tmp_path: Path) -> None:
    if tuple(int(p) for p in zarr.__version__.split(".")[:2]) < (3, 2):
        pytest.skip(f"zarr-python {zarr.__version__} cannot write 0-d sharded arrays (3.2+ can)")
    ts = _ts()
    z = zarr.create_array(str(tmp_path / "zp"), shape=(), chunks=(), shards=(), dtype="<f8", fill_value=1.5)
    assert json.loads((tmp_path / "zp" / "zarr.json").read_text())["codecs"][0]["configuration"]["chunk_shape"] == []
    z[...] = 4.25
    a = zarr_dask.open_array(str(tmp_path / "zp"), mode="r+")
    assert a[...] == 4.25 and a.shards == () and a.chunks == ()
    a[...] = -2.0
    assert z[...] == -2.0
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "zp")}}).result()
    assert t.read().result() == -2.0
    ours = zarr_dask.create_array(str(tmp_path / "ours"), shape=(), chunks=(), shards=(), dtype="<f8", fill_value=1.5)
    ours[...] = 7.0
    assert json.loads((tmp_path / "ours" / "zarr.json").read_text())["codecs"] == json.loads(
        (tmp_path / "zp" / "zarr.json").read_text()
    )["codecs"]
    assert (tmp_path / "ours" / "c").read_bytes() == _zp_bytes(tmp_path, 7.0)
    assert zarr.open_array(str(tmp_path / "ours"))[...] == 7.0
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "ours")}}).result()
    assert t.read().result() == 7.0


def _zp_bytes(tmp_path: Path, value: float) -> bytes:
    z = zarr.create_array(str(tmp_path / "zp2"), shape=(), chunks=(), shards=(), dtype="<f8", fill_value=1.5)
    z[...] = value
    return (tmp_path / "zp2" / "c").read_bytes()


# ------------------------------------------------------------------------------------ Categorize
def test_categorize_over_object_dtype(tmp_path: Path) -> None:
    """zarr-python 3 and tensorstore read no v2 object array with Categorize (zarr-python 2 and xarray on it wrote
    them): the bytes are numcodecs' own, both ways."""
    cat = numcodecs.Categorize(labels=["a", "bb", "ccc"], dtype=object, astype="u1")
    path = tmp_path / "cat"
    path.mkdir()
    meta = {"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": "|O", "compressor": None, "fill_value": None,
            "order": "C", "filters": [cat.get_config()], "dimension_separator": "."}
    (path / ".zarray").write_text(json.dumps(meta))
    values = np.array(["a", "bb", "ccc", "a", "bb"], dtype=object)
    for i in range(3):
        chunk = np.full(2, "a", dtype=object)
        chunk[: len(values[2 * i : 2 * i + 2])] = values[2 * i : 2 * i + 2]
        (path / str(i)).write_bytes(bytes(cat.encode(chunk)))
    a = zarr_dask.open_array(str(path), mode="r+")
    assert a[:].tolist() == values.tolist() and a.dtype == object
    a[1:3] = ["ccc", "a"]
    assert bytes(cat.encode(np.array(["a", "ccc"], dtype=object))) == (path / "0").read_bytes()
    b = zarr_dask.create_array(str(tmp_path / "ours"), shape=(4,), chunks=(2,), dtype=str, zarr_format=2,
                               filters=[cat], compressors=None)
    b[:] = ["bb", "bb", "a", "ccc"]
    assert json.loads((tmp_path / "ours" / ".zarray").read_text())["filters"] == [cat.get_config()]
    assert (tmp_path / "ours" / "1").read_bytes() == bytes(cat.encode(np.array(["a", "ccc"], dtype=object)))
    assert b[:].tolist() == ["bb", "bb", "a", "ccc"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="No Zarr data type"):  # the day zarr-python reads it, test it here
            zarr.open_array(str(path))
