"""Remote stores: zarr_dask vs tensorstore vs dask + zarr-python vs a bare floor, over HTTP and S3 with latency.

Every request pays ``ZD_BENCH_LATENCY`` seconds (default 0.02, a cloud object-store round trip), so what is
measured is how well each contender overlaps its requests (and its decoding with them).

Data: a ``ZD_BENCH_MIB`` MiB (default 256) float32 array of 2048 columns, smooth field + noise (compresses,
not trivially), zstd level 0; 1 MiB chunks (512 x 512); shards of 16 MiB (2048 x 2048) of 1 MiB inner chunks.

Workloads:

* ``read http chunks``: the array in 1 MiB chunks, read whole over HTTP from an object server in this
  benchmark (a threaded HTTP/1.1 server on 127.0.0.1, in its own process, serving a directory with GET,
  ``Range: bytes=a-b`` / ``bytes=-n`` and HEAD, adding the latency to every request and counting requests and
  the most in flight at once).
* ``read http shards``: the same data in 16 MiB shards of 1 MiB inner chunks; dask chunks = the shard.
* ``write latency chunks`` / ``write latency shards``: a dask array (from numpy, blocks = the storage chunk or
  shard) written to the latency filesystem (``latency::memory://``, :mod:`zarr_dask.testing.latency`).
* ``write s3 chunks`` / ``write s3 shards``: the same written to a moto S3 server (its own process; its
  conditional put/delete made atomic as in tests/conftest.py) that adds the latency to every request and keeps
  HTTP/1.1 connections alive, as S3 does (moto's own server closes each after one request).

Contenders:

* ``zarr_dask``: ``zarr_dask.from_zarr(url).compute()`` (default chunks: storage units merged up to dask's
  ``array.chunk-size``), and ``zarr_dask chunks=unit`` (``chunks=`` the chunk or shard); writes:
  ``zarr_dask.to_zarr(x, url, storage_options=..., chunks=..., shards=..., compressors=...)``.
* ``dask+zarr-python``: ``dask.array.from_zarr(zarr.open_array(FsspecStore))`` / ``dask.array.to_zarr`` into a
  zarr-python array on ``FsspecStore`` (fsspec http, the same async latency filesystem, s3fs).
* ``tensorstore``: a zarr3 TensorStore on its ``http`` (reads) or ``s3`` (writes; ``endpoint`` = the moto
  server, credentials from the environment) kvstore. It cannot use fsspec, so it has no latency-store cells.
* ``floor``: reads: aiohttp GETs of every chunk at once (on 64 connections; shards: every shard index at once,
  then every inner range at once), each decoded with numcodecs zstd in a 2-thread pool into the result as it
  arrives;
  ``floor whole shards``: one GET per whole shard (all a full read needs), inner chunks decoded the same way;
  writes: encode in 2 threads (shards assembled with index + crc32c) and put every key at once (a reference
  column; the write target compares with the peers).

dask's threaded scheduler with 2 workers; tensorstore with 2 copy threads. Medians of ``ZD_BENCH_REPEAT``
rounds (default 3) after a warm-up, which is the run checked (reads: against the data; writes: read back),
contenders interleaved (``race``). Requests and the most in flight are counted by the servers (HTTP, S3) or
the latency filesystem, in the checked run. Targets: reads, ``zarr_dask`` <= 1.2x the best of tensorstore and
the floors; writes, ``zarr_dask`` <= 1.2x the best peer (tensorstore, dask+zarr-python). A contender that
cannot do a workload is reported with the reason and skipped.

    python benchmarks/bench_remote.py                          # 256 MiB, 3 rounds (~10 minutes)
    ZD_BENCH_MIB=32 ZD_BENCH_REPEAT=1 python benchmarks/bench_remote.py   # a quick smoke run (< 1 minute)
    ZD_BENCH_ONLY=read,write-s3 python benchmarks/bench_remote.py         # some sections: read, write-latency, write-s3
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import logging
import multiprocessing
import os
import statistics
import struct
import sys
import threading
import time
import traceback
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import crc32c
import dask
import dask.array as da
import fsspec
import numcodecs
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import Table, make_moto_writes_atomic, race, scratch, smooth_field  # noqa: E402

import zarr_dask  # noqa: E402
from zarr_dask.testing.latency import LatencyFileSystem  # noqa: E402

MIB = float(os.environ.get("ZD_BENCH_MIB", "256"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
LATENCY = float(os.environ.get("ZD_BENCH_LATENCY", "0.02"))
ONLY = {w for w in os.environ.get("ZD_BENCH_ONLY", "").split(",") if w}
THREADS = 2
COLS, CHUNK, SHARD = 2048, 512, 2048
ZSTD0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
OURS, OURS_UNIT, PEER, TS, FLOOR = "zarr_dask", "zarr_dask chunks=unit", "dask+zarr-python", "tensorstore", "floor"
OURS_FSSPEC = "zarr_dask fsspec"  # reads: ours with remote_transport=fsspec (OURS takes the default, obstore)
FLOOR_WHOLE = "floor whole shards"  # shards only: one GET per shard (a whole read needs every byte of it)
STATS = "/_zd_stats"  # control paths of the servers: not delayed, not counted
BUCKET = "zd-bench"

try:
    import tensorstore as ts
except ImportError:  # a benchmark-only dependency
    ts = None


def _version(package: str) -> str:
    try:
        return version(package)
    except Exception:
        return "not installed"


def make_data() -> np.ndarray:
    rows = max(SHARD, -(-int(MIB * 2**20 / 4 / COLS) // SHARD) * SHARD)
    return smooth_field(rows, COLS, y_extent=40)


# ------------------------------------------------------------------------------------- servers (children)
class _Gauge:
    """Requests served and the most in flight at once (reset through the control path)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = self.in_flight = self.max_in_flight = 0
        self.cpu = time.process_time()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1

    def take(self) -> bytes:
        with self.lock:
            now = time.process_time()
            cpu_ms = round(1000 * (now - self.cpu))  # the server's CPU time since the last take
            out = {"requests": self.requests, "max_in_flight": self.max_in_flight, "cpu_ms": cpu_ms}
            self.requests = self.max_in_flight = 0
            self.cpu = now
        return json.dumps(out).encode()


def _serve_http(root: str, latency: float, port_out: Any) -> None:
    """Child process: the HTTP object server of :func:`http_server`, until terminated."""
    server = http_server(root, latency)
    port_out.put(server.server_address[1])
    server.serve_forever()


def http_server(root: str, latency: float) -> ThreadingHTTPServer:
    """A threaded HTTP/1.1 object server on ``root`` (GET with ranges, HEAD) on 127.0.0.1, an ephemeral port,
    delaying every request by ``latency``; ``GET /_zd_stats`` returns (and resets) the requests served and the
    most in flight at once."""
    gauge = _Gauge()
    base = Path(root).resolve()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # (see wsgi_server)

        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes, total: int | None = None, span: tuple[int, int] | None = None,
                   head: bool = False) -> None:  # fmt: skip
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Accept-Ranges", "bytes")
            if span is not None:
                self.send_header("Content-Range", f"bytes {span[0]}-{span[1]}/{total}")
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _handle(self, head: bool) -> None:
            if self.path == STATS:
                self._reply(200, gauge.take())
                return
            with gauge.request():
                time.sleep(latency)
                path = (base / self.path.split("?", 1)[0].lstrip("/")).resolve()
                if base not in path.parents or not path.is_file():
                    self._reply(404, b"")
                    return
                data = path.read_bytes()
                rng = self.headers.get("Range")
                if not rng:
                    self._reply(200, data, head=head)
                    return
                first, _, last = rng.removeprefix("bytes=").partition("-")
                size = len(data)
                if not first:  # suffix range: the last n bytes
                    start, stop = max(0, size - int(last)), size
                else:
                    start, stop = int(first), min(size, int(last) + 1) if last else size
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._reply(206, data[start:stop], total=size, span=(start, stop - 1), head=head)

        def do_GET(self) -> None:  # noqa: N802
            self._handle(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._handle(head=True)

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@contextlib.contextmanager
def served_in_thread(root: str, latency: float) -> Iterator[str]:
    """:func:`http_server` in a thread of this process (for the tests; the benchmark runs it in a process);
    yields its endpoint URL, and stops it at the end."""
    server = http_server(root, latency)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _serve_s3(latency: float, port_out: Any) -> None:
    """Child process: moto's S3 server (conditional put/delete atomic, as S3's are) behind a delaying gate, on
    HTTP/1.1 connections kept alive as S3 keeps them (moto's own werkzeug server closes every connection after
    one request, so each client would pay a TCP connect per request that it does not pay against S3)."""
    from moto.server import DomainDispatcherApplication, create_backend_app

    make_moto_writes_atomic()
    moto_app = DomainDispatcherApplication(create_backend_app)
    gauge = _Gauge()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == STATS:
            body = gauge.take()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        if path.startswith("/moto-api"):
            return moto_app(environ, start_response)
        with gauge.request():
            time.sleep(latency)
            return list(moto_app(environ, start_response))

    server = wsgi_server(app)
    port_out.put(server.server_address[1])
    server.serve_forever()


def wsgi_server(app: Callable[..., Any]) -> ThreadingHTTPServer:
    """A threaded HTTP/1.1 server of the WSGI ``app`` on 127.0.0.1 (an ephemeral port) that keeps connections
    alive: request bodies by ``Content-Length`` or chunked, every response sent with its length."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out as two sends: with Nagle's algorithm a small body would wait for the client's
        # delayed ACK of the headers (40 ms) on a kept-alive connection
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(parts)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _wsgi(self) -> None:
            body = self._body()
            path, _, query = self.path.partition("?")
            environ = {
                "REQUEST_METHOD": self.command, "SCRIPT_NAME": "", "QUERY_STRING": query,
                "PATH_INFO": unquote_to_bytes(path).decode("latin-1"), "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": str(self.server.server_address[1]), "SERVER_PROTOCOL": self.request_version,
                "REMOTE_ADDR": self.client_address[0], "CONTENT_LENGTH": str(len(body)),
                "CONTENT_TYPE": self.headers.get("Content-Type", ""), "wsgi.version": (1, 0),
                "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
                "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
            }  # fmt: skip
            for name, value in self.headers.items():
                key = "HTTP_" + name.upper().replace("-", "_")
                if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH", "HTTP_TRANSFER_ENCODING"):
                    environ[key] = f"{environ[key]},{value}" if key in environ else value
            reply: list[Any] = []

            def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
                reply[:] = [status, headers]

            result = app(environ, start_response)
            try:
                out = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
            status, headers = reply
            code, _, message = status.partition(" ")
            self.send_response(int(code), message)
            for name, value in headers:
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(out)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _wsgi  # noqa: N815

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@contextlib.contextmanager
def child_server(target: Callable[..., None], *args: Any) -> Iterator[str]:
    """Run a server in its own process (it must not compete with the contenders for this one's GIL)."""
    ctx = multiprocessing.get_context("spawn")
    port_out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, port_out), daemon=True)
    proc.start()
    try:
        port = port_out.get(timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.join(10)


def take_stats(endpoint: str) -> dict[str, int]:
    with urllib.request.urlopen(endpoint + STATS) as r:
        return dict(json.loads(r.read()))


# ------------------------------------------------------------------------------------------- the floors
def floor_decode_into(out: np.ndarray, row: int, col: int, buf: Any) -> None:
    tmp = np.empty((CHUNK, CHUNK), dtype="f4")
    numcodecs.Zstd().decode(buf, out=tmp)
    out[row : row + CHUNK, col : col + CHUNK] = tmp


def floor_read(base: str, shape: tuple[int, int], sharded: bool, whole_shards: bool = False) -> np.ndarray:
    import aiohttp

    out = np.empty(shape, dtype="f4")
    pool = ThreadPoolExecutor(THREADS)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        decodes: list[asyncio.Future[None]] = []
        conn = aiohttp.TCPConnector(limit=64)  # more only crowds the server
        async with aiohttp.ClientSession(connector=conn) as session:

            async def get(key: str, rng: str | None = None) -> bytes:
                headers = {"Range": rng} if rng else {}
                async with session.get(f"{base}/{key}", headers=headers) as r:
                    r.raise_for_status()
                    return await r.read()

            if not sharded:

                async def chunk(i: int, j: int) -> None:
                    buf = await get(f"c/{i}/{j}")
                    decodes.append(loop.run_in_executor(pool, floor_decode_into, out, i * CHUNK, j * CHUNK, buf))

                await asyncio.gather(*(chunk(i, j) for i in range(shape[0] // CHUNK) for j in range(shape[1] // CHUNK)))
            else:
                n = SHARD // CHUNK
                shards = [(i, j) for i in range(shape[0] // SHARD) for j in range(shape[1] // SHARD)]
                index_bytes = 16 * n * n + 4
                if whole_shards:

                    async def shard(i: int, j: int) -> None:
                        buf = memoryview(await get(f"c/{i}/{j}"))
                        index = np.frombuffer(buf[len(buf) - index_bytes :], dtype="<u8", count=2 * n * n)
                        for a in range(n):
                            for b in range(n):
                                off, nbytes = (int(v) for v in index.reshape(n, n, 2)[a, b])
                                row, col = i * SHARD + a * CHUNK, j * SHARD + b * CHUNK
                                part = buf[off : off + nbytes]
                                decodes.append(loop.run_in_executor(pool, floor_decode_into, out, row, col, part))

                    await asyncio.gather(*(shard(i, j) for i, j in shards))
                    await asyncio.gather(*decodes)
                    return
                indexes = await asyncio.gather(*(get(f"c/{i}/{j}", f"bytes=-{index_bytes}") for i, j in shards))

                async def inner(i: int, j: int, a: int, b: int, off: int, nbytes: int) -> None:
                    buf = await get(f"c/{i}/{j}", f"bytes={off}-{off + nbytes - 1}")
                    row, col = i * SHARD + a * CHUNK, j * SHARD + b * CHUNK
                    decodes.append(loop.run_in_executor(pool, floor_decode_into, out, row, col, buf))

                jobs = []
                for (i, j), raw in zip(shards, indexes):
                    index = np.frombuffer(raw, dtype="<u8", count=2 * n * n).reshape(n, n, 2)
                    jobs += [inner(i, j, a, b, int(index[a, b, 0]), int(index[a, b, 1])) for a in range(n) for b in range(n)]
                await asyncio.gather(*jobs)
            await asyncio.gather(*decodes)

    try:
        asyncio.run(run())
    finally:
        pool.shutdown()
    return out


def encode_keys(data: np.ndarray, sharded: bool) -> dict[str, bytes]:
    """Every storage key of ``data`` encoded (2 threads): chunks, or shards with their index + crc32c."""
    codec = numcodecs.Zstd(level=0)
    unit = SHARD if sharded else CHUNK
    n = SHARD // CHUNK

    def one(ij: tuple[int, int]) -> tuple[str, bytes]:
        i, j = ij
        block = data[i * unit : (i + 1) * unit, j * unit : (j + 1) * unit]
        if not sharded:
            return f"c/{i}/{j}", codec.encode(np.ascontiguousarray(block))
        parts, index, offset = [], [], 0
        for a in range(n):
            for b in range(n):
                enc = codec.encode(np.ascontiguousarray(block[a * CHUNK : (a + 1) * CHUNK, b * CHUNK : (b + 1) * CHUNK]))
                parts.append(enc)
                index += [offset, len(enc)]
                offset += len(enc)
        idx = struct.pack(f"<{len(index)}Q", *index)
        return f"c/{i}/{j}", b"".join([*parts, idx, struct.pack("<I", crc32c.crc32c(idx))])

    grid = [(i, j) for i in range(data.shape[0] // unit) for j in range(data.shape[1] // unit)]
    with ThreadPoolExecutor(THREADS) as ex:
        return dict(ex.map(one, grid))


def zarr_json(shape: tuple[int, ...], sharded: bool) -> bytes:
    base = [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD0]
    codecs: list[dict[str, Any]] = base
    if sharded:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [CHUNK, CHUNK], "codecs": base, "index_location": "end",
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]
    unit = SHARD if sharded else CHUNK
    return json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "float32", "fill_value": 0.0,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [unit, unit]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "codecs": codecs, "attributes": {}}).encode()  # fmt: skip


def floor_write(fs: Any, root: str, data: np.ndarray, sharded: bool) -> None:
    """Encode every key (2 threads), then put them and the metadata document all at once."""
    values = {f"{root}/{k}": v for k, v in encode_keys(data, sharded).items()}
    values[f"{root}/zarr.json"] = zarr_json(data.shape, sharded)
    fs.pipe(values)


# ----------------------------------------------------------------------------------------- tensorstore
def ts_context() -> dict[str, Any]:
    return {"data_copy_concurrency": {"limit": THREADS}, "cache_pool": {"total_bytes_limit": 0}}


def ts_codecs(sharded: bool) -> list[dict[str, Any]]:
    return list(json.loads(zarr_json((1, 1), sharded))["codecs"])


# ----------------------------------------------------------------------------------------------- reads
def check(name: str, got: Any, want: np.ndarray) -> None:
    if not np.array_equal(np.asarray(got), want):
        raise AssertionError(f"{name} returned wrong data")


def read_workload(table: Table, label: str, root: Path, endpoint: str, data: np.ndarray, sharded: bool,
                  skipped: dict[tuple[str, str], str]) -> None:  # fmt: skip
    import zarr
    from zarr.storage import FsspecStore

    name = "shards.zarr" if sharded else "chunks.zarr"
    extra = {"shards": (SHARD, SHARD)} if sharded else {}
    local = zarr_dask.create_array(str(root / name), shape=data.shape, dtype="f4", chunks=(CHUNK, CHUNK),
                                   compressors=ZSTD0, **extra)  # fmt: skip
    local[:] = data
    url = f"{endpoint}/{name}"
    unit = (SHARD, SHARD) if sharded else (CHUNK, CHUNK)

    def peer() -> Any:
        store = FsspecStore.from_url(url, read_only=True)
        return da.from_zarr(zarr.open_array(store, mode="r")).compute()

    def ours_fsspec() -> Any:
        with dask.config.set({"zarr_dask.remote-transport": "fsspec"}):
            return zarr_dask.from_zarr(url).compute()

    contenders: dict[str, Callable[[], Any]] = {
        OURS: lambda: zarr_dask.from_zarr(url).compute(),
        OURS_FSSPEC: ours_fsspec,
        OURS_UNIT: lambda: zarr_dask.from_zarr(url, chunks=unit).compute(),
        PEER: peer,
        FLOOR: lambda: floor_read(url, data.shape, sharded),
    }
    if sharded:
        contenders[FLOOR_WHOLE] = lambda: floor_read(url, data.shape, sharded, whole_shards=True)
    if ts is None:
        skipped[(label, TS)] = "tensorstore not installed"
    else:
        spec = {"driver": "zarr3", "kvstore": {"driver": "http", "base_url": url}, "context": ts_context()}
        contenders[TS] = lambda: ts.open(spec, read=True).result().read().result()
    runnable: dict[str, Callable[[], Any]] = {}
    stats: dict[str, dict[str, int]] = {}
    for cname, func in contenders.items():
        try:
            take_stats(endpoint)
            check(f"{label}/{cname}", func(), data)
            stats[cname] = take_stats(endpoint)
            runnable[cname] = func
        except Exception as e:  # a peer that cannot do this workload: reported, skipped
            skipped[(label, cname)] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"  {label}: {cname} skipped: {skipped[(label, cname)]}", flush=True)
    times = race(runnable, repeat=REPEAT, warmup=False)  # the checks were the warm-up
    for cname, t in times.items():
        s = stats[cname]
        table.add(label, cname, t, f"{s['requests']} requests, max {s['max_in_flight']} in flight")


def transport_workload(table: Table, root: Path, endpoint: str) -> None:
    """The transport alone: ``FsspecStore.get_many`` of every stored key (no decoding), obstore vs fsspec,
    in ``max(REPEAT, 5)`` interleaved rounds."""
    from zarr_dask.store import FsspecStore

    def get_all(name: str, keys: list[str], transport: str) -> None:
        with dask.config.set({"zarr_dask.remote-transport": transport}):
            if len(FsspecStore.from_url(f"{endpoint}/{name}").get_many(keys)) != len(keys):
                raise AssertionError(f"{name}: {transport} missed keys")

    for name in ("chunks.zarr", "shards.zarr"):
        keys = sorted(str(p.relative_to(root / name)) for p in (root / name).rglob("*") if p.is_file()
                      and p.name != "zarr.json")  # fmt: skip
        label = f"transport http {name.split('.')[0]} (GETs only)"
        runs = {OURS: functools.partial(get_all, name, keys, "obstore"), OURS_FSSPEC: functools.partial(get_all, name, keys, "fsspec")}
        counts = {}
        for cname, func in runs.items():  # the warm-up, counted
            take_stats(endpoint)
            func()
            counts[cname] = take_stats(endpoint)
        for cname, t in race(runs, repeat=max(REPEAT, 5), warmup=False).items():
            c = counts[cname]
            table.add(label, cname, t, f"{c['requests']} requests, max {c['max_in_flight']} in flight")


# ---------------------------------------------------------------------------------------------- writes
class CountingLatencyFS(LatencyFileSystem):
    """The latency filesystem, counting requests and the most in flight (class-wide, any thread)."""

    lock = threading.Lock()
    requests = in_flight = max_in_flight = 0

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        with cls.lock:
            cls.requests += 1
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        try:
            return await super()._call(name, *args, **kwargs)
        finally:
            with cls.lock:
                cls.in_flight -= 1

    @classmethod
    def take(cls) -> dict[str, int]:
        with cls.lock:
            out = {"requests": cls.requests, "max_in_flight": cls.max_in_flight}
            cls.requests = cls.max_in_flight = 0
        return out


fsspec.register_implementation("latency", CountingLatencyFS, clobber=True)


def write_contenders(data: np.ndarray, sharded: bool, target: str, s3: str | None) -> tuple[
        dict[str, Callable[[], Any]], Callable[[str], Any], Callable[[str], Any], Callable[[], dict[str, int]]]:  # fmt: skip
    """(contenders, setup(name), read-back(name), take_stats()) for writes to ``target`` ("latency"/"s3")."""
    import zarr
    from zarr.storage import FsspecStore

    unit = SHARD if sharded else CHUNK
    x = da.from_array(data, chunks=(unit, unit))
    extra = {"shards": (SHARD, SHARD)} if sharded else {}
    tag = uuid.uuid4().hex[:8]
    paths = {n: f"{BUCKET}/{tag}-{n.replace('+', '_')}.zarr" for n in (OURS, PEER, TS, FLOOR)}
    if target == "latency":
        def options() -> dict[str, Any]:
            return {"latency": {"seconds": LATENCY}}

        def fs_of(asynchronous: bool = False, floor: bool = False) -> Any:
            return CountingLatencyFS(fsspec.filesystem("memory"), seconds=LATENCY, asynchronous=asynchronous)

        def url(n: str) -> str:
            return f"latency::memory://{paths[n]}"

        memory = fsspec.filesystem("memory")

        def setup(n: str) -> None:
            if memory.exists(paths[n]):
                memory.rm(paths[n], recursive=True)

        stats = CountingLatencyFS.take
    else:
        assert s3 is not None

        def options() -> dict[str, Any]:
            return {"key": "bench", "secret": "bench", "use_listings_cache": False,
                    "client_kwargs": {"endpoint_url": s3, "region_name": "us-east-1"}}  # fmt: skip

        def fs_of(asynchronous: bool = False, floor: bool = False) -> Any:
            import s3fs

            more = {"config_kwargs": {"max_pool_connections": 256}} if floor else {}  # botocore's default: 10
            return s3fs.S3FileSystem(asynchronous=asynchronous, skip_instance_cache=True, **options(), **more)

        def url(n: str) -> str:
            return f"s3://{paths[n]}"

        def setup(n: str) -> None:  # a fresh server state: every earlier output gone (untimed, not counted)
            req = urllib.request.Request(s3 + "/moto-api/reset", method="POST")
            urllib.request.urlopen(req).read()
            urllib.request.urlopen(urllib.request.Request(f"{s3}/{BUCKET}", method="PUT")).read()
            take_stats(s3)

        def stats() -> dict[str, int]:
            return take_stats(s3)

    def ours() -> None:
        zarr_dask.to_zarr(x, url(OURS), storage_options=options(), chunks=(CHUNK, CHUNK), compressors=ZSTD0, **extra)

    def peer() -> None:
        store = FsspecStore(fs_of(asynchronous=True), path=paths[PEER])
        z = zarr.create_array(store, shape=data.shape, dtype="f4", chunks=(CHUNK, CHUNK),
                              compressors=zarr.codecs.ZstdCodec(level=0), fill_value=0.0, **extra)  # fmt: skip
        da.to_zarr(x, z)

    contenders: dict[str, Callable[[], Any]] = {OURS: ours, PEER: peer}
    if target == "s3" and ts is not None:
        kv = {"driver": "s3", "bucket": BUCKET, "path": paths[TS].split("/", 1)[1] + "/", "endpoint": s3,
              "aws_region": "us-east-1", "aws_credentials": {"type": "environment"}}  # fmt: skip
        meta = json.loads(zarr_json(data.shape, sharded))
        meta.pop("attributes")

        def tensorstore() -> None:
            spec = {"driver": "zarr3", "kvstore": kv, "metadata": meta, "context": ts_context()}
            ts.open(spec, create=True, delete_existing=False).result().write(data).result()

        contenders[TS] = tensorstore
    contenders[FLOOR] = lambda: floor_write(fs_of(floor=True), paths[FLOOR], data, sharded)

    def read_back(n: str) -> Any:
        return zarr_dask.open_array(url(n), storage_options=options())[:]

    return contenders, setup, read_back, stats


def write_workload(table: Table, label: str, data: np.ndarray, sharded: bool, target: str, s3: str | None,
                   skipped: dict[tuple[str, str], str]) -> None:  # fmt: skip
    contenders, setup, read_back, stats = write_contenders(data, sharded, target, s3)
    if target == "latency":
        skipped[(label, TS)] = "tensorstore cannot write through an fsspec filesystem (see the s3 rows)"
    elif ts is None:
        skipped[(label, TS)] = "tensorstore not installed"
    runnable: dict[str, Callable[[], Any]] = {}
    counts: dict[str, dict[str, int]] = {}
    for cname, func in contenders.items():
        try:
            setup(cname)
            stats()
            func()
            counts[cname] = stats()
            check(f"{label}/{cname}", read_back(cname), data)
            runnable[cname] = func
        except Exception as e:  # a peer that cannot do this workload: reported, skipped
            skipped[(label, cname)] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"  {label}: {cname} skipped: {skipped[(label, cname)]}", flush=True)
            if os.environ.get("ZD_BENCH_DEBUG"):
                traceback.print_exc()
    times = race(runnable, repeat=REPEAT, setup=setup, warmup=False)  # the checks were the warm-up
    for cname, t in times.items():
        c = counts[cname]
        table.add(label, cname, t, f"{c['requests']} requests, max {c['max_in_flight']} in flight")
    for cname in runnable if target == "latency" else [OURS]:  # free the last round's outputs (S3: one reset)
        setup(cname)


# --------------------------------------------------------------------------------------------- summary
def summary(table: Table, skipped: dict[tuple[str, str], str]) -> None:
    columns = [OURS, OURS_FSSPEC, OURS_UNIT, TS, PEER, FLOOR, FLOOR_WHOLE]
    meds: dict[str, dict[str, float]] = {}
    extras: dict[tuple[str, str], str] = {}
    for w, c, t, extra in table.rows:
        meds.setdefault(w, {})[c] = statistics.median(t)
        requests, _, rest = extra.partition(" requests, max ")
        extras[(w, c)] = f"{requests} req, {rest.split(' ')[0]} max"
    workloads = list(dict.fromkeys([*meds, *(w for w, _ in skipped)]))
    print(f"\n## bench_remote: {MIB:g} MiB float32, {LATENCY * 1000:g} ms per request, median of {REPEAT} "
          "(seconds [requests, most in flight])\n")  # fmt: skip
    print("| workload | " + " | ".join(columns) + " | ratio | target |")
    print("|---|" + "---|" * (len(columns) + 2))
    for w in workloads:
        m = meds.get(w, {})
        cells = []
        for c in columns:
            if c in m:
                cells.append(f"{m[c]:.3f} [{extras[(w, c)]}]")
            elif (w, c) in skipped:
                cells.append("skipped")
            else:
                cells.append("-")
        reads = w.startswith("read")
        refs = [c for c in ((TS, FLOOR, FLOOR_WHOLE) if reads else (TS, PEER)) if c in m]
        if w.startswith("transport") and OURS in m and OURS_FSSPEC in m:
            ratio = f"{m[OURS] / m[OURS_FSSPEC]:.2f}x fsspec"
        elif OURS in m and refs:
            best = min(refs, key=m.__getitem__)
            ratio = f"{m[OURS] / m[best]:.2f}x {best}" + (" ok" if m[OURS] <= 1.2 * m[best] else " MISSED")
            paired, wins, rounds = table.paired(w, OURS, best)
            ratio += f"; paired {paired:.2f}x, faster in {wins} of {rounds} rounds"
            if OURS_UNIT in m:
                ratio += f" ({m[OURS_UNIT] / m[best]:.2f}x chunks=unit)"
        else:
            ratio = "n/a"
        target = "<= 1.2x best(tensorstore, floors)" if reads else "<= 1.2x best(tensorstore, dask+zarr-python)"
        if w.startswith("transport"):
            target = "(obstore vs fsspec, no decoding)"
        print(f"| {w} | " + " | ".join(cells) + f" | {ratio} | {target} |")
    if skipped:
        print("\nskipped:")
        for (w, c), why in skipped.items():
            print(f"  {w} / {c}: {why}")


def main() -> None:
    import zarr

    dask.config.set(scheduler="threads", num_workers=THREADS)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # "Unclosed client session" of throwaway s3fs clients
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}.items():  # fmt: skip
        os.environ.setdefault(name, value)
    data = make_data()
    print(f"bench_remote: {data.shape} float32 ({data.nbytes / 2**20:.0f} MiB), {LATENCY * 1000:g} ms per request; "
          f"remote_transport {zarr_dask.config.get('remote_transport')}, obstore {_version('obstore')}; "
          f"dask {dask.__version__}, zarr-python {zarr.__version__}, tensorstore "
          f"{version('tensorstore') if ts is not None else 'not installed'}; threaded scheduler, {THREADS} workers",
          flush=True)  # fmt: skip
    table = Table("remote")
    skipped: dict[tuple[str, str], str] = {}

    def want(section: str) -> bool:
        return not ONLY or section in ONLY

    t0 = time.perf_counter()
    if want("read"):
        root = scratch("remote")
        with child_server(_serve_http, str(root), LATENCY) as endpoint:
            read_workload(table, "read http chunks", root, endpoint, data, False, skipped)
            read_workload(table, "read http shards", root, endpoint, data, True, skipped)
            transport_workload(table, root, endpoint)
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if want("write-latency"):
        write_workload(table, "write latency chunks", data, False, "latency", None, skipped)
        write_workload(table, "write latency shards", data, True, "latency", None, skipped)
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if want("write-s3"):
        try:
            import moto.server  # noqa: F401
            import s3fs  # noqa: F401
        except ImportError as e:
            for w in ("write s3 chunks", "write s3 shards"):
                skipped[(w, OURS)] = f"moto[server] / s3fs not installed ({e})"
        else:
            with child_server(_serve_s3, LATENCY) as s3:
                write_workload(table, "write s3 chunks", data, False, "s3", s3, skipped)
                write_workload(table, "write s3 shards", data, True, "s3", s3, skipped)
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    summary(table, skipped)


if __name__ == "__main__":
    main()
