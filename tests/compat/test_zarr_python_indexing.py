"""oindex / vindex / blocks / masks / __getitem__ dispatch against zarr-python's own (test-only oracle): the same
selections on the same stored array give the same values, and writes through either land identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarr_dask

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.oracle


def _pair(tmp: Path, shards: bool, fmt: int) -> tuple[Any, zarr_dask.Array, np.ndarray[Any, Any]]:
    data = np.arange(9 * 7 * 4, dtype="i4").reshape(9, 7, 4)
    url = str(tmp / f"a{fmt}{int(shards)}.zarr")
    z = zarr.create_array(
        url, shape=data.shape, chunks=(2, 3, 2), shards=(4, 6, 4) if shards else None, dtype="i4",
        zarr_format=fmt, fill_value=-1,
    )
    z[:] = data
    return z, zarr_dask.open_array(url, mode="r+"), data


def _orthogonal(draw: Any, n: int) -> Any:
    # zarr-python takes positive-step slices only; ints, int arrays (any order, repeats, negative) and masks
    return draw(
        st.one_of(
            st.integers(-n, n - 1),
            st.builds(slice, st.none() | st.integers(0, n), st.none() | st.integers(0, n), st.sampled_from([None, 1, 2])),
            st.lists(st.integers(-n, n - 1), min_size=1, max_size=5).map(np.array),
            st.lists(st.booleans(), min_size=n, max_size=n).map(lambda b: np.array(b, dtype=bool)),
        )
    )


@pytest.fixture(scope="module", params=[(2, False), (3, False), (3, True)], ids=["v2", "v3", "v3-sharded"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    fmt, shards = request.param
    return _pair(tmp_path_factory.mktemp("oracle-indexing"), shards, fmt)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_selections_match_zarr_python(pair: Any, data: st.DataObject) -> None:
    z, a, ref = pair
    osel = tuple(_orthogonal(data.draw, n) for n in ref.shape)
    np.testing.assert_array_equal(a.oindex[osel], z.oindex[osel])
    npts = data.draw(st.integers(1, 6))
    vsel = tuple(np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=npts, max_size=npts))) for n in ref.shape)
    np.testing.assert_array_equal(a.vindex[vsel], z.vindex[vsel])
    np.testing.assert_array_equal(a[vsel], z[vsel])
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=ref.size, max_size=ref.size))).reshape(ref.shape)
    np.testing.assert_array_equal(a[mask], z[mask])
    block = tuple(data.draw(st.integers(0, -(-n // c) - 1)) for n, c in zip(ref.shape, a.shards or a.chunks))
    np.testing.assert_array_equal(a.blocks[block], z.blocks[block])
    one = (np.array(data.draw(st.lists(st.integers(0, 8), min_size=1, max_size=4))), slice(1, 6), 2)
    np.testing.assert_array_equal(a[one], z[one])  # one array among slices and ints: orthogonal in both


@pytest.mark.parametrize("shards", [False, True])
def test_writes_land_as_zarr_pythons(tmp_path: Path, shards: bool) -> None:
    z, a, ref = _pair(tmp_path, shards, 3)
    url2 = str(tmp_path / "twin.zarr")
    twin = zarr.create_array(url2, shape=ref.shape, chunks=(2, 3, 2), shards=(4, 6, 4) if shards else None, dtype="i4", fill_value=-1)
    twin[:] = ref
    for target in (a, twin):
        target.oindex[[8, 0, 3], :, [True, False, True, False]] = 100
        target.vindex[[1, 2, 8], [6, 0, 3], [3, 3, 0]] = [-5, -6, -7]
        target[ref % 11 == 0] = 42
        target.blocks[1, 0, :] = 9
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a31.zarr" if shards else tmp_path / "a30.zarr"))[:], twin[:])
