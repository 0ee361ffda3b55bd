"""A missing bucket, refused credentials, a denied request and throttling each get their own error and fix, on
S3 (moto), GCS (fake-gcs-server), Azure Blob (Azurite) and HTTP; none of them is ever read as an existing node,
a lost race or a missing key (issue 40: a wrong bucket was reported as "a group already exists here; pass
overwrite=True", advice that deletes data)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

import zarr_dask
from zarr_dask.errors import (
    BucketNotFoundError,
    NodeExistsError,
    StoreAccessDeniedError,
    StoreCredentialsError,
    StoreError,
    StoreThrottledError,
)
from zarr_dask.store.failures import classify

xr = pytest.importorskip("xarray")


def _writes(url: str, options: dict[str, Any]) -> list[Any]:
    ds = xr.Dataset({"v": ("x", np.arange(4.0))})
    return [
        lambda: zarr_dask.to_zarr_dataset(ds, url, storage_options=options),
        lambda: zarr_dask.to_zarr_dataset(ds, url, storage_options=options, mode="a"),
        lambda: zarr_dask.create_group(url, storage_options=options),
        lambda: zarr_dask.create_array(url, shape=(4,), dtype="f4", storage_options=options),
    ]


@pytest.mark.parametrize("kind", ["s3", "gcs", "azure"])
def test_a_missing_bucket_is_said_and_never_an_existing_node(kind: str, request: pytest.FixtureRequest) -> None:
    options = request.getfixturevalue({"s3": "s3_storage_options", "gcs": "gcs_storage_options", "azure": "azure_storage_options"}[kind])
    scheme, noun = {"s3": ("s3", "bucket"), "gcs": ("gs", "bucket"), "azure": ("az", "container")}[kind]
    url = f"{scheme}://zd-no-such-bucket/x.zarr"
    for write in _writes(url, options):
        with pytest.raises(BucketNotFoundError) as info:
            write()
        assert not isinstance(info.value, NodeExistsError)
        message = str(info.value)
        assert f"the {noun} 'zd-no-such-bucket' does not exist" in message
        assert url in message and "create it first" in message
        assert "overwrite" not in message and "exists here" not in message


def test_azure_credentials_refused(azure_storage_options: dict[str, Any], azure_container_url: str) -> None:
    """Azurite checks the account key: a wrong one is a credentials error, not a missing or existing node."""
    wrong = azure_storage_options["connection_string"].replace("AccountKey=", "AccountKey=AAAA", 1)
    with pytest.raises(StoreCredentialsError, match="did not accept the credentials") as info:
        zarr_dask.create_array(azure_container_url, shape=(4,), dtype="f4", storage_options={"connection_string": wrong})
    assert "storage_options" in str(info.value) and "AZURE_STORAGE_CONNECTION_STRING" in str(info.value)


@pytest.fixture
def refusing_http() -> Iterator[tuple[str, dict[str, int]]]:
    """An HTTP server on 127.0.0.1 answering each path with the status its name says (``/401/x.zarr/...``)."""
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            status = int(self.path.strip("/").split("/")[0])
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", {}
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "error", "words"),
    [(401, StoreCredentialsError, "did not accept the credentials"), (403, StoreAccessDeniedError, "access denied"),
     (429, StoreThrottledError, "throttled")],
)  # fmt: skip
def test_http_refusals_are_not_missing_nodes(refusing_http: tuple[str, dict[str, int]], status: int, error: type, words: str) -> None:
    base, _ = refusing_http
    with pytest.raises(error, match=words):
        zarr_dask.open_array(f"{base}/{status}/x.zarr", mode="r")


def _client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [("NoSuchBucket", 404, "bucket"), ("AccessDenied", 403, "denied"), ("InvalidAccessKeyId", 403, "credentials"),
     ("SignatureDoesNotMatch", 403, "credentials"), ("ExpiredToken", 400, "credentials"), ("SlowDown", 503, "throttled"),
     ("NoSuchKey", 404, None), ("PreconditionFailed", 412, None)],
)  # fmt: skip
def test_s3_error_codes_as_s3fs_raises_them(code: str, status: int, kind: str | None) -> None:
    """s3fs translates botocore's ClientError into a builtin OSError and chains the original (as here)."""
    try:
        try:
            raise _client_error(code, status)
        except Exception as exc:
            raise (FileNotFoundError if status == 404 else PermissionError if status == 403 else OSError)("translated") from exc
    except OSError as translated:
        found = classify(translated)
    assert (found[0] if found else None) == kind


def test_throttled_and_credential_classes_of_the_other_clients() -> None:
    pytest.importorskip("azure.core", reason="azure-core comes with the test extra's adlfs")
    pytest.importorskip("botocore", reason="botocore comes with the test extra's s3fs")
    import aiohttp
    import yarl
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
    from botocore.exceptions import NoCredentialsError
    from multidict import CIMultiDict, CIMultiDictProxy

    busy = HttpResponseError("busy")
    busy.error_code = "ServerBusy"
    assert classify(busy) == ("throttled", "ServerBusy: busy")
    assert classify(ClientAuthenticationError("no"))[0] == "credentials"  # type: ignore[index]
    assert classify(NoCredentialsError())[0] == "credentials"  # type: ignore[index]
    info = aiohttp.RequestInfo(url=yarl.URL("http://127.0.0.1/x"), method="GET", headers=CIMultiDictProxy(CIMultiDict()))
    too_many = aiohttp.ClientResponseError(info, (), status=429, message="Too Many Requests")
    assert classify(too_many)[0] == "throttled"  # type: ignore[index]
    assert classify(ConnectionResetError("reset")) is None and classify(FileExistsError("x")) is None


def test_a_classified_failure_is_a_store_error_naming_the_store() -> None:
    from zarr_dask.store import MemoryStore

    store = MemoryStore()
    err = store._error("read", "a/zarr.json", _client_error("SlowDown", 503))
    assert isinstance(err, StoreThrottledError) and isinstance(err, StoreError) and isinstance(err, OSError)
    assert "a/zarr.json" in str(err) and "max-requests" in str(err)


@pytest.fixture
def s3_with_auth(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto (in this process: ``ThreadedMotoServer``) checks credentials while the test runs: its IAM knows no
    key, so every request with the test's credentials is refused as an unknown access key."""
    from moto import settings
    from moto.core.responses import ActionAuthenticatorMixin

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)


def test_s3_credentials_refused(s3_bucket_url: str, s3_storage_options: dict[str, Any], s3_with_auth: None) -> None:
    for write in _writes(s3_bucket_url, s3_storage_options)[2:]:
        with pytest.raises(StoreCredentialsError, match="did not accept the credentials") as info:
            write()
        assert "InvalidAccessKeyId" in str(info.value) and "exists" not in str(info.value)
