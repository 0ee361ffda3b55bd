"""Virtual chunks read with ``engine="zarr_dask"`` (issue 24): VirtualiZarr's ``ManifestStore`` and an Icechunk
repository holding virtual references to a NetCDF4 file made here with h5netcdf, equal to xarray's reading of
the file itself."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import zarr_dask

icechunk = pytest.importorskip("icechunk")
pytest.importorskip("virtualizarr")
pytest.importorskip("h5netcdf")
pytest.importorskip("h5py")

pytestmark = pytest.mark.icechunk


@pytest.fixture
def netcdf(tmp_path):
    ds = xr.Dataset(
        {"v": (("t", "x"), np.arange(60.0).reshape(10, 6)), "w": ("t", np.arange(10, dtype="i4"))},
        coords={"t": np.arange(10)},
        attrs={"title": "virtual"},
    )
    path = tmp_path / "data.nc"
    encoding = {"v": {"chunksizes": (4, 3), "zlib": True, "shuffle": True}, "w": {"chunksizes": (5,)}}
    ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    with xr.open_dataset(path, engine="h5netcdf") as expected:
        yield path, expected.load()


def _parse(path):
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    return registry, HDFParser(), f"file://{path}"


def test_manifest_store_reads_like_the_file(netcdf):
    path, expected = netcdf
    registry, parser, url = _parse(path)
    manifest = parser(url=url, registry=registry)
    assert not zarr_dask.open_store(manifest).process_local
    xr.testing.assert_identical(xr.open_dataset(manifest, engine="zarr_dask").load(), expected)
    np.testing.assert_array_equal(zarr_dask.from_zarr(manifest, component="v").compute(), expected.v.values)
    with pytest.raises(zarr_dask.errors.ReadOnlyError):
        zarr_dask.to_zarr_dataset(expected, manifest, mode="a")


def test_virtual_icechunk_repository_reads_like_the_file(netcdf, tmp_path):
    from virtualizarr import open_virtual_dataset

    path, expected = netcdf
    registry, parser, url = _parse(path)
    folder = f"file://{path.parent}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(folder, icechunk.local_filesystem_store(str(path.parent))))
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config,
        authorize_virtual_chunk_access={folder: icechunk.credentials.LocalFileSystemAccess},
    )
    session = repo.writable_session("main")
    open_virtual_dataset(url, registry=registry, parser=parser).vz.to_icechunk(session.store)
    session.commit("virtual references")
    ro = repo.readonly_session(branch="main")
    xr.testing.assert_identical(xr.open_dataset(ro, engine="zarr_dask").load(), expected)
    xr.testing.assert_identical(xr.open_dataset(ro.store, engine="zarr_dask", chunks={}).load(), expected)
