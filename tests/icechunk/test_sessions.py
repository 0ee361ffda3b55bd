"""Icechunk repositories as stores (issue 24): writes into a session planned by our write planner (dask blocks,
regions, appends and template + ``region="auto"`` writes that cut chunks and shards), with threads and with a
``distributed`` cluster of processes (forks merged back into the caller's session), one snapshot per commit,
read back exact by xarray's zarr engine, zarr-python and zarr_dask; conflicts are Icechunk's, never a loss.

icechunk 2.x needs Python >= 3.12: these tests run in the oracle leg (``make test-oracle``), skip elsewhere.
"""

from __future__ import annotations

import uuid
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.conftest import local_cluster_client
from zarr_dask.errors import ReadOnlyError, UnsupportedFeatureError

icechunk = pytest.importorskip("icechunk")
zarr = pytest.importorskip("zarr")

pytestmark = [
    pytest.mark.icechunk,
    # zarr-python's own warning when it reads the fixed-length strings of a dataset written as v3
    pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification"),
]


def _repo(kind, tmp_path, request=None):
    if kind == "memory":
        storage = icechunk.in_memory_storage()
    elif kind == "local":
        storage = icechunk.local_filesystem_storage(str(tmp_path / f"repo-{uuid.uuid4().hex[:8]}"))
    else:  # the moto server the suite starts on 127.0.0.1
        endpoint = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket_url").split("/")[2]
        storage = icechunk.s3_storage(
            bucket=bucket, prefix="repo", endpoint_url=endpoint, allow_http=True, region="us-east-1",
            access_key_id="testing", secret_access_key="testing", force_path_style=True,
        )  # fmt: skip
    return icechunk.Repository.create(storage)


def _snapshots(repo):
    return len(list(repo.ancestry(branch="main")))


def _dataset(n=20):
    v = np.arange(n * 12, dtype="f8").reshape(n, 12)
    return xr.Dataset(
        {
            "v": (("t", "x"), da.from_array(v, chunks=(3, 5))),  # dask blocks cut the Zarr chunks
            "w": ("t", da.arange(n, chunks=7).astype("i4")),
        },
        coords={"t": np.arange(n), "x": np.arange(12) * 10},
        attrs={"title": "icechunk"},
    )


def _read_all_ways(repo, group, expected):
    """xarray's own zarr engine, zarr-python and zarr_dask read the committed data exactly."""
    ro = repo.readonly_session(branch="main")
    theirs = xr.open_zarr(ro.store, group=group, consolidated=False).load()
    ours = xr.open_dataset(ro.store, engine="zarr_dask", group=group, chunks={}).load()
    xr.testing.assert_identical(theirs, expected)
    xr.testing.assert_identical(ours, expected)
    g = zarr.open_group(ro.store, path=group, mode="r")
    for name in expected.data_vars:
        np.testing.assert_array_equal(g[name][...], expected[name].values)
        np.testing.assert_array_equal(zarr_dask.from_zarr(ro, component=f"{group}/{name}").compute(), expected[name].values)


def _our_keys(repo):
    """Keys zarr_dask must never write into a repository: leases, markers, consolidated metadata."""
    keys = zarr_dask.open_store(repo.readonly_session(branch="main")).list_prefix("")
    return [k for k in keys if ".zd-" in k or k.endswith(".zmetadata")]


# ------------------------------------------------------------------------------------------ threads
@pytest.mark.parametrize("kind", ["memory", "local"])
def test_dataset_write_append_and_region_in_one_snapshot(kind, tmp_path):
    repo = _repo(kind, tmp_path)
    before = _snapshots(repo)
    ds = _dataset()
    ds.v.encoding.update(chunks=(4, 6), shards=(8, 12))  # blocks of 3 rows cut chunks of 4 and shards of 8
    session = repo.writable_session("main")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnprotectedWriteWarning: the transaction arbitrates
        zarr_dask.to_zarr_dataset(ds.isel(t=slice(0, 13)), session, group="g", mode="w")
        zarr_dask.to_zarr_dataset(ds.isel(t=slice(13, None)), session.store, group="g", append_dim="t")
        patch = (ds.isel(t=slice(5, 11)) * 0 - 1).drop_vars("x")
        zarr_dask.to_zarr_dataset(patch, session, group="g", region="auto")
    session.commit("one write")
    assert _snapshots(repo) == before + 1
    expected = ds.compute()
    expected["v"][5:11] = -1
    expected["w"][5:11] = -1
    _read_all_ways(repo, "g", expected)
    assert _our_keys(repo) == []


def test_dask_array_writes_cutting_shards_and_appends(tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    x = da.arange(30 * 8, chunks=7).reshape(30, 8)
    zarr_dask.to_zarr(x, session, component="a", chunks=(4, 4), shards=(8, 8))
    zarr_dask.to_zarr(x[:5, :5] * 0 - 1, session, component="a", region=(slice(3, 8), slice(1, 6)))
    assert zarr_dask.append(x[:7], session, component="a", axis=0) == (37, 8)
    lazy = zarr_dask.to_zarr(x + 1, session, component="b", chunks=(9, 3), compute=False)
    lazy.compute()
    session.commit("arrays")
    expected = np.concatenate([x.compute(), x[:7].compute()])
    expected[3:8, 1:6] = -1
    ro = repo.readonly_session(branch="main")
    np.testing.assert_array_equal(zarr.open_array(ro.store, path="a")[...], expected)
    np.testing.assert_array_equal(zarr_dask.from_zarr(ro.store, component="a").compute(), expected)
    np.testing.assert_array_equal(zarr.open_array(ro.store, path="b")[...], x.compute() + 1)
    assert _our_keys(repo) == []


def test_tags_snapshots_and_read_only_sessions(tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    zarr_dask.to_zarr_dataset(_dataset(6), session)
    first = session.commit("first")
    repo.create_tag("v1", first)
    session = repo.writable_session("main")
    zarr_dask.to_zarr_dataset(_dataset(6) * 2, session, mode="a")
    session.commit("second")
    tagged = repo.readonly_session(tag="v1")
    by_id = repo.readonly_session(snapshot_id=first)
    for ro in (tagged, by_id, tagged.store):
        xr.testing.assert_identical(xr.open_dataset(ro, engine="zarr_dask").load(), _dataset(6).compute())
    with pytest.raises(ReadOnlyError, match="read-only"):
        zarr_dask.to_zarr_dataset(_dataset(6), tagged, mode="a")
    with pytest.raises(ReadOnlyError, match="read-only"):
        zarr_dask.to_zarr(da.zeros(3, chunks=1), tagged.store, component="z")


def test_a_read_only_session_says_how_to_write(tmp_path):
    """A session cannot be reopened writable: every refused write names repo.writable_session, never
    read_only=False or a mode (issue 40 item 7)."""
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    zarr_dask.create_array(session, path="a", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    session.commit("a")
    ro = repo.readonly_session(branch="main")
    writes = {
        "create_array": lambda: zarr_dask.create_array(ro, path="b", shape=(4,), dtype="i4"),
        "create_group": lambda: zarr_dask.create_group(ro, path="g"),
        "setitem": lambda: zarr_dask.open_array(ro, path="a", mode="a").__setitem__(slice(None), 2),
        "attrs": lambda: zarr_dask.open_array(ro, path="a", mode="a").attrs.__setitem__("x", 1),
        "region": lambda: zarr_dask.to_zarr(da.ones(4, chunks=2), ro, component="a", region=(slice(0, 4),)),
        "append": lambda: zarr_dask.append(da.ones(2, chunks=2), ro, component="a"),
        "zom": lambda: zarr_dask.zom.GroupSpec(members={}).to_store(ro, path="z"),
    }
    for name, write in writes.items():
        with pytest.raises(ReadOnlyError) as info:
            write()
        text = str(info.value)
        assert "read-only Icechunk session" in text and "repo.writable_session('main')" in text, (name, text)
        assert "session.commit(message)" in text and "read_only=False" not in text and "mode=" not in text, (name, text)
    repo.create_tag("t", repo.lookup_branch("main"))
    with pytest.raises(ReadOnlyError, match=r"writable_session\('main'\)"):  # a tag's session: the default branch
        zarr_dask.create_group(repo.readonly_session(tag="t"), path="g")


def test_two_sessions_writing_one_chunk_conflict_at_the_second_commit(tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    zarr_dask.to_zarr(da.zeros((8, 8), chunks=4, dtype="i4"), session, component="a", chunks=(4, 4))
    session.commit("create")
    one, two = repo.writable_session("main"), repo.writable_session("main")
    zarr_dask.to_zarr(da.ones((2, 2), chunks=1, dtype="i4"), one, component="a", region=(slice(0, 2), slice(0, 2)))
    zarr_dask.to_zarr(da.full((2, 2), 2, chunks=1, dtype="i4"), two, component="a", region=(slice(1, 3), slice(1, 3)))
    one.commit("one")
    with pytest.raises(icechunk.ConflictError):
        two.commit("two")
    stored = zarr.open_array(repo.readonly_session(branch="main").store, path="a")[...]
    assert stored[:2, :2].tolist() == [[1, 1], [1, 1]] and stored.sum() == 4  # the first commit, whole


def test_datatree_zom_and_open_group_take_a_session(tmp_path):
    repo = _repo("memory", tmp_path)
    session = repo.writable_session("main")
    tree = xr.DataTree.from_dict({"/": xr.Dataset(attrs={"k": 1}), "/child": _dataset(3) * 2})
    zarr_dask.to_zarr_datatree(tree, session, group="tree")
    spec = zarr_dask.zom.GroupSpec(attributes={"made": "zom"}, members={"empty": zarr_dask.zom.GroupSpec()})
    spec.to_store(session, path="zom")
    group = zarr_dask.open_group(session, mode="a")
    group.create_array("direct", shape=(4,), dtype="i2", chunks=(2,))[:] = [1, 2, 3, 4]
    session.commit("tree, zom, group")
    ro = repo.readonly_session(branch="main")
    back = xr.open_datatree(ro, engine="zarr_dask", group="tree").load()
    xr.testing.assert_identical(back["child"].to_dataset(), (_dataset(3) * 2).compute())
    assert zarr_dask.zom.GroupSpec.from_store(ro, path="zom").attributes == {"made": "zom"}
    assert zarr_dask.open_array(ro, path="direct")[...].tolist() == [1, 2, 3, 4]
    assert zarr.open_array(ro.store, path="direct")[...].tolist() == [1, 2, 3, 4]


def test_sessions_writing_different_chunks_rebase_cleanly(tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    zarr_dask.to_zarr(da.zeros((8, 8), chunks=4, dtype="i4"), session, component="a", chunks=(4, 4))
    session.commit("create")
    one, two = repo.writable_session("main"), repo.writable_session("main")
    zarr_dask.to_zarr(da.ones((4, 4), chunks=2, dtype="i4"), one, component="a", region=(slice(0, 4), slice(0, 4)))
    zarr_dask.to_zarr(da.full((4, 4), 2, chunks=2, dtype="i4"), two, component="a", region=(slice(4, 8), slice(4, 8)))
    one.commit("one")
    two.commit("two", rebase_with=icechunk.ConflictDetector())
    stored = zarr.open_array(repo.readonly_session(branch="main").store, path="a")[...]
    assert stored[:4, :4].sum() == 16 and stored[4:, 4:].sum() == 32 and stored.sum() == 48  # both landed


def test_s3_repository(request, tmp_path):
    repo = _repo("s3", tmp_path, request)
    session = repo.writable_session("main")
    ds = _dataset(9)
    zarr_dask.to_zarr_dataset(ds, session, group="g")
    session.commit("s3")
    _read_all_ways(repo, "g", ds.compute())


# ---------------------------------------------------------------------------- a cluster of processes
@pytest.fixture(scope="module")
def cluster():
    with local_cluster_client(threads_per_worker=2) as client:
        yield client


def test_cluster_writes_merge_into_the_callers_session(cluster, tmp_path):
    repo = _repo("local", tmp_path)
    before = _snapshots(repo)
    ds = _dataset()
    ds.v.encoding.update(chunks=(4, 6), shards=(8, 12))
    session = repo.writable_session("main")
    template = ds.isel(t=slice(0, 13))
    zarr_dask.to_zarr_dataset(template, session, group="g", compute=False)  # metadata (+ coordinates) now
    for part in (slice(0, 6), slice(6, 13)):  # regions that start inside a chunk and a shard
        zarr_dask.to_zarr_dataset(template.isel(t=part).drop_vars("x"), session, group="g", region="auto")
    lazy = zarr_dask.to_zarr_dataset(ds.isel(t=slice(13, None)), session, group="g", append_dim="t", compute=False)
    dask.compute(lazy)  # the merge happens when the lazy write is computed
    x = da.arange(40, chunks=3).reshape(20, 2)
    zarr_dask.to_zarr(x, session, component="arr", chunks=(4, 2))
    assert zarr_dask.append(x[:5], session, component="arr") == (25, 2)
    session.commit("cluster write")
    assert _snapshots(repo) == before + 1
    _read_all_ways(repo, "g", ds.compute())
    np.testing.assert_array_equal(
        zarr.open_array(repo.readonly_session(branch="main").store, path="arr")[...],
        np.concatenate([x.compute(), x[:5].compute()]),
    )
    assert _our_keys(repo) == []


def test_cluster_writes_into_an_s3_repository(cluster, request, tmp_path):
    repo = _repo("s3", tmp_path, request)
    session = repo.writable_session("main")
    ds = _dataset(15)
    ds.v.encoding.update(chunks=(4, 6), shards=(8, 12))
    zarr_dask.to_zarr_dataset(ds, session, group="g")
    session.commit("s3 from the cluster")
    _read_all_ways(repo, "g", ds.compute())


def test_cluster_reads_a_read_only_session(cluster, tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    zarr_dask.to_zarr_dataset(_dataset(), session)
    session.commit("data")
    ro = repo.readonly_session(branch="main")
    ours = xr.open_dataset(ro, engine="zarr_dask", chunks={}).compute()
    xr.testing.assert_identical(ours, _dataset().compute())


def test_cluster_write_into_a_repository_in_memory_fails_loudly(cluster, tmp_path):
    repo = _repo("memory", tmp_path)
    session = repo.writable_session("main")
    with pytest.raises(zarr_dask.errors.StoreError, match="in_memory_storage"):
        zarr_dask.to_zarr(da.ones(10, chunks=3), session, component="a", chunks=(4,))
    session.discard_changes()
    assert not session.has_uncommitted_changes


def test_cluster_return_stored_is_refused_not_lost(cluster, tmp_path):
    repo = _repo("local", tmp_path)
    session = repo.writable_session("main")
    with pytest.raises(UnsupportedFeatureError, match="return_stored"):
        zarr_dask.to_zarr(da.ones(10, chunks=3), session, component="a", return_stored=True)
    assert not session.has_uncommitted_changes  # refused before anything was written


def test_resumable_dataset_and_tree_writes_are_refused(tmp_path):
    """resume=True journals into the store, but an uncommitted session dies with its process: refused before
    anything is written, for whole-dataset and datatree writes as for arrays."""
    session = _repo("memory", tmp_path).writable_session("main")
    with pytest.raises(UnsupportedFeatureError, match="Icechunk session"):
        zarr_dask.to_zarr_dataset(_dataset(), session, mode="w", resume=True)
    with pytest.raises(UnsupportedFeatureError, match="Icechunk session"):
        zarr_dask.to_zarr_datatree(xr.DataTree(_dataset()), session.store, mode="w", resume=True)
    assert not session.has_uncommitted_changes  # refused before anything was written
