"""The local-filesystem store: plain ``os`` calls, atomic writes, no fsspec."""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TypeAlias

from zarr_dask.errors import InvalidPathError
from zarr_dask.store import files
from zarr_dask.store._keys import check_range, resolve_range
from zarr_dask.store.arena import ReadArena
from zarr_dask.store.base import Buffer, ByteRange, Parts, Store, value_nbytes
from zarr_dask.store.versioned import Versioned

__all__ = ["TEMP_SUFFIX", "LocalStore"]

from zarr_dask.store.tempfiles import TEMP_SUFFIX, remove_stale_temp_files

_log = logging.getLogger("zarr_dask.store")
_MAX_SAFE_DIRS = 100_000
_Opener: TypeAlias = Callable[[str], "tuple[int, int] | None"]


#: how often a write is made again when its temporary file vanished before its rename: a concurrent
#: ``delete_prefix`` of its directory (a journal closed by another resumer of the same run) removed it
_REMOVED_ATTEMPTS = 20


class LocalStore(Store):
    """A store in a directory of the local filesystem.

    Keys map to files below ``root`` (``"a/c/0/1"`` -> ``root/a/c/0/1``).  Reads are plain ``os.open``
    / ``os.read`` calls; writes go to a temporary file in the target directory which then replaces the
    target (``os.replace``), so readers never see a torn value, even if the writer crashes.

    Parameters
    ----------
    root
        The directory (created on the first write).
    read_only
        Refuse every mutating call.
    fsync
        Also ``fsync`` each file and its directory before returning, so values survive a power loss
        (slower).  Without it, writes are atomic but durability is left to the operating system.

    Notes
    -----
    Security: every key is validated (:func:`normalize_key`), and the directory a key lives in is
    resolved (``os.path.realpath``, results cached per directory) and must lie under the resolved root;
    a key that is itself a symbolic link is followed only if its target lies under the root.  Listings
    do not report symbolic links, nor names that are not valid keys, nor temporary files.  ``delete``
    removes directories it leaves empty, so ``list_dir`` reports only directories that hold keys
    (unless another program created empty ones).
    Directory results are cached per instance: replacing a store directory by a symbolic link while a
    store is open is not detected.

    Examples
    --------
    >>> import tempfile
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> store.set("a/b", b"xyz")
    >>> store.get_ranges([("a/b", -2, None)])
    [b'yz']
    """

    batched_io = False
    takes_parts = True

    def __init__(self, root: str | os.PathLike[str], *, read_only: bool = False, fsync: bool = False) -> None:
        self.root = os.path.abspath(os.fspath(root))
        super().__init__(files.path_to_url(self.root), read_only=read_only)
        self.fsync = bool(fsync)
        self._base = self.root if self.root.endswith(os.sep) else self.root + os.sep
        real_root = os.path.realpath(self.root)
        self._real_base = real_root if real_root.endswith(os.sep) else real_root + os.sep
        self._safe_dirs: set[str] = set()
        self._locks = files.LockFiles(self._real_base, self.url)

    # ---------------------------------------------------------------------------------------- reading
    def get(self, key: str) -> bytes | None:
        """Return the value of ``key`` or None."""
        value = self._read(key)
        self.counters.add(get=1, bytes_read=len(value or b""))
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist (a loop: local reads are fast)."""
        found: dict[str, bytes] = {}
        wanted = dict.fromkeys(keys)
        for key in wanted:
            value = self._read(key)
            if value is not None:
                found[key] = value
        self.counters.add(get=len(wanted), bytes_read=sum(map(len, found.values())))
        return found

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        """Read byte ranges; each file is opened once however many ranges it serves."""
        out: list[bytes | None] = []
        with self._open_files() as open_file:
            for key, start, end in requests:
                check_range(key, start, end)
                opened = open_file(key)
                out.append(None if opened is None else files.read_range(opened[0], opened[1], start, end))
        self.counters.add(get_range=len(out), bytes_read=sum(len(v) for v in out if v is not None))
        return out

    def get_many_into(self, keys: Sequence[str], arena: ReadArena | None) -> dict[str, Buffer]:
        """Read whole files into ``arena`` memory (``preadv``)."""
        if not hasattr(os, "preadv") or arena is None:
            return dict(self.get_many(keys))
        found: dict[str, Buffer] = {}
        nbytes = 0
        wanted = dict.fromkeys(keys)
        for key in wanted:
            opened = self._open_sized(key)
            if opened is None:
                continue
            fd, size = opened
            try:
                view = arena.take(size)
                got = files.readv_exactly(fd, view, 0)
            except OSError as exc:
                raise self._error("read", key, exc) from exc
            finally:
                os.close(fd)
            found[key] = view[:got]
            nbytes += got
        self.counters.add(get=len(wanted), bytes_read=nbytes)
        return found

    read_flags = files.READ_FLAGS  # O_NOFOLLOW: a symbolic link fails to open and goes back to get_many_into

    @contextmanager
    def process_lock(self, name: str) -> Iterator[None]:
        """``flock`` on a file named after the store's resolved root, in a private directory under the system's
        temporary directory (nothing is written into the store). Released when the block ends or the process
        dies. Processes on other machines sharing the directory (NFS) are not covered."""
        with self._locks.lock(name):
            yield

    def read_paths(self, keys: Sequence[str]) -> list[str | None] | None:
        """The files of ``keys``, after the same containment checks as every read (the key's directory is
        inside the root); None where the key's directory does not exist."""
        existing = self._existing_path
        return [existing(key) for key in keys]

    def get_ranges_into(self, requests: Sequence[ByteRange], arena: ReadArena | None) -> list[Buffer | None]:
        """Read byte ranges into ``arena`` memory (``preadv``); each file is opened once."""
        if not hasattr(os, "preadv") or arena is None:
            return list(self.get_ranges(requests))
        out: list[Buffer | None] = []
        nbytes = 0
        with self._open_files() as open_file:
            for key, start, end in requests:
                check_range(key, start, end)
                opened = open_file(key)
                if opened is None:
                    out.append(None)
                    continue
                fd, size = opened
                offset, length = resolve_range(start, end, size)
                view = arena.take(length)
                try:
                    got = files.readv_exactly(fd, view, offset)
                except OSError as exc:
                    raise self._error("read", key, exc) from exc
                out.append(view[:got])
                nbytes += got
        self.counters.add(get_range=len(out), bytes_read=nbytes)
        return out

    def exists(self, key: str) -> bool:
        """True if ``key`` is a regular file (a symbolic link counts if it resolves inside the root)."""
        path = self._existing_path(key)
        self.counters.add(exists=1)
        if path is None:
            return False
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                info = os.stat(self._check_real(path, key))
        except files.MISSING:
            return False
        except OSError as exc:
            raise self._error("check", key, exc) from exc
        return stat.S_ISREG(info.st_mode)

    def get_versioned(self, keys: Sequence[str]) -> dict[str, Versioned]:
        """Values with versions: the file's identity (device, inode, size, times) and its content."""
        found: dict[str, Versioned] = {}
        for key in dict.fromkeys(keys):
            value, signature = self._read_signed(key)
            found[key] = Versioned(value, None if value is None else (signature, value))
        self.counters.add(get=len(found), bytes_read=sum(len(v.value) for v in found.values() if v.value is not None))
        return found

    def _read_signed(self, key: str) -> tuple[bytes | None, tuple[int, ...] | None]:
        """A whole file and the ``fstat`` signature of the file read (None, None if missing)."""
        path = self._existing_path(key)
        fd = None if path is None else self._open(path, key)
        if fd is None:
            return None, None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, None
            value = files.read_exactly(fd, 0, info.st_size)
            return value, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        except files.MISSING:
            return None, None
        except OSError as exc:
            raise self._error("read", key, exc) from exc
        finally:
            os.close(fd)

    def _read(self, key: str) -> bytes | None:
        """Read a whole file, None if missing."""
        path = self._existing_path(key)
        fd = None if path is None else self._open(path, key)
        if fd is None:
            return None
        try:
            size = files.regular_size(fd)
            return None if size is None else files.read_exactly(fd, 0, size)
        except files.MISSING:
            return None
        except OSError as exc:
            raise self._error("read", key, exc) from exc
        finally:
            os.close(fd)

    def _open(self, path: str, key: str) -> int | None:
        """Open ``path`` for reading after the containment checks; None if missing."""
        try:
            if not files.O_NOFOLLOW:  # no O_NOFOLLOW (Windows): resolve every path
                path = self._check_real(path, key)
            return os.open(path, files.READ_FLAGS)
        except files.MISSING:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise self._error("open", key, exc) from exc
        try:  # the key itself is a symbolic link: follow it only if it stays inside the root
            return os.open(self._check_real(path, key), files.READ_FLAGS & ~files.O_NOFOLLOW)
        except files.MISSING:
            return None
        except OSError as exc:
            raise self._error("open", key, exc) from exc

    @contextmanager
    def _open_files(self) -> Iterator[_Opener]:
        """Yield ``open_file(key) -> (fd, size) | None`` caching descriptors; close them all on exit."""
        cache: dict[str, tuple[int, int] | None] = {}

        def open_file(key: str) -> tuple[int, int] | None:
            if key not in cache:
                cache[key] = self._open_sized(key)
            return cache[key]

        try:
            yield open_file
        finally:
            for opened in cache.values():
                if opened is not None:
                    os.close(opened[0])

    def _open_sized(self, key: str) -> tuple[int, int] | None:
        """Open a key for ranged reads: ``(fd, size)`` or None if it is missing."""
        path = self._existing_path(key)
        fd = None if path is None else self._open(path, key)
        if fd is None:
            return None
        try:
            size = files.regular_size(fd)
        except OSError as exc:
            os.close(fd)
            raise self._error("read", key, exc) from exc
        if size is None:
            os.close(fd)
            return None
        return fd, size

    # ---------------------------------------------------------------------------------------- writing
    def set(self, key: str, value: Buffer | Parts) -> None:
        """Write ``value`` atomically (temporary file + ``os.replace``)."""
        self._check_writable("set", key)
        self._write(key, self._path(key), value, exclusive=False)

    def set_many(self, items: Mapping[str, Buffer | Parts]) -> None:
        """Write several values, one atomic write each."""
        for key in items:
            self._check_writable("set", key)
        for key in items:  # validate every key before writing any
            self._local_key(key)
        for key, value in items.items():
            self._write(key, self._path(key), value, exclusive=False)

    def set_if_not_exists(self, key: str, value: Buffer) -> bool:
        """Atomically create ``key``: the complete temporary file is hard-linked into place.

        On filesystems without hard links this falls back to ``O_CREAT | O_EXCL`` (still exclusive, but a
        concurrent reader may see a partly written value).
        """
        self._check_writable("set", key)
        return self._write(key, self._path(key), value, exclusive=True)

    def set_if_unchanged(self, items: Mapping[str, tuple[Buffer | None, object]]) -> dict[str, bool]:
        """Conditional writes and deletes: under the key's lock (see :meth:`key_lock`), the file must still be
        the one read (same identity and the same bytes); new values are written to a temporary file first, so
        the lock is held only for the comparison and the rename."""
        for key in items:
            self._check_writable("set", key)
        for key in items:
            self._local_key(key)
        done: dict[str, bool] = {}
        nbytes = 0
        for key, (value, version) in items.items():
            path = self._path(key)
            try:
                done[key] = self._swap(key, path, value, version)
            except OSError as exc:
                raise self._error("write", key, exc) from exc
            nbytes += 0 if value is None else memoryview(value).nbytes
        deletes = sum(value is None for value, _ in items.values())
        self.counters.add(set=len(items) - deletes, delete=deletes, bytes_written=nbytes)
        return done

    def _swap(self, key: str, path: str, value: Buffer | None, version: object) -> bool:
        """One compare-and-swap (``value`` None: delete)."""
        directory, name = os.path.split(path)
        temp = None if value is None else files.write_temp(directory, name, value, fsync=self.fsync)
        try:
            with self.key_lock(key):
                current, signature = self._read_signed(key) if version is not None else (None, None)
                if version is None:
                    if value is None:
                        return not self.exists(key)
                    assert temp is not None
                    return files.link_exclusive(temp, path)  # create only if still absent
                if current is None or (signature, current) != version:
                    return False
                if temp is None:
                    self._unlink(path, key)
                else:
                    os.replace(temp, path)
                    temp = None
        finally:
            if temp is not None:
                files.unlink_quietly(temp)
        if value is None:
            self._prune(directory)
        elif self.fsync:
            files.fsync_directory(directory)
        return True

    def key_lock(self, key: str) -> AbstractContextManager[None]:
        """The lock of one key, shared by every process on this machine (``flock`` on one of
        ``4096`` lock files per store root, next to :meth:`process_lock`'s, never in the store). Every
        replace or delete of a key holds it, so a conditional write's comparison and rename are atomic with
        respect to every other write of the key. Not reentrant."""
        return self._locks.key_lock(key)

    def delete(self, key: str) -> None:
        """Remove ``key`` (missing is fine) and the directories that become empty."""
        self.delete_many([key])

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove every key of ``keys`` and the directories that become empty."""
        for key in keys:
            self._check_writable("delete", key)
        unique = list(dict.fromkeys(keys))
        for key in unique:  # validate every key before deleting any
            self._local_key(key)
        directories = set()
        for key in unique:
            path = self._existing_path(key)
            if path is not None:
                with self.key_lock(key):
                    self._unlink(path, key)
                directories.add(os.path.dirname(path))
        for directory in sorted(directories, key=len, reverse=True):
            self._prune(directory)
        self.counters.add(delete=len(unique))

    def delete_prefix(self, prefix: str) -> None:
        """Remove every file below ``prefix`` (``""``: everything below the root, keeping the root)."""
        self._check_writable("delete prefix", prefix)
        prefix = self._prefix(prefix)
        try:
            if prefix:
                path = self._base + prefix
                self._check_real(path, prefix)
                files.remove_tree(path)
                self._prune(os.path.dirname(path))
            else:
                files.empty_directory(self.root)
        except InvalidPathError:
            raise
        except OSError as exc:
            raise self._error("delete prefix", prefix, exc) from exc
        finally:
            self._safe_dirs.clear()
        self.counters.add(delete=1)

    def _write(self, key: str, path: str, value: Buffer | Parts, *, exclusive: bool) -> bool:
        """Write through a temporary file; with ``exclusive`` only if ``key`` does not exist."""
        directory, name = os.path.split(path)
        written = False
        try:
            for attempt in range(_REMOVED_ATTEMPTS):  # again if a concurrent delete_prefix removed the temp file
                temp = files.write_temp(directory, name, value, fsync=self.fsync)
                try:
                    if exclusive:
                        written = files.link_exclusive(temp, path)
                    else:
                        with self.key_lock(key):  # never between a conditional write's comparison and its rename
                            written = files.replace(temp, path)
                    break
                except FileNotFoundError:
                    if attempt + 1 == _REMOVED_ATTEMPTS:
                        raise
                finally:
                    if exclusive or not written:
                        files.unlink_quietly(temp)
            if written and self.fsync:
                files.fsync_directory(directory)
        except OSError as exc:
            raise self._error("write", key, exc) from exc
        if written:
            self.counters.add(set=1, bytes_written=value_nbytes(value))
        return written

    def _unlink(self, path: str, key: str) -> None:
        """Remove one file; missing (or a directory) is fine."""
        try:
            os.unlink(path)
        except files.MISSING:
            pass
        except PermissionError as exc:  # macOS / Windows refuse to unlink a directory with EPERM
            if not os.path.isdir(path):
                raise self._error("delete", key, exc) from exc
        except OSError as exc:
            raise self._error("delete", key, exc) from exc

    def _prune(self, directory: str) -> None:
        """Remove ``directory`` and its parents while they are empty, stopping at the root."""
        while directory.startswith(self._base):
            try:
                os.rmdir(directory)
            except OSError:
                return
            self._safe_dirs.discard(directory)
            directory = os.path.dirname(directory)

    def remove_stale_temp_files(self, max_age: float | None = None) -> list[str]:
        """Remove the temporary files killed writers left below the root, if older than ``max_age`` seconds
        (default one hour, ``ZARR_DASK_TEMP_MAX_AGE``): never the file of a live writer. Returns their paths.
        Writes already remove those of the directories they write to."""
        self._check_writable("remove temporary files", "")
        return remove_stale_temp_files(self.root, max_age)

    # ---------------------------------------------------------------------------------------- listing
    def list_prefix(self, prefix: str) -> list[str]:
        """Every key below ``prefix`` (recursive ``os.scandir`` walk), sorted."""
        keys = [key for key, _ in self._walk(prefix)]
        keys.sort()
        return keys

    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key below ``prefix`` with its size, sorted by key."""
        sizes = {key: entry.stat(follow_symlinks=False).st_size for key, entry in self._walk(prefix)}
        return {key: sizes[key] for key in sorted(sizes)}

    def list_prefix_versions(self, prefix: str) -> dict[str, tuple[int, str]]:
        """Every key below ``prefix`` with its size and version (modification time in ns and inode: a file
        written again is renamed into place, a new inode), sorted by key."""
        found: dict[str, tuple[int, str]] = {}
        for key, entry in self._walk(prefix):
            st = entry.stat(follow_symlinks=False)
            found[key] = (st.st_size, f"{st.st_mtime_ns}.{st.st_ino}")
        return {key: found[key] for key in sorted(found)}

    def _walk(self, prefix: str) -> list[tuple[str, os.DirEntry[str]]]:
        """``(key, entry)`` for every file below ``prefix`` (counts one "list")."""
        prefix = self._prefix(prefix)
        directory = self._listed_directory(prefix)
        self.counters.add(list=1)
        try:
            return list(files.walk_entries(directory, prefix + "/" if prefix else ""))
        except OSError as exc:
            raise self._error("list", prefix, exc) from exc

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Names of the files and directories directly below ``prefix``."""
        prefix = self._prefix(prefix)
        directory = self._listed_directory(prefix)
        self.counters.add(list=1)
        keys: list[str] = []
        dirs: list[str] = []
        try:
            entries = files.scan_entries(directory)
        except OSError as exc:
            raise self._error("list", prefix, exc) from exc
        for entry, is_dir in entries:
            (dirs if is_dir else keys).append(entry.name)
        return sorted(keys), sorted(dirs)

    def _listed_directory(self, prefix: str) -> str:
        """The directory of ``prefix`` after checking that it resolves inside the root."""
        if not prefix:
            return self.root
        directory = self._base + prefix
        self._check_real(directory, prefix)
        return directory

    # ------------------------------------------------------------------------------------------ paths
    def _local_key(self, key: str) -> str:
        """Validate ``key`` for this store: the rules of every store, plus Windows' (no ``:``)."""
        key = self._key(key)
        if files.WINDOWS and ":" in key:
            _check_local_key(key, self.url)
        return key

    def _path(self, key: str) -> str:
        """The filesystem path of a valid key, after checking its directory resolves inside the root."""
        path = self._base + self._local_key(key)
        directory = os.path.dirname(path)
        if directory not in self._safe_dirs:
            self._check_directory(directory, key)
        return path

    def _existing_path(self, key: str) -> str | None:
        """Like :meth:`_path` for reads, but None (cheaply) when the key's directory does not exist."""
        path = self._base + self._local_key(key)
        directory = os.path.dirname(path)
        if directory not in self._safe_dirs:
            try:
                os.stat(directory)
            except (FileNotFoundError, NotADirectoryError):
                return None  # nothing can be read there, so nothing can leak
            except OSError:
                pass  # the checks or the open below report it
            self._check_directory(directory, key)
        return path

    def _check_directory(self, directory: str, key: str) -> None:
        """Check that ``directory`` resolves inside the root; remember it if it exists."""
        self._check_real(directory, key)
        if os.path.isdir(directory):
            if len(self._safe_dirs) >= _MAX_SAFE_DIRS:
                self._safe_dirs.clear()
            self._safe_dirs.add(directory)

    def _check_real(self, path: str, key: str) -> str:
        """Resolve ``path`` (symbolic links) and refuse it unless it lies inside the root."""
        real = os.path.realpath(path)
        if real + os.sep != self._real_base and not real.startswith(self._real_base):
            raise InvalidPathError(
                f"key {key!r} resolves to {real!r}, outside the store root {self._real_base!r} "
                "(a symbolic link points out of the store); remove the link or open its target as a store",
                store=self.url,
            )
        return real

    # ---------------------------------------------------------------------------------- configuration
    def with_read_only(self, read_only: bool = True) -> LocalStore:
        """The same directory with ``read_only`` set."""
        return LocalStore(self.root, read_only=read_only, fsync=self.fsync)

    def _config(self) -> tuple[Hashable, ...]:
        return (self.root, self.read_only, self.fsync)

    def __reduce__(self) -> tuple[object, tuple[str, bool, bool]]:
        return (_rebuild_local_store, (self.root, self.read_only, self.fsync))


def _rebuild_local_store(root: str, read_only: bool, fsync: bool) -> LocalStore:
    """Unpickle a LocalStore (fresh counters and caches)."""
    return LocalStore(root, read_only=read_only, fsync=fsync)


def _check_local_key(key: str, url: str) -> None:
    """Refuse keys a LocalStore cannot hold beyond the rules of every store (``normalize_key``): on Windows,
    ``:`` (a platform's limit, not applied to other stores, where existing data may use it)."""
    if files.WINDOWS and ":" in key:
        raise InvalidPathError(f"invalid key {key!r}: ':' is not allowed in Windows file names", store=url)
