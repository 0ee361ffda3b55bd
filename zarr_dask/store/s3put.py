"""Direct ``PutObject`` for S3 stores: chunk and shard uploads without botocore's per-request pipeline.

A chunk write to S3 through s3fs spends about 4 ms of client CPU per ``PutObject`` in aiobotocore, all of it
on fsspec's one event-loop thread: building the request through botocore's event hooks, hashing the body for
SigV4 and for its CRC32 checksum, and aiohttp's send. With 64 requests in flight that thread, not the network,
is what limits a write of many small chunks (``benchmarks/bench_remote.py``, ``docs/design/remote-io.md``).

:class:`DirectPut` sends the same request botocore would send, signed with SigV4 here:

* The **URL and signing region come from botocore**: once per bucket, a presigned ``PutObject`` URL (public
  API, nothing is sent) says how botocore addresses that bucket (endpoint, path or virtual-host style); the
  region is that of the client s3fs uses for the bucket.
* The **credentials are botocore's**, frozen once per batch (refreshable credentials refresh as usual).
* The **body is hashed in the calling thread** (``hashlib`` and ``crc32c`` release the GIL), so the dask
  threads that encoded the chunks hash them in parallel, and the event loop only sends. As botocore does,
  the body carries a checksum header unless the client's ``request_checksum_calculation`` is
  ``"when_required"``, and the payload is SHA-256-signed unless the endpoint is ``https`` and carries that
  checksum (then ``UNSIGNED-PAYLOAD``); an explicit ``payload_signing_enabled`` wins. The checksum is CRC32C
  (``x-amz-checksum-crc32c``, one of S3's algorithms, hardware-computed by the ``crc32c`` package at about 5x
  the speed of botocore's default CRC32: 0.8 vs 4.1 ms per 16 MiB here), which S3 verifies the same way.

**The fast path only ever says "stored".** A ``200`` is success. Throttling, ``5xx``, a ``RequestTimeout``
and connection errors are retried a few times with backoff. Anything else (a redirect to another region, a
denied request, a missing bucket, expired credentials, retries exhausted) sends that value through s3fs as
before, so every error a user sees is botocore's own; a bucket whose direct request was refused is not tried
directly again by that filesystem (expired credentials excepted: the next batch takes the refreshed ones).
Retrying a plain ``PutObject`` of the same bytes is what botocore does too.

Only filesystems whose requests this module can reproduce exactly take the fast path (:func:`direct_put`):
s3fs with SigV4 credentials, no ``s3_additional_kwargs`` (encryption, ACLs...), no requester-pays, no
proxies, default TLS verification; S3 Express directory buckets and access-point ARNs are left to s3fs.
``zarr_dask.config`` knob ``s3_direct_put`` turns it off.

Examples
--------
The signature is botocore's (a test compares the two):

>>> headers = sign_put("http://127.0.0.1:9000/bucket/data.zarr/c/0/0", {}, "UNSIGNED-PAYLOAD",
...                    access_key="AKID", secret_key="SECRET", token=None, region="us-east-1", now=0)
>>> headers["Host"], headers["x-amz-date"]
('127.0.0.1:9000', '19700101T000000Z')
>>> headers["Authorization"].split(", ")[1]
'SignedHeaders=host;x-amz-content-sha256;x-amz-date'
>>> sorted(stats())
['direct', 'handed_to_s3fs', 'retried']
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import functools
import hashlib
import hmac
import logging
import os
import random
import ssl
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from crc32c import crc32c

from zarr_dask import config
from zarr_dask.store.base import Parts, value_nbytes

__all__ = ["DirectPut", "Target", "direct_put", "sign_put", "stats"]

log = logging.getLogger(__name__)

#: Bodies this size or larger go through s3fs (which uploads them in parts).
MAX_DIRECT_BYTES = 50 << 20
#: Bodies are sent in pieces of this size (see :func:`_pieces`).
PIECE = 256 << 10
#: Attempts of one request before it is handed to s3fs (whose botocore retries again).
ATTEMPTS = 4
#: The checksum header of each body (see the module notes): CRC32C, verified by S3 as botocore's default CRC32 is
CHECKSUM_HEADER = "x-amz-checksum-crc32c"
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: S3 error codes retried whatever their status (as botocore does): a body that arrived too slowly, throttling.
_RETRY_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "SlowDown", "Throttling", "ThrottlingException"})
#: Credentials that expired during a batch: s3fs sends the value (botocore refreshes), the bucket stays direct.
#: a conditional create whose key exists (S3 answers 412 PreconditionFailed, or 409 under a concurrent write)
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
_EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired"})
_PROBE_KEY = "zarr-dask-probe-key"
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

_counts_lock = threading.Lock()
_counts = {"direct": 0, "retried": 0, "handed_to_s3fs": 0}


def stats() -> dict[str, int]:
    """Requests sent directly, retried, and handed to s3fs in this process (for tests and benchmarks)."""
    with _counts_lock:
        return dict(_counts)


def _count(name: str) -> None:
    with _counts_lock:
        _counts[name] += 1


# ------------------------------------------------------------------------------------------------- SigV4
@functools.lru_cache(maxsize=64)
def _signing_key(secret: str, date: str, region: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign_put(
    url: str,
    headers: dict[str, str],
    payload_hash: str,
    *,
    access_key: str,
    secret_key: str,
    token: str | None,
    region: str,
    now: float | None = None,
) -> dict[str, str]:
    """The headers of a SigV4-signed ``PUT`` of ``url`` (percent-encoded as sent, no query string): ``headers`` plus
    ``Host``, ``x-amz-date``, ``x-amz-content-sha256``, ``x-amz-security-token`` (with a ``token``) and
    ``Authorization``. ``now``: the signing time in seconds since the epoch (default: the clock).

    Every header given is signed (give only ``x-amz-*`` and the like, never hop-by-hop headers).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None and (parts.scheme, parts.port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{parts.port}"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    signed: dict[str, str] = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed.update({"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload_hash})
    if token:
        signed["x-amz-security-token"] = token
    names = sorted(signed)
    canonical = "\n".join([
        "PUT",
        parts.path or "/",
        "",  # no query string: object URLs carry none
        "".join(f"{n}:{signed[n]}\n" for n in names),
        ";".join(names),
        payload_hash,
    ])  # fmt: skip
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(secret_key, stamp[:8], region), to_sign.encode(), hashlib.sha256).hexdigest()
    out = {("Host" if n == "host" else n): signed[n] for n in names}
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return out


# ---------------------------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Target:
    """Where one bucket's objects are put, as botocore addresses them: ``prefix`` + the encoded key is the URL."""

    prefix: str
    region: str

    def url(self, key: str) -> str:
        return self.prefix + quote(key, safe="/~")


@dataclass(frozen=True)
class Prepared:
    """One request's body and hashes (made in the calling thread); signed on the event loop when sent."""

    path: str
    bucket: str
    key: str
    body: tuple[Any, ...]  #: the body's buffers, sent one after the other
    size: int  #: its length in bytes
    payload_hash: str
    checksum: str | None


class DirectPut:
    """Direct ``PutObject`` requests for one s3fs filesystem (see the module notes). Use :func:`direct_put`.

    ``https``, ``checksum`` and ``sign_payload`` (None: botocore's rule) settle the hashes of each body;
    ``ssl_context`` is the TLS context of ``https`` endpoints.
    """

    def __init__(self, fs: Any, *, https: bool, checksum: bool = True, sign_payload: bool | None = None,
                 ssl_context: Any = None, connect_timeout: float = 60.0, read_timeout: float = 60.0) -> None:  # fmt: skip
        self.fs = fs
        self.https = https
        self.checksum = checksum
        self.sign_payload = sign_payload if sign_payload is not None else not (https and checksum)
        self._ssl = ssl_context
        self._timeouts = (connect_timeout, read_timeout)
        self._targets: dict[str, Target | None] = {}
        self._discovering: dict[str, asyncio.Future[Target | None]] = {}
        self._session: Any = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    # --------------------------------------------------------------------------- calling thread
    def prepare(self, path: str, body: bytes | Parts) -> Prepared | None:
        """Hash ``body`` for its request (here, off the event loop); None if it must go through s3fs. A
        :class:`~zarr_dask.store.base.Parts` body is hashed and sent piece by piece, never joined."""
        bucket, key, version = self.fs.split_path(path)
        size = value_nbytes(body)
        if self._targets.get(bucket, False) is None or version or not key or size >= MAX_DIRECT_BYTES:
            return None
        buffers = body.buffers if isinstance(body, Parts) else (body,)
        sha = hashlib.sha256() if self.sign_payload else None
        crc = 0
        for buffer in buffers:
            if sha is not None:
                sha.update(buffer)
            if self.checksum:
                crc = crc32c(buffer, crc)
        return Prepared(
            path,
            bucket,
            key,
            buffers,
            size,
            sha.hexdigest() if sha is not None else "UNSIGNED-PAYLOAD",
            base64.b64encode(crc.to_bytes(4, "big")).decode() if self.checksum else None,
        )

    # ------------------------------------------------------------------------------ event loop
    async def put(self, item: Prepared, credentials: Any, *, create_only: bool = False) -> bool | None:
        """Send one prepared ``PutObject``; True when S3 stored it, False when s3fs should send it instead.
        ``create_only``: with ``If-None-Match: *`` (a conditional create), and None when the key exists (``412``
        or ``409``: the condition did not hold; nothing was stored)."""
        bucket = item.bucket
        target = await self._target(bucket)
        if target is None or credentials is None:
            return False
        url = target.url(item.key)
        extra = {CHECKSUM_HEADER: item.checksum} if item.checksum else {}
        if create_only:
            extra["if-none-match"] = "*"
        session = await self._client_session()
        import aiohttp  # noqa: PLC0415 - s3fs's dependency, present whenever this runs

        for attempt in range(ATTEMPTS):
            headers = sign_put(url, extra, item.payload_hash, access_key=credentials.access_key,
                               secret_key=credentials.secret_key, token=credentials.token, region=target.region)  # fmt: skip
            code = ""
            try:
                payload = _pieces(item.body)  # (a generator per attempt: a retry sends the body again)
                headers["Content-Length"] = str(item.size)
                async with session.put(_encoded(url), data=payload, headers=headers, allow_redirects=False) as response:
                    body = await response.read()
                    status = response.status
            except ssl.SSLError as exc:  # a certificate botocore would trust differently (e.g. a profile's)
                status, reason = -1, f"{type(exc).__name__}: {exc}"
            except (OSError, TimeoutError, aiohttp.ClientError) as exc:  # connection errors, a closed keep-alive
                status, reason = 0, f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # anything unforeseen: not stored, so s3fs sends it (and the bucket's rest)
                log.debug("direct PutObject of %s failed", item.path, exc_info=True)
                status, reason = -1, f"{type(exc).__name__}: {exc}"
            else:
                code = _error_code(body) if status != 200 else ""
                reason = f"HTTP {status} {code}".strip()
            if status == 200:
                _count("direct")
                self.fs.invalidate_cache(item.path)
                return True
            if create_only and (status in (409, 412) or code in _CONFLICT_CODES):
                _count("direct")
                return None
            if code in _EXPIRED_CODES:  # s3fs refreshes the credentials; the next batch freezes fresh ones
                log.debug("direct PutObject of %s: %s, s3fs sends it", item.path, reason)
                break
            if status and status not in _RETRY_STATUS and code not in _RETRY_CODES:
                self._targets[bucket] = None  # refused: this bucket goes through s3fs from now on
                log.debug("direct PutObject of %s refused (%s): s3fs sends it and the rest of %s", item.path, reason, bucket)
                break
            if attempt + 1 < ATTEMPTS:
                _count("retried")
                await asyncio.sleep(random.uniform(0, min(1.0, 0.05 * 2**attempt)))
        _count("handed_to_s3fs")
        return False

    async def credentials(self, bucket: str) -> Any:
        """Frozen credentials of the client s3fs uses for ``bucket`` (None: anonymous, or none found)."""
        try:
            client = await self._client(bucket)
            creds = client._request_signer._credentials
            return None if creds is None else await creds.get_frozen_credentials()
        except Exception as exc:  # noqa: BLE001 - no direct path: s3fs sends the request instead
            log.debug("no credentials for direct PutObject to %s: %s", bucket, exc)
            return None

    async def _client(self, bucket: str) -> Any:
        await self.fs.set_session()
        return await self.fs.get_s3(bucket)

    async def _target(self, bucket: str) -> Target | None:
        """The bucket's target, discovered once (the first batch's requests all wait on one discovery)."""
        if bucket not in self._targets:
            pending = self._discovering.get(bucket)
            if pending is None:
                pending = self._discovering[bucket] = asyncio.ensure_future(self._discover(bucket))
            target = await asyncio.shield(pending)
            self._discovering.pop(bucket, None)
            self._targets.setdefault(bucket, target)
        return self._targets[bucket]

    async def _discover(self, bucket: str) -> Target | None:
        """botocore's URL and signing region for ``bucket`` (from a presigned URL: nothing is sent)."""
        if bucket.endswith("--x-s3") or bucket.startswith("arn:"):  # directory buckets, access points
            return None
        try:
            client = await self._client(bucket)
            url = await client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": _PROBE_KEY})
        except Exception as exc:  # noqa: BLE001 - no direct path: s3fs sends the request instead
            log.debug("direct PutObject off for %s: %s", bucket, exc)
            return None
        parts = urlsplit(url)
        if not parts.path.endswith("/" + _PROBE_KEY) or parts.scheme != ("https" if self.https else "http"):
            return None
        region = client.meta.region_name  # botocore signs S3 requests for the client's region
        if not region or region == "aws-global":
            region = "us-east-1"
        return Target(f"{parts.scheme}://{parts.netloc}{parts.path[: -len(_PROBE_KEY)]}", region)

    async def _client_session(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:  # e.g. after a fork
            import aiohttp

            connect, read = self._timeouts
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=self._ssl),  # the request budget bounds it
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read),
                auto_decompress=False,
                skip_auto_headers=("User-Agent",),
            )
            self._session_loop = loop
            _SESSIONS[id(self)] = (self._session, loop)
        return self._session


_SESSIONS: dict[int, tuple[Any, asyncio.AbstractEventLoop]] = {}


def _close(ident: int, wait: bool = False) -> None:
    """Close a session on its loop. Never blocks a finalizer (the garbage collector may run it on any thread,
    the loop's own included); at exit, waits a moment for the close."""
    entry = _SESSIONS.pop(ident, None)
    if entry is None:
        return
    session, loop = entry
    if session.closed or loop.is_closed() or not loop.is_running():
        return
    future = asyncio.run_coroutine_threadsafe(session.close(), loop)
    if wait and not _on_loop(loop):
        with contextlib.suppress(Exception):  # shutting down: nothing more to do
            future.result(timeout=2)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


@atexit.register
def _close_all() -> None:
    for ident in list(_SESSIONS):
        _close(ident, wait=True)


async def _pieces(buffers: tuple[Any, ...]) -> Any:
    """The body (``buffers``, one after the other) in pieces of at most :data:`PIECE` bytes (memoryviews, no
    copies), each sent once the previous one left the event loop's buffer. Given whole, aiohttp joins a body to
    the request's headers (a copy of it, on Python < 3.12.9) and asyncio copies what the socket does not take at
    once into the transport's buffer (on Python < 3.12): for a 16 MiB shard, two copies of most of it on the
    event-loop thread."""
    for buffer in buffers:
        view = memoryview(buffer).cast("B")
        for start in range(0, len(view), PIECE):
            yield view[start : start + PIECE]


def _error_code(body: bytes) -> str:
    """The ``<Code>`` of an S3 error document ("" if there is none)."""
    start = body.find(b"<Code>")
    end = body.find(b"</Code>", start)
    return body[start + 6 : end].decode("utf-8", "replace").strip() if start >= 0 and end > start else ""


def _encoded(url: str) -> Any:
    import yarl

    return yarl.URL(url, encoded=True)


_ATTRIBUTE = "_zarr_dask_direct_put"  # on the filesystem object: never pickled (fsspec pickles its arguments)
_MAKE_LOCK = threading.Lock()


def direct_put(fs: Any) -> DirectPut | None:
    """The :class:`DirectPut` of s3fs filesystem ``fs``, or None when its puts must go through s3fs."""
    if not config.get("s3_direct_put"):
        return None
    with _MAKE_LOCK:
        cached = getattr(fs, _ATTRIBUTE, False)
        if cached is None or isinstance(cached, DirectPut):
            return cached
        made = _make(fs)
        try:
            setattr(fs, _ATTRIBUTE, made)
        except AttributeError:  # a filesystem class with slots: decided again next time
            return made
        if made is not None:
            weakref.finalize(fs, _close, id(made))
        return made


def _make(fs: Any) -> DirectPut | None:
    """A :class:`DirectPut` for ``fs`` when its requests can be reproduced exactly (see the module notes)."""
    why = _unsupported(fs)
    if why:
        log.debug("direct PutObject off for %r: %s", fs, why)
        return None
    client = fs.s3
    cfg = client.meta.config
    https = (client.meta.endpoint_url or "").startswith("https")
    context = None
    if https:
        from botocore.httpsession import get_cert_path

        verify = (fs.client_kwargs or {}).get("verify")  # as botocore: the client's, then AWS_CA_BUNDLE, then its own
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True))
    return DirectPut(
        fs,
        https=https,
        checksum=getattr(cfg, "request_checksum_calculation", "when_supported") != "when_required",
        sign_payload=(getattr(cfg, "s3", None) or {}).get("payload_signing_enabled"),
        ssl_context=context,
        connect_timeout=float(getattr(cfg, "connect_timeout", 60) or 60),
        read_timeout=float(getattr(cfg, "read_timeout", 60) or 60),
    )


def _unsupported(fs: Any) -> str:
    """Why ``fs``'s puts cannot be sent directly ("" when they can)."""
    if type(fs).__name__ != "S3FileSystem" or not (type(fs).__module__ or "").startswith("s3fs"):
        return "not an s3fs filesystem"
    if getattr(fs, "anon", False):
        return "anonymous"
    if getattr(fs, "s3_additional_kwargs", None) or getattr(fs, "req_kw", None):
        return "s3_additional_kwargs or requester_pays are set"
    if getattr(fs, "asynchronous", False):
        return "an asynchronous filesystem (its loop belongs to the caller)"
    if any(os.environ.get(name) for name in _PROXY_ENV):
        return "a proxy is configured in the environment"
    try:
        client = fs.s3  # s3fs connects on first use
    except Exception as exc:  # noqa: BLE001 - reported as the reason the direct path is off
        return f"cannot connect: {type(exc).__name__}: {exc}"
    cfg = client.meta.config
    if getattr(cfg, "proxies", None) or getattr(cfg, "client_cert", None):
        return "proxies or a client certificate are configured"
    if getattr(cfg, "signature_version", None) not in (None, "s3v4", "v4"):
        return f"signature version {cfg.signature_version!r}"
    if (fs.client_kwargs or {}).get("verify") is False:
        return "TLS verification is off"
    if getattr(cfg, "request_checksum_calculation", "when_supported") not in ("when_supported", "when_required"):
        return "an unknown checksum setting"
    return ""
