"""Consolidated metadata refreshed by writes computed on a LocalCluster with worker processes: once per
write, in its final task, and with no entry lost when the final tasks of several writes run at once in
different processes. (A module of its own: the cluster's client is the default scheduler while it lives.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.graph._helpers import reference_data
from tests.graph.test_consolidated import FORMATS, SlowDocsStore, consolidated_store, listed, many_lazy_writes

pytest.importorskip("distributed")
from tests.graph.test_distributed import client  # noqa: E402, F401 - the LocalCluster fixture


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.filterwarnings("ignore:Computing mixed collections:UserWarning")  # dask array-expr: an Array and a Delayed computed together
def test_distributed_writes_refresh_once_and_lose_no_entry(client: Any, tmp_path: Path, fmt: int) -> None:  # noqa: F811
    url = str(tmp_path / "d.zarr")
    old = consolidated_store(url, fmt)
    new = reference_data((4, 3), seed=5)
    shape = client.compute(zarr_dask.append(da.from_array(new, chunks=(3, 2)), url, component="x", compute=False)).result()
    assert shape == (9, 3) and listed(url)["x"].shape == (9, 3)
    region = zarr_dask.to_zarr(da.zeros((2, 3), chunks=1), url, component="x", region=(slice(0, 2),), compute=False)
    client.compute(region).result()
    expected = np.concatenate([old, new])
    expected[:2] = 0
    np.testing.assert_array_equal(zarr_dask.from_zarr(zarr_dask.open_group(url)["x"]).compute(), expected)
    store = SlowDocsStore(tmp_path / "d.zarr")
    client.gather(client.compute(many_lazy_writes(store, 4, fmt)))
    assert {f"v/{i}" for i in range(4)} <= set(listed(url)) and listed(url)["x"].shape == (11, 3)
    assert zarr_dask.check_consolidated(url) == []
