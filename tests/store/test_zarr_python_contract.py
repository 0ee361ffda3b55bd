"""The Store contract (tests/store/test_store_contract.py) again, over zarr-python stores taken through
:class:`~zarr_dask.store.zarr_python.ZarrPythonStore`: a ``LoggingStore`` over a ``LocalStore`` and a
``WrapperStore`` over a ``MemoryStore`` (issue 24)."""

from __future__ import annotations

import pytest

from tests.store.test_store_contract import *  # noqa: F403  (the contract's tests, run with the store below)
from zarr_dask.store import Store, open_store
from zarr_dask.store.zarr_python import ZarrPythonStore

zarr = pytest.importorskip("zarr")


@pytest.fixture(params=["logging-local", "wrapper-memory"])
def store(request: pytest.FixtureRequest, tmp_path) -> Store:  # type: ignore[no-redef]
    from zarr.storage import LocalStore, LoggingStore, MemoryStore, WrapperStore

    inner = LoggingStore(LocalStore(str(tmp_path / "d")), log_level="DEBUG") if request.param == "logging-local" else WrapperStore(MemoryStore())
    opened = open_store(inner)
    assert type(opened) is ZarrPythonStore
    return opened
