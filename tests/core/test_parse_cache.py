"""The cache of parsed array metadata (``zarr_dask.core.nodes``): reopening an array reparses nothing, yet no
caller can change what another caller gets, and the cache never outlives a change of the documents."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import zarr_dask
from zarr_dask.core import nodes


@pytest.fixture
def array_url(tmp_path):
    url = str(tmp_path / "a.zarr")
    a = zarr_dask.create_array(
        url, shape=(8,), dtype="f4", chunks=(4,), attributes={"units": "m", "deep": {"k": [1]}}
    )
    a[:] = np.arange(8, dtype="f4")
    return url


def test_reopen_shares_the_parse_and_the_pipeline(array_url):
    nodes.clear_parse_cache()
    a, b = zarr_dask.open_array(array_url), zarr_dask.open_array(array_url)
    assert a.metadata is not b.metadata  # each caller has its own object...
    assert a._io.pipeline is b._io.pipeline  # ...built from one parse
    assert a.metadata == b.metadata and hash(a.metadata) == hash(b.metadata)
    assert len(nodes._PARSED) == 1


def test_a_caller_changing_its_attributes_changes_nobody_else(array_url):
    a = zarr_dask.open_array(array_url)
    a.metadata.attributes["units"] = "changed in place"
    a.metadata.attributes["deep"]["k"].append(2)
    with pytest.raises(ValueError, match="read-only"):
        a.metadata.fill_value[()] = 7  # shared by every copy: not writable
    b = zarr_dask.open_array(array_url)
    assert b.metadata.attributes == {"units": "m", "deep": {"k": [1]}}
    assert b.metadata.fill_value[()] == 0
    assert b.attrs["units"] == "m"


def test_new_documents_are_parsed_again(array_url):
    before = zarr_dask.open_array(array_url)
    a = zarr_dask.open_array(array_url)
    a.attrs["units"] = "km"
    a.resize((12,))
    b = zarr_dask.open_array(array_url)
    assert b.shape == (12,) and b.attrs["units"] == "km"
    assert before.shape == (8,) and before.metadata.attributes["units"] == "m"
    assert before.metadata != b.metadata


def test_memo_is_not_pickled_and_copies_stay_equal(array_url):
    m = zarr_dask.open_array(array_url).metadata
    m.canonical()
    assert "_memo" in m.__dict__
    clone = pickle.loads(pickle.dumps(m))
    assert "_memo" not in clone.__dict__
    assert clone == m and clone.canonical() == m.canonical()
    assert copy.deepcopy(m) == m


def test_invalid_documents_are_not_cached(tmp_path):
    url = tmp_path / "bad.zarr"
    url.mkdir()
    (url / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [-1]}')
    for _ in range(2):  # the same clear error each time (a failed parse is not remembered)
        with pytest.raises(zarr_dask.errors.ZarrDaskError):
            zarr_dask.open_array(str(url))


def test_large_documents_are_not_kept(tmp_path):
    nodes.clear_parse_cache()
    url = str(tmp_path / "big.zarr")
    zarr_dask.create_array(
        url, shape=(4,), dtype="i1", chunks=(4,), attributes={"blob": "x" * (nodes._PARSED_MAX_BYTES + 1)}
    )
    zarr_dask.open_array(url)
    assert not nodes._PARSED


def test_release_memory_empties_it(array_url):
    zarr_dask.open_array(array_url)
    assert nodes._PARSED
    zarr_dask.release_memory()
    assert not nodes._PARSED
