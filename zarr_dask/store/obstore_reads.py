"""Reads of :class:`~zarr_dask.store.fsspec_store.FsspecStore` through obstore (Rust ``object_store``).

fsspec's HTTP and S3 filesystems send every GET through aiohttp (and, for S3, aiobotocore) on fsspec's one
event-loop thread: building, sending and receiving each request is Python code under the GIL, and with 64
requests in flight that thread is what a read of many chunks waits on. obstore sends the same GETs from a
Rust runtime of its own threads, and hands back the bodies. ``benchmarks/bench_remote.py`` measures the two
(``docs/design/remote-io.md``).

:func:`obstore_reads` gives the :class:`ObstoreReads` of a filesystem when its requests can be reproduced
exactly, else None (and says why at debug level, or raises where the ``remote_transport`` knob forces obstore):

* **HTTP(S)** (fsspec's ``HTTPFileSystem``): without ``client_kwargs`` and with no request arguments but
  ``headers`` (sent with every request, as fsspec sends them), and no proxy in the environment (aiohttp does
  not read it; obstore's client would).
* **S3** (s3fs): the endpoint, region
  and addressing style are those of s3fs's botocore client, and the credentials are botocore's, asked for through obstore's credential provider (so refreshable ones refresh);
  anonymous access maps to unsigned requests. Not with ``s3_additional_kwargs`` (SSE-C keys, ...),
  requester-pays, proxies, client certificates, TLS verification off or other signature versions.
* **GCS** (gcsfs, anonymous) and **Azure Blob** (adlfs: connection strings, account keys, SAS tokens, ``anon``):
  :mod:`~zarr_dask.store.obstore_clouds`.

Request counts are those of the fsspec path: one GET per whole value, one ranged GET per range (a suffix
range is one ``bytes=-n`` GET). Missing keys read as missing; every other error is returned in place of the
value, as fsspec's ``on_error="return"`` does, for the store to name its key.

Only reads go through obstore: writes keep the fsspec path (and S3's direct ``PutObject``,
:mod:`zarr_dask.store.s3put`), whose errors and conditional semantics the write guarantees rest on.

Examples
--------
>>> import fsspec
>>> obstore_reads(fsspec.filesystem("memory")) is None  # only HTTP(S), S3, GCS and Azure
True
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from zarr_dask import config
from zarr_dask.errors import UnsupportedFeatureError

__all__ = ["RETRY", "ObstoreReads", "obstore_reads", "read_through_obstore"]

log = logging.getLogger(__name__)

_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_ATTRIBUTE = "_zarr_dask_obstore_reads"
_LOCK = threading.Lock()
#: Kinds ``auto`` leaves on fsspec (``obstore`` opts in): none. S3 was here until its racing-appends failure was
#: found to be the test's 0.6 s lease TTL under load, with either transport (docs/design/remote-io.md).
_AUTO: frozenset[str] = frozenset()
#: Kinds whose ``get_many`` reads (whole keys: chunks, documents) ``auto`` leaves on fsspec, while their
#: ``get_ranges`` reads (shards: indexes, inner ranges, whole shards) go through obstore: HTTP, where fsspec's
#: plain aiohttp GET of a whole 1 MiB chunk was faster in every quiet run of bench_remote (0.515-0.525 s vs
#: 0.567-0.593 s for 256 chunks; session 11, without copying obstore's bodies: 0.490 vs 0.505 s) and obstore's
#: reads of 16 MiB shards were faster (0.466-0.489 vs 0.595-0.611 s; session 11, whole shards: 0.400 vs 0.458 s).
_AUTO_RANGES_ONLY: frozenset[str] = frozenset({"http"})
#: The process that first made obstore reads: obstore's runtime threads do not survive a fork (a child that
#: uses obstore after its parent did hangs), so a forked child reads through fsspec.
_FIRST_USE_PID: int | None = None
#: obstore retries 5xx, dropped connections and timeouts (10 times within 3 minutes by default); a few times
#: within 30 s, as the direct S3 puts do, before the read goes to fsspec (and its error to the user).
RETRY: Any = {"max_retries": 4, "retry_timeout": timedelta(seconds=30)}
_FORKED = "a process forked after obstore was used (its runtime does not survive a fork)"
#: ``(kind, bucket)`` whose reads a filesystem of this process moved to fsspec (warned once per process)
_SWITCHED: set[tuple[str, str]] = set()
_SWITCHED_LOCK = threading.Lock()


class ObstoreReads:
    """GETs of paths of one fsspec filesystem, through obstore stores made from its configuration.

    ``split(path)`` turns a filesystem path into ``(store key, key inside it)``; ``await make(store key)``
    builds ``(obstore store, credentials to refresh or None)``, one per HTTP origin or S3 bucket, kept. Used on
    fsspec's event loop only."""

    def __init__(
        self, kind: str, make: Any, split: Any, suffix_ranges: bool = True, verify: Any = None, apis: str = ""
    ) -> None:
        self.kind = kind
        #: False: the service has no ``bytes=-n`` ranges (Azure): such reads are left to fsspec
        self.suffix_ranges = suffix_ranges
        self._make = make
        self._split = split
        #: ``await verify(path)``: does the write transport (the filesystem) see ``path``? Asked when obstore
        #: reports a key absent on a store not yet seen to serve anything (see :meth:`_absent`); None: never.
        self._verify = verify
        self._apis = apis  # what each transport speaks, for the warning
        self._seen: set[str] = set()  # stores obstore has read a value from: their "absent" is trusted
        self._stores: dict[str, Any] = {}
        self._off: dict[str, Exception] = {}  # stores whose reads failed in obstore: fsspec sends them

    async def _store(self, name: str) -> Any:
        made = self._stores.get(name)
        if made is None:
            made = self._stores.setdefault(name, await self._make(name))
        store, credentials = made
        if credentials is not None:
            await credentials.refresh()
        return store

    def get(
        self, path: str, start: int | None = None, end: int | None = None, raw: bool = False
    ) -> Coroutine[Any, Any, Any]:
        """A coroutine reading ``path[start:end]`` (``None`` bounds: from the start / to the end; a negative
        ``start`` without ``end``: the last ``-start`` bytes): the bytes, None if missing, or the exception.
        ``raw``: obstore's own buffer (``obstore.Bytes``, the buffer protocol) instead of a copy into ``bytes``."""
        return self._get(path, start, end, raw)

    async def _get(self, path: str, start: int | None, end: int | None, raw: bool = False) -> Any:
        import obstore
        from obstore.exceptions import NotFoundError

        name, key = self._split(path)
        if name in self._off:
            return self._off[name]
        try:
            store = await self._store(name)
            options: dict[str, Any] = {}
            if start is not None and start < 0 and end is None:
                options["range"] = {"suffix": -start}
            elif end is not None:
                options["range"] = (start or 0, end)
            elif start:
                options["range"] = {"offset": start}
            result = await obstore.get_async(store, key, options=options or None)  # type: ignore[arg-type]
            body = await result.bytes_async()
            self._seen.add(name)
            return body if raw else bytes(body)
        except (NotFoundError, FileNotFoundError):  # obstore raises the builtin for a 404
            return None if self._verify is None or name in self._seen else await self._absent(name, path)
        except Exception as exc:  # noqa: BLE001 - returned for the store to send through fsspec, as on_error="return" does
            if not _range_error(exc):  # obstore retried what is transient: what is left would fail again
                log.debug("obstore reads of %s off after %s: %s", name, type(exc).__name__, exc)
                self._off[name] = exc
            return exc

    async def _absent(self, name: str, path: str) -> Exception | None:
        """obstore reads ``path`` as absent on a store it has served nothing from yet: None (absent) unless the
        write transport sees it. Then obstore cannot see what the filesystem writes (fake-gcs-server without
        ``-public-host`` answers every XML API read with 404): the store's reads go through fsspec from now on,
        with one warning naming the knob, and this read is returned as failed, for fsspec to send."""
        try:
            seen = await self._verify(path)
        except Exception as exc:  # noqa: BLE001 - no answer: obstore's "absent" stands, as without the check
            log.debug("could not check %s through the write transport: %s: %s", path, type(exc).__name__, exc)
            return None
        if not seen:
            return None
        if name not in self._off:
            self._off[name] = UnsupportedFeatureError(f"obstore reads {path!r} as missing, the filesystem does not")
            with _SWITCHED_LOCK:  # not _LOCK: its holder may be waiting for this loop (obstore_reads -> _make)
                first = (self.kind, name) not in _SWITCHED
                _SWITCHED.add((self.kind, name))
            knob = config.KNOBS["remote_transport"]
            (log.warning if first else log.debug)(
                "%s reads through obstore do not see %r, which the filesystem that writes (fsspec) sees%s: the "
                "endpoint serves the two differently (fake-gcs-server started without -public-host does so). Reads "
                "of %r go through fsspec from now on. Set the remote_transport knob to 'fsspec' (%s=fsspec, or "
                "dask.config.set({%r: 'fsspec'})) to read through fsspec from the start, without this check "
                "(docs/tuning.md)",
                self.kind.upper(), path, f" ({self._apis})" if self._apis else "", name, knob.env, knob.key,
            )  # fmt: skip
        return self._off[name]


def _range_error(exc: Exception) -> bool:
    """An out-of-bounds range (``416``): a property of the request, not of the store."""
    return "416" in str(exc) or "Range" in type(exc).__name__


def obstore_reads(fs: Any) -> ObstoreReads | None:
    """The :class:`ObstoreReads` of ``fs`` (made once and kept on it), or None where reads stay on fsspec: the
    ``remote_transport`` knob says ``fsspec`` (or ``auto`` on a kind of ``_AUTO``), obstore is not installed, or ``fs`` is a filesystem whose
    requests obstore cannot reproduce (see the module notes; a debug message says why). Raises
    :class:`~zarr_dask.errors.UnsupportedFeatureError` for such a filesystem when the knob says ``obstore``."""
    choice = config.get("remote_transport")
    if choice == "fsspec":
        return None
    with _LOCK:
        cached = fs.__dict__.get(_ATTRIBUTE, False) if hasattr(fs, "__dict__") else False
        if cached is False:
            cached = _make(fs)
            if hasattr(fs, "__dict__"):
                fs.__dict__[_ATTRIBUTE] = cached
    if isinstance(cached, ObstoreReads) and cached.kind in _AUTO and choice == "auto":
        return None
    if isinstance(cached, ObstoreReads) and _FIRST_USE_PID in (None, os.getpid()):
        return cached
    if isinstance(cached, ObstoreReads):
        cached = _FORKED
    if choice == "obstore" and _kind(fs):
        raise UnsupportedFeatureError(
            f"remote_transport='obstore' cannot read through {type(fs).__name__}: {cached}; set the "
            "remote_transport knob (zarr_dask.config) to 'auto' to read through fsspec here",
            store=_kind(fs) + "://",
        )
    return None


def _first_use() -> None:
    global _FIRST_USE_PID
    _FIRST_USE_PID = _FIRST_USE_PID or os.getpid()


def _kind(fs: Any) -> str:
    """``"http"``, ``"s3"``, ``"gcs"`` or ``"azure"`` for the filesystems this module can map, else ``""``."""
    name, module = type(fs).__name__, type(fs).__module__ or ""
    if name == "HTTPFileSystem" and module.startswith("fsspec.implementations.http"):
        return "http"
    if name == "S3FileSystem" and module.startswith("s3fs"):
        return "s3"
    if name in ("GCSFileSystem", "ExtendedGcsFileSystem") and module.startswith("gcsfs"):
        return "gcs"
    if name == "AzureBlobFileSystem" and module.startswith("adlfs"):
        return "azure"
    return ""


def _make(fs: Any) -> ObstoreReads | str:
    """The reads of ``fs``, or why not (logged at debug level)."""
    kind = _kind(fs)
    why = "" if kind else "not an HTTP(S), s3fs, gcsfs or adlfs filesystem"
    if not why:
        try:
            import obstore
        except ImportError:
            why = "obstore is not installed (pip install 'zarr-dask[obstore]')"
        else:
            if tuple(int(p) for p in obstore.__version__.split(".")[:2] if p.isdigit()) < (0, 12):
                why = f"obstore {obstore.__version__} is older than 0.12 (the version measured and tested)"
    if not why and any(os.environ.get(name) for name in _PROXY_ENV):
        why = "a proxy is configured in the environment"
    if not why and _FIRST_USE_PID not in (None, os.getpid()):
        why = _FORKED
    if not why and getattr(fs, "asynchronous", False):
        why = "an asynchronous filesystem (its loop belongs to the caller)"
    made: ObstoreReads | str = why
    if not why:
        from zarr_dask.store import obstore_clouds

        maps = {"http": _http, "s3": _s3, "gcs": obstore_clouds.gcs_reads, "azure": obstore_clouds.azure_reads}
        made = maps[kind](fs)
    if isinstance(made, str):
        log.debug("reads of %r stay on fsspec: %s", fs, made)
    else:
        _first_use()
        log.debug("reads of %r go through obstore", fs)
    return made


def _http(fs: Any) -> ObstoreReads | str:
    """HTTP(S): one ``HTTPStore`` per origin; fsspec's paths are the URLs."""
    if getattr(fs, "client_kwargs", None):
        return "client_kwargs are set (an aiohttp session's arguments)"
    kwargs = dict(getattr(fs, "kwargs", None) or {})
    headers = kwargs.pop("headers", None) or {}
    if kwargs:
        return f"request arguments other than headers are set: {sorted(kwargs)}"
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        return "headers are not a dict of strings"

    async def make(origin: str) -> Any:
        from obstore.store import HTTPStore

        options: dict[str, Any] = {"allow_http": origin.startswith("http:")}
        if headers:
            options["default_headers"] = headers
        return HTTPStore.from_url(origin, client_options=options, retry_config=RETRY), None  # type: ignore[arg-type]

    def split(path: str) -> tuple[str, str]:
        parts = urlsplit(path)
        key = parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
        return f"{parts.scheme}://{parts.netloc}", key

    return ObstoreReads("http", make, split)


def _s3(fs: Any) -> ObstoreReads | str:
    """S3: one ``S3Store`` per bucket, on the endpoint, region and credentials of s3fs's botocore client."""
    if getattr(fs, "s3_additional_kwargs", None) or getattr(fs, "req_kw", None):
        return "s3_additional_kwargs or requester_pays are set"
    try:
        client = fs.s3  # s3fs connects on first use
    except Exception as exc:  # noqa: BLE001 - reported as the reason obstore is not used
        return f"cannot connect: {type(exc).__name__}: {exc}"
    cfg = client.meta.config
    if getattr(cfg, "proxies", None) or getattr(cfg, "client_cert", None):
        return "proxies or a client certificate are configured"
    anon = bool(getattr(fs, "anon", False))
    if not anon and getattr(cfg, "signature_version", None) not in (None, "s3v4", "v4"):
        return f"signature version {cfg.signature_version!r}"
    verify = (fs.client_kwargs or {}).get("verify")
    if verify is not None and verify is not True:
        return "TLS verification is off or uses a custom CA bundle"
    if not anon and client._request_signer._credentials is None:
        return "no credentials (botocore found none)"
    style = ((getattr(cfg, "s3", None) or {}).get("addressing_style")) or "auto"

    async def make(bucket: str) -> Any:
        from obstore.store import S3Store

        await fs.set_session()
        bucket_client = await fs.get_s3(bucket)  # s3fs's client for the bucket's region
        endpoint = str(bucket_client.meta.endpoint_url or "")
        conf: dict[str, Any] = {"region": str(bucket_client.meta.region_name or "us-east-1")}
        if not endpoint.endswith(".amazonaws.com"):
            conf["endpoint"] = endpoint
            conf["virtual_hosted_style_request"] = style == "virtual"
        else:
            conf["virtual_hosted_style_request"] = style != "path"
        client_options = {"allow_http": endpoint.startswith("http:")}
        if anon:
            conf["skip_signature"] = True
            return S3Store(bucket, config=conf, client_options=client_options, retry_config=RETRY), None  # type: ignore[arg-type]
        credentials = _Credentials(bucket_client._request_signer._credentials)
        await credentials.refresh()
        provider: Any = credentials
        store = S3Store(bucket, config=conf, client_options=client_options, retry_config=RETRY,  # type: ignore[arg-type]
                        credential_provider=provider)  # fmt: skip
        return store, credentials

    def split(path: str) -> tuple[str, str]:
        bucket, _, key = path.partition("/")
        return bucket, key

    return ObstoreReads("s3", make, split)


class _Credentials:
    """obstore's credential provider for one bucket: botocore's credentials, frozen on fsspec's loop when a
    read finds them older than a minute (refreshable credentials refresh there, as botocore's do), and handed to
    obstore from that copy (obstore may call providers from any thread)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.frozen: Any = None
        self.at = 0.0

    async def refresh(self) -> None:
        if self.frozen is None or time.monotonic() - self.at > 60:
            self.frozen = await self.source.get_frozen_credentials()
            self.at = time.monotonic()

    def __call__(self) -> dict[str, Any]:
        frozen = self.frozen
        expires = datetime.now(UTC) + timedelta(seconds=60)
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "token": frozen.token,
                "expires_at": expires}  # fmt: skip


def read_through_obstore(
    fs: Any, url: str, reads: list[tuple[str, int | None, int | None]], ranges: bool = False, raw: bool = False
) -> dict[tuple[Any, ...], Any]:
    """``{(path, start, end): bytes or None (missing)}`` for the reads of ``fs`` that obstore made (none where
    its reads stay on fsspec); a read that failed in obstore is left out, for fsspec to send (so every error a
    user sees is fsspec's own). ``ranges``: the reads of a ``get_ranges`` call (see ``_AUTO_RANGES_ONLY``);
    ``raw``: values may be obstore's buffers (for decoders), not ``bytes``. Runs on fsspec's loop under the
    process's request budget."""
    transport = obstore_reads(fs) if fs.async_impl else None
    if transport is None:
        return {}
    if transport.kind in _AUTO_RANGES_ONLY and not ranges and config.get("remote_transport") == "auto":
        reads = [read for read in reads if read[1] is not None or read[2] is not None]
        if not reads:
            return {}
    from fsspec.asyn import get_loop, sync

    from zarr_dask.store import requests

    if not transport.suffix_ranges:
        reads = [read for read in reads if not (read[1] is not None and read[1] < 0 and read[2] is None)]
        if not reads:
            return {}
    with requests.slots(len(reads)) as n:
        values = sync(get_loop(), requests.gather, [transport.get(*read, raw=raw) for read in reads], n)
    out = {read: value for read, value in zip(reads, values, strict=True) if not isinstance(value, BaseException)}
    if len(out) < len(reads):
        failed = len(reads) - len(out)
        log.debug("%d of %d obstore reads of %s failed; sending them through fsspec", failed, len(reads), url)
    return out
