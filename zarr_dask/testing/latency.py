"""A filesystem that adds a fixed delay to every request, for tests and benchmarks of remote-store behaviour.

:class:`LatencyFileSystem` is an fsspec *asynchronous* filesystem wrapped around any other filesystem (memory,
local, or an async one such as s3fs): every request (``cat_file`` and each range of ``cat_ranges``,
``pipe_file``, ``info``/``exists``/``size``, ``ls``, ``find``, ``rm_file``) first sleeps ``seconds`` with
``await asyncio.sleep``, then runs on the inner filesystem.  Batched calls (``cat``, ``cat_ranges``, ``pipe``,
``rm``) overlap like they do on S3, so a batch of 50 reads costs about one delay, 50 single reads fifty.
Like an object store it keeps no empty directories: removing the last key below a directory removes it.

Use it through a URL once this module is imported (importing it registers the ``latency`` protocol)::

    import zarr_dask.testing.latency  # registers "latency"
    store = open_store("latency::memory://data", storage_options={"latency": {"seconds": 0.02}})

or with :func:`latency_store`, which does both.  Options of the inner filesystem go under its protocol
(``{"latency": {...}, "s3": {...}}``), or at the top level, where they are passed on to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.spec import AbstractFileSystem

from zarr_dask.errors import StoreError
from zarr_dask.store.fsspec_store import FsspecStore

__all__ = ["PROTOCOL", "LatencyFileSystem", "latency_store"]

PROTOCOL = "latency"
_LOOP_OPTIONS = ("asynchronous", "loop", "batch_size")


class LatencyFileSystem(AsyncFileSystem, ChainedFileSystem):  # type: ignore[misc]
    """An fsspec filesystem that delays every request to an inner filesystem by ``seconds``.

    Parameters
    ----------
    fs
        The inner filesystem; or give ``target_protocol`` (+ ``target_options``), as fsspec does for chained
        URLs such as ``"latency::memory://x"``.
    seconds
        The delay added to every request (default 20 ms, a typical cloud object-store round trip).
    target_protocol, target_options
        The inner filesystem's protocol and options, when ``fs`` is not given.
    fo
        The path of a chained URL (fsspec passes it; unused).
    **kwargs
        ``asynchronous``, ``loop``, ``batch_size`` for fsspec's async machinery; anything else is passed to
        the inner filesystem.

    Examples
    --------
    >>> import time, fsspec
    >>> fs = LatencyFileSystem(fsspec.filesystem("memory"), seconds=0.05)
    >>> _ = fs.pipe({f"/latency-doc/k{i}": b"x" for i in range(20)})  # 20 concurrent writes
    >>> t0 = time.perf_counter(); values = fs.cat([f"/latency-doc/k{i}" for i in range(20)])
    >>> len(values), time.perf_counter() - t0 < 0.5  # about one delay, not twenty
    (20, True)
    >>> fs.rm("/latency-doc", recursive=True)
    """

    protocol = PROTOCOL
    cachable = False

    def __init__(
        self,
        fs: AbstractFileSystem | None = None,
        *,
        seconds: float = 0.02,
        target_protocol: str | None = None,
        target_options: Mapping[str, Any] | None = None,
        fo: str | None = None,
        **kwargs: Any,
    ) -> None:
        loop_options = {k: kwargs.pop(k) for k in _LOOP_OPTIONS if k in kwargs}
        super().__init__(**loop_options)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise StoreError(f"latency seconds must be a number >= 0, got {seconds!r}")
        if fs is None:
            if target_protocol is None:
                raise StoreError("LatencyFileSystem needs an inner filesystem: pass fs=... or target_protocol=...")
            fs = fsspec.filesystem(target_protocol, **{**dict(target_options or {}), **kwargs})
        self.fs = fs
        self.seconds = float(seconds)
        self._strip_protocol = fs._strip_protocol  # type: ignore[method-assign]  # paths are the inner fs's

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        """Class-level (used by fsspec's URL parsing); an instance strips like its inner filesystem."""
        path = str(path)
        for prefix in (PROTOCOL + "::", PROTOCOL + "://"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
        return path

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.seconds)
        if self.fs.async_impl:
            return await getattr(self.fs, "_" + name)(*args, **kwargs)
        return getattr(self.fs, name)(*args, **kwargs)

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> Any:
        return await self._call("cat_file", path, start=start, end=end)

    async def _pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        try:
            await self._call("pipe_file", path, value, mode=mode)
        except FileNotFoundError:  # a local inner filesystem needs the parent directory
            parent = path.rsplit("/", 1)[0]
            if self.fs.async_impl or not parent:
                raise
            self.fs.makedirs(parent, exist_ok=True)
            self.fs.pipe_file(path, value, mode=mode)

    async def _info(self, path: str, **kwargs: Any) -> Any:
        return await self._call("info", path)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return await self._call("ls", path, detail=detail)

    async def _find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any
    ) -> Any:  # one listing request, like an object store's recursive listing
        return await self._call("find", path, maxdepth=maxdepth, withdirs=withdirs, detail=kwargs.get("detail", False))

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        await self._call("rm_file", path)
        if not self.fs.async_impl:
            self._prune(path.rsplit("/", 1)[0])

    async def _rm(self, path: Any, recursive: bool = False, batch_size: int | None = None, **kwargs: Any) -> None:
        paths = await self._expand_path(path, recursive=recursive)
        files = [p for p in paths if not await self._isdir_inner(p)]
        await asyncio.gather(*(self._rm_file(p) for p in files))
        for directory in sorted(set(paths) - set(files), key=len, reverse=True):
            self._prune(directory)

    async def _isdir_inner(self, path: str) -> bool:
        if self.fs.async_impl:
            return bool(await self.fs._isdir(path))
        return bool(self.fs.isdir(path))

    def _prune(self, directory: str) -> None:
        """Remove ``directory`` and its parents while they are empty (object stores have no empty dirs)."""
        while directory and directory not in ("/", self.fs.root_marker):
            try:
                if self.fs.ls(directory, detail=False):
                    return
                self.fs.rmdir(directory)
            except (OSError, ValueError):
                return
            directory = directory.rsplit("/", 1)[0]

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        return self.fs._open(path, mode=mode, **kwargs)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.fs.invalidate_cache(path)


def latency_store(
    url: str,
    *,
    seconds: float = 0.02,
    storage_options: Mapping[str, Any] | None = None,
    read_only: bool = False,
) -> FsspecStore:
    """A store on ``url`` where every request takes ``seconds`` longer (``"latency::" + url``).

    Parameters
    ----------
    url
        The inner location, e.g. ``"memory://bench"``, ``"file:///tmp/x"``, ``"s3://bucket/x"``.
    seconds
        The delay per request.
    storage_options
        Options for the inner filesystem.
    read_only
        Refuse writes.

    Examples
    --------
    >>> store = latency_store("memory://latency-store-doc", seconds=0.001)
    >>> store.url
    'latency::memory://latency-store-doc'
    >>> store.set("a", b"1"); store.get("a")
    b'1'
    >>> store.delete_prefix("")
    """
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    options: dict[str, Any] = {PROTOCOL: {"seconds": seconds}}
    if storage_options:
        options[protocol] = dict(storage_options)
    return FsspecStore.from_url(f"{PROTOCOL}::{url}", storage_options=options, read_only=read_only)


fsspec.register_implementation(PROTOCOL, LatencyFileSystem, clobber=True)
