"""Direct ``PutObject`` (zarr_dask.store.s3put): botocore's signature exactly, moto round trips, and every
request that is not a clean ``200`` handed to s3fs (retries first for throttling and server errors)."""

from __future__ import annotations

import base64
import calendar
import hashlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dask
import numpy as np
import pytest
from crc32c import crc32c

import zarr_dask
from zarr_dask.errors import StoreError
from zarr_dask.store import open_store, s3put

botocore_auth = pytest.importorskip("botocore.auth")
pytest.importorskip("s3fs")
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402


def _botocore_headers(url: str, body: bytes, *, token: str | None, unsigned: bool) -> dict[str, str]:
    """What botocore's own S3 signer sends for this PUT (the oracle)."""
    checksum = base64.b64encode(crc32c(body).to_bytes(4, "big")).decode()
    request = AWSRequest(method="PUT", url=url, data=body, headers={"x-amz-checksum-crc32c": checksum})
    if unsigned:  # what botocore's PutObject context says on https with a checksum header
        request.context["has_streaming_input"] = True
        request.context["checksum"] = {"request_algorithm": {"in": "header", "name": "x-amz-checksum-crc32c"}}
    botocore_auth.S3SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", token), "s3", "eu-west-3").add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("url", "token", "unsigned"),
    [
        ("http://127.0.0.1:9000/bucket/root.zarr/c/0/1", None, False),
        ("https://bucket.s3.eu-west-3.amazonaws.com/root.zarr/zarr.json", "SESSION/TOKEN+=", True),
        ("https://s3.eu-west-3.amazonaws.com:443/bucket/a%20b%2Bc%25/~x/c/0", None, False),
        ("http://minio.local/bucket/deep/er/key", "t", False),
    ],
)
def test_signature_is_botocores(url: str, token: str | None, unsigned: bool) -> None:
    body = b"\x00chunk bytes\xff" * 100
    want = _botocore_headers(url, body, token=token, unsigned=unsigned)
    now = calendar.timegm(time.strptime(want["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
    payload = "UNSIGNED-PAYLOAD" if unsigned else hashlib.sha256(body).hexdigest()
    assert want["X-Amz-Content-SHA256"] == payload
    got = s3put.sign_put(url, {"x-amz-checksum-crc32c": want["x-amz-checksum-crc32c"]}, payload,
                         access_key="AKIDEXAMPLE", secret_key="wJalrXUtnFEMI/K7MDENG", token=token,
                         region="eu-west-3", now=now)  # fmt: skip
    assert got["Authorization"] == want["Authorization"]
    assert got.get("x-amz-security-token") == want.get("X-Amz-Security-Token")


# --------------------------------------------------------------------------------------------- moto
@pytest.mark.s3
def test_array_writes_go_direct_and_read_back(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    x = np.random.default_rng(3).random((300, 200)).astype("f4")
    url = s3_bucket_url.replace("root.zarr", "a b+c%/root.zarr")  # keys that need percent-encoding
    before = s3put.stats()
    zarr_dask.to_zarr(x, url, storage_options=s3_storage_options, chunks=(100, 50))
    after = s3put.stats()
    assert after["direct"] - before["direct"] >= 12  # every chunk (the metadata may go either way)
    assert after["handed_to_s3fs"] == before["handed_to_s3fs"]
    np.testing.assert_array_equal(zarr_dask.open_array(url, storage_options=s3_storage_options)[:], x)
    # the same bytes s3fs itself reads, under the same keys
    store = open_store(url, storage_options=s3_storage_options)
    assert sorted(store.list_prefix("c")) == [f"c/{i}/{j}" for i in range(3) for j in range(4)]


@pytest.mark.s3
def test_the_knob_turns_it_off(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    before = s3put.stats()
    with dask.config.set({"zarr_dask.s3-direct-put": False}):
        store.set_many({"a": b"1", "b": b"2"})
    assert s3put.stats() == before
    store.set_many({"a": b"3", "b": b"4"})
    assert s3put.stats()["direct"] == before["direct"] + 2
    assert store.get_many(["a", "b"]) == {"a": b"3", "b": b"4"}


@pytest.mark.s3
def test_a_refused_request_is_sent_by_s3fs(s3_server: str, s3_storage_options: dict[str, Any]) -> None:
    store = open_store("s3://no-such-bucket-zd-direct/x.zarr", storage_options=s3_storage_options)
    before = s3put.stats()
    with pytest.raises(StoreError, match="cannot write key 'k'.*bucket does not exist"):
        store.set_many({"k": b"1"})
    assert s3put.stats()["handed_to_s3fs"] == before["handed_to_s3fs"] + 1
    assert s3put.direct_put(store.fs).prepare("no-such-bucket-zd-direct/x.zarr/k", b"1") is None  # not tried again


@pytest.mark.s3
def test_unsupported_filesystems_keep_s3fs(s3_server: str, s3_storage_options: dict[str, Any]) -> None:
    import s3fs

    options = {k: v for k, v in s3_storage_options.items() if k != "use_listings_cache"}
    sse = s3fs.S3FileSystem(**options, s3_additional_kwargs={"ServerSideEncryption": "AES256"}, skip_instance_cache=True)
    assert s3put.direct_put(sse) is None
    anon = s3fs.S3FileSystem(anon=True, client_kwargs=options["client_kwargs"], skip_instance_cache=True)
    assert s3put.direct_put(anon) is None
    assert s3put.direct_put(s3fs.S3FileSystem(**options, skip_instance_cache=True)) is not None


# ----------------------------------------------------------------------------- a scripted S3 server
class _Scripted:
    """An HTTP server answering PUTs with the next status of a script (then 200), recording each request."""

    def __init__(self, statuses: list[int | tuple[int, str]]) -> None:
        self.statuses = list(statuses)
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers.items()), body))
                answer = outer.statuses.pop(0) if outer.statuses else 200
                if answer == 0:  # hang up without an answer (a closed keep-alive connection)
                    self.close_connection = True
                    return
                status, code = answer if isinstance(answer, tuple) else (answer, "")
                error = f"<?xml version='1.0'?><Error><Code>{code}</Code></Error>".encode() if code else b""
                self.send_response(status)
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import s3fs
    from fsspec.asyn import sync

    servers: list[_Scripted] = []
    monkeypatch.setattr(s3put.asyncio, "sleep", _no_sleep)

    def make(statuses: list[int | tuple[int, str]]) -> tuple[_Scripted, Any]:
        server = _Scripted(statuses)
        servers.append(server)
        fs = s3fs.S3FileSystem(key="k", secret="s", client_kwargs={"endpoint_url": server.url, "region_name": "us-east-1"},
                               skip_instance_cache=True)  # fmt: skip
        direct = s3put.direct_put(fs)
        assert direct is not None

        def put(path: str, body: Any) -> bool:
            item = direct.prepare(path, body)
            assert item is not None
            return bool(sync(fs.loop, _put, direct, item))

        return server, put

    yield make
    for server in servers:
        server.close()


async def _no_sleep(_: float) -> None:
    return None


async def _put(direct: s3put.DirectPut, item: s3put.Prepared) -> bool:
    return await direct.put(item, await direct.credentials(item.bucket))


def test_throttling_and_server_errors_are_retried(scripted: Any) -> None:
    server, put = scripted([503, 500])
    before = s3put.stats()
    assert put("bkt/root/c/0", b"abc") is True
    assert len(server.requests) == 3 and s3put.stats()["retried"] == before["retried"] + 2
    path, headers, body = server.requests[-1]
    assert path == "/bkt/root/c/0" and body == b"abc"
    assert headers["x-amz-content-sha256"] == hashlib.sha256(b"abc").hexdigest()  # http: the payload is signed
    assert headers["x-amz-checksum-crc32c"] == base64.b64encode(crc32c(b"abc").to_bytes(4, "big")).decode()
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=k/")


def test_a_body_of_many_pieces_arrives_whole_on_every_attempt(scripted: Any) -> None:
    body = np.random.default_rng(5).integers(0, 256, 2 * s3put.PIECE + 12345, dtype="u1").tobytes()
    server, put = scripted([503])
    assert put("bkt/root/c/1", body) is True
    assert [len(b) for _, _, b in server.requests] == [len(body)] * 2  # sent in 3 pieces, twice
    assert all(b == body for _, _, b in server.requests)
    assert server.requests[-1][1]["Content-Length"] == str(len(body))
    assert put("bkt/root/c/2", b"") is True and server.requests[-1][2] == b""


def test_a_body_given_as_parts_is_hashed_and_sent_whole_never_joined(scripted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from zarr_dask.store.base import Parts

    rng = np.random.default_rng(6)
    buffers = [rng.integers(0, 256, n, dtype="u1").tobytes() for n in (16, s3put.PIECE + 7, 0, 3, 2 * s3put.PIECE)]
    body = b"".join(buffers)
    monkeypatch.setattr(Parts, "__bytes__", _never_joined)
    server, put = scripted([503])
    assert put("bkt/root/c/3", Parts([buffers[0], memoryview(buffers[1]), *buffers[2:]])) is True
    assert [b for _, _, b in server.requests] == [body, body]  # in pieces, on both attempts
    headers = server.requests[-1][1]
    assert headers["Content-Length"] == str(len(body))
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert headers["x-amz-checksum-crc32c"] == base64.b64encode(crc32c(body).to_bytes(4, "big")).decode()


def _never_joined(self: Any) -> bytes:
    raise AssertionError("a Parts value was joined")


def test_a_dropped_connection_is_retried(scripted: Any) -> None:
    server, put = scripted([0, 0])  # aiohttp: ServerDisconnectedError, which is not an OSError
    assert put("bkt/k", b"x") is True
    assert len(server.requests) == 3


def test_error_codes_botocore_retries_are_retried(scripted: Any) -> None:
    server, put = scripted([(400, "RequestTimeout"), (503, "SlowDown")])
    assert put("bkt/k", b"x") is True
    assert len(server.requests) == 3


def test_expired_credentials_hand_one_request_to_s3fs_and_keep_the_bucket(scripted: Any) -> None:
    server, put = scripted([(400, "ExpiredToken")])
    assert put("bkt/k", b"x") is False  # s3fs sends it (botocore refreshes the credentials)
    assert put("bkt/k2", b"y") is True  # the next batch goes direct again, with fresh credentials
    assert len(server.requests) == 2


def test_exhausted_retries_hand_the_request_to_s3fs(scripted: Any) -> None:
    server, put = scripted([503] * s3put.ATTEMPTS)
    before = s3put.stats()
    assert put("bkt/k", b"x") is False
    assert len(server.requests) == s3put.ATTEMPTS
    assert s3put.stats()["handed_to_s3fs"] == before["handed_to_s3fs"] + 1


@pytest.mark.parametrize("status", [301, 400, 403, 404, 412])
def test_other_answers_are_not_retried_and_stop_the_bucket(scripted: Any, status: int) -> None:
    server, put = scripted([status])
    assert put("bkt/k", b"x") is False
    assert len(server.requests) == 1
    with pytest.raises(AssertionError):
        put("bkt/k2", b"y")  # prepare() now says "through s3fs" for this bucket
    assert put("other-bucket/k", b"z") is True


# ------------------------------------------------------------------------ a server that checks signatures
@pytest.fixture
def signed_moto(s3_server: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The session's moto server checking every request's SigV4 signature (as S3 does) for this test, and
    storage_options with an IAM user's keys allowed every S3 action on a fresh bucket."""
    import json
    import uuid

    import s3fs
    from moto import settings
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.iam.models import iam_backends

    bucket = f"zd-signed-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**s3_storage_options, skip_instance_cache=True).call_s3("create_bucket", Bucket=bucket)
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    user = f"zd-writer-{uuid.uuid4().hex[:8]}"
    iam.create_user(region_name="us-east-1", user_name=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(user, "all-s3", json.dumps(policy))
    key = iam.create_access_key(user)
    options = {**s3_storage_options, "key": key.access_key_id, "secret": key.secret_access_key}
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    yield {"url": f"s3://{bucket}/root.zarr", "options": options}


@pytest.mark.s3
def test_a_server_that_checks_signatures_accepts_ours(signed_moto: dict[str, Any]) -> None:
    url, options = signed_moto["url"].replace("root.zarr", "a b+c%~=/root.zarr"), signed_moto["options"]
    before = s3put.stats()
    x = np.arange(60 * 40, dtype="i4").reshape(60, 40)
    zarr_dask.to_zarr(x, url, storage_options=options, chunks=(20, 20))
    after = s3put.stats()
    assert after["direct"] - before["direct"] >= 6 and after["handed_to_s3fs"] == before["handed_to_s3fs"]
    np.testing.assert_array_equal(zarr_dask.open_array(url, storage_options=options)[:], x)
    wrong = {**options, "secret": "not-the-secret"}
    store = open_store(url.replace("root.zarr", "other.zarr"), storage_options=wrong)
    with pytest.raises(StoreError, match="cannot write key 'k'"):
        store.set_many({"k": b"1"})  # refused (403): s3fs sends it again, and botocore's error is raised
    assert s3put.stats()["handed_to_s3fs"] == after["handed_to_s3fs"] + 1


def test_closing_a_session_never_blocks_its_loop(scripted: Any) -> None:
    """A filesystem's finalizer may run on fsspec's loop thread (the collector runs anywhere): closing the
    session from there schedules the close and returns, instead of waiting on the loop it is blocking."""
    from fsspec.asyn import get_loop, sync

    server, put = scripted([])
    assert put("bkt/k", b"x") is True
    direct = list(s3put._SESSIONS)[-1]  # the session this put made (the newest)

    async def close_here() -> float:
        t0 = time.perf_counter()
        s3put._close(direct, wait=True)
        return time.perf_counter() - t0

    assert sync(get_loop(), close_here) < 0.5
    assert direct not in s3put._SESSIONS


@pytest.mark.s3
def test_a_bucket_is_discovered_once(s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    from zarr_dask.store import FsspecStore

    calls: list[str] = []
    real = s3put.DirectPut._discover

    async def counting(self: s3put.DirectPut, bucket: str) -> Any:
        calls.append(bucket)
        return await real(self, bucket)

    monkeypatch.setattr(s3put.DirectPut, "_discover", counting)
    options = {k: v for k, v in s3_storage_options.items() if k != "use_listings_cache"}
    store = FsspecStore(s3fs.S3FileSystem(**options, skip_instance_cache=True), s3_bucket_url.removeprefix("s3://"))
    before = s3put.stats()["direct"]
    store.set_many({f"c/{i}": b"v" for i in range(40)})  # 40 requests at once, one discovery
    store.set_many({"d": b"w"})
    assert len(calls) == 1 and s3put.stats()["direct"] == before + 41


def test_conditional_creates_go_direct_and_refuse_an_existing_key(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    """``If-None-Match: *`` creates (what an append writes beyond the committed shape) are direct requests too:
    one request each, a key that exists is refused (False: the condition did not hold) and keeps its value."""
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    store.set("taken", b"first")
    before = s3put.stats()
    with store.counters.counting() as delta:
        won = store.set_if_unchanged({"new": (b"mine", None), "taken": (b"mine", None)})  # type: ignore[attr-defined]
    assert won == {"new": True, "taken": False}
    assert s3put.stats()["direct"] == before["direct"] + 2 and s3put.stats()["handed_to_s3fs"] == before["handed_to_s3fs"]
    assert delta["set"] == 2 and delta["get"] == 0
    assert store.get("new") == b"mine" and store.get("taken") == b"first"
