"""``zarr_dask.convert`` and ``zarr-dask convert`` from and to Icechunk repositories (issue 24): a plain Zarr
v2 archive into a sharded v3 hierarchy in a repository (one snapshot), and back out; no consolidated
metadata or markers of ours in the repository."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.cli._helpers import run
from zarr_dask.errors import UnsupportedFeatureError

icechunk = pytest.importorskip("icechunk")

pytestmark = pytest.mark.icechunk


def _archive(path):
    ds = xr.Dataset({"v": (("t", "x"), np.arange(600.0).reshape(60, 10))}, coords={"t": np.arange(60)}, attrs={"k": 1})
    ds.v.encoding["chunks"] = (1, 10)
    zarr_dask.to_zarr_dataset(ds, str(path), zarr_format=2)
    return ds


def _keys(session):
    return zarr_dask.open_store(session).list_prefix("")


def test_python_api_into_and_out_of_a_session(tmp_path):
    ds = _archive(tmp_path / "v2.zarr")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    zarr_dask.convert(str(tmp_path / "v2.zarr"), session, zarr_format=3, chunks={"t": 20}, shards={"t": 60}, mode="w")
    session.commit("converted")
    ro = repo.readonly_session(branch="main")
    assert sorted(_keys(ro)) == ["t/c/0", "t/zarr.json", "v/c/0/0", "v/zarr.json", "zarr.json"]  # one shard
    assert b"consolidated_metadata" not in zarr_dask.open_store(ro).get("zarr.json")
    xr.testing.assert_identical(xr.open_dataset(ro, engine="zarr_dask").load(), ds)
    zarr_dask.convert(ro, str(tmp_path / "back.zarr"), zarr_format=2, chunks={"t": 6}, mode="w")
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "back.zarr", engine="zarr_dask").load(), ds)


def test_command_line_repository_urls(tmp_path):
    ds = _archive(tmp_path / "v2.zarr")
    repo_url = f"icechunk:{tmp_path / 'repo'}"
    run("convert", str(tmp_path / "v2.zarr"), repo_url, "--zarr-format", "3", "--shards", "t=30")
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    history = list(repo.ancestry(branch="main"))
    assert len(history) == 2 and history[0].message.startswith("zarr-dask convert")
    xr.testing.assert_identical(xr.open_dataset(repo.readonly_session(branch="main"), engine="zarr_dask").load(), ds)
    repo.create_tag("v1", history[0].id)
    run("convert", f"{repo_url}?tag=v1", str(tmp_path / "out.zarr"))
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "out.zarr", engine="zarr_dask").load(), ds)
    bad = run("convert", f"{repo_url}?colour=red", str(tmp_path / "x.zarr"), check=False)
    assert bad.returncode != 0 and "?branch=NAME" in bad.stderr


def test_a_cluster_is_refused_for_a_session_destination(tmp_path):
    _archive(tmp_path / "v2.zarr")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")

    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
        pytest.raises(UnsupportedFeatureError, match="threads"),
    ):
        zarr_dask.convert(str(tmp_path / "v2.zarr"), session, scheduler=client, mode="w")
    assert not session.has_uncommitted_changes
