"""``mode`` is validated everywhere it is accepted: unknown modes never open anything writable."""

from __future__ import annotations

import pytest

import zarr_dask
from zarr_dask import errors

BAD = ["R", "rw", "x", "", "W", "a+", "r-", "wb", None, 1]
MESSAGE = (
    "is not a mode zarr_dask accepts: 'r' (read only, must exist), 'r+' (read/write, must exist), "
    "'a' (read/write, created if missing), 'w' (create, replacing what is there), 'w-' (create, fail if "
    "something exists)"
)


@pytest.fixture
def store():
    s = zarr_dask.MemoryStore()
    zarr_dask.create_array(s, path="a", shape=(4,), dtype="i4", chunks=(2,))
    zarr_dask.create_group(s, path="g")
    return s


@pytest.mark.parametrize("mode", BAD)
@pytest.mark.parametrize("func, path", [("open_array", "a"), ("open_group", "g"), ("open", "a"), ("open", "g")])
def test_unknown_modes_are_refused(store, func, path, mode):
    with pytest.raises(errors.InvalidModeError) as info:
        getattr(zarr_dask, func)(store, path=path, mode=mode)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == f"store {store.url!r}: mode {mode!r} {MESSAGE}"
    assert zarr_dask.open_array(store, path="a")[:].tolist() == [0, 0, 0, 0]  # nothing changed


@pytest.mark.parametrize("mode", BAD)
def test_from_zarr_refuses_unknown_modes(store, mode):
    with pytest.raises(errors.InvalidModeError) as info:
        zarr_dask.from_zarr(store, component="a", mode=mode)
    assert str(info.value) == f"store {store.url!r}: mode {mode!r} {MESSAGE}"


@pytest.mark.parametrize("mode", ["r", "r+", "a", "w", "w-"])
def test_documented_modes_of_open_array(store, mode):
    a = zarr_dask.open_array(store, path="a", mode=mode)
    assert a.read_only is (mode == "r")


def test_read_only_mode_refuses_writes(store):
    with pytest.raises(errors.ReadOnlyError):
        zarr_dask.open_array(store, path="a", mode="r")[:] = 1


@pytest.mark.parametrize("mode", ["R", "rw", "x", "a-"])
def test_convert_refuses_unknown_modes(store, mode):
    with pytest.raises(errors.InvalidModeError) as info:
        zarr_dask.convert(store, zarr_dask.MemoryStore(), mode=mode)
    assert str(info.value) == (
        f"mode {mode!r} is not a convert mode: 'w-' (fail if the destination exists), 'w' (replace it) or "
        "'resume' (finish an interrupted conversion)"
    )


@pytest.mark.parametrize("mode", ["R", "rw", "x", "ww"])
def test_to_zarr_dataset_refuses_unknown_modes(mode):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"v": ("x", [1, 2])})
    with pytest.raises(errors.InvalidModeError, match=f"The only supported options for mode are .* but mode={mode!r}"):
        zarr_dask.to_zarr_dataset(ds, "memory://modes-x", mode=mode)
