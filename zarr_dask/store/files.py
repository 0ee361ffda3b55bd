"""The ``os``-level file primitives of :class:`~zarr_dask.store.LocalStore`: open flags, exact reads, whole
writes, atomic replacement, exclusive creation, directory durability and removal, and the lock files.

Everything here is a thin, checked wrapper of one or two system calls; the store's rules (keys, symbolic
links, temporary files, compare-and-swap) stay in :mod:`zarr_dask.store.local`.

Examples
--------
>>> import os, tempfile
>>> d = tempfile.mkdtemp(); path = os.path.join(d, "k")
>>> fd = os.open(path, TEMP_FLAGS, 0o600); write_all(fd, b"hello"); os.close(fd)
>>> fd = os.open(path, READ_FLAGS); read_range(fd, 5, 1, 3), regular_size(fd); os.close(fd)
(b'el', 5)
>>> remove_tree(d); os.path.exists(d)
False
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress

from zarr_dask.store._keys import is_valid_key, resolve_range
from zarr_dask.store.base import Buffer, Parts
from zarr_dask.store.tempfiles import TEMP_SUFFIX, sweep_directory

_log = logging.getLogger("zarr_dask.store")

WINDOWS = os.name == "nt"
O_BINARY: int = getattr(os, "O_BINARY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
# O_NONBLOCK: opening a FIFO planted in the store must not hang (regular files ignore the flag).
READ_FLAGS = os.O_RDONLY | O_BINARY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
try:
    import fcntl as _fcntl
except ImportError:  # Windows: no flock
    _fcntl = None  # type: ignore[assignment]
#: True where ``flock`` exists (the lock files of :func:`lock_exclusively`).
HAVE_FLOCK = _fcntl is not None
LOCK_FLAGS = os.O_RDWR | os.O_CREAT | O_CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_BINARY | O_CLOEXEC
MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
NO_HARDLINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}


def path_to_url(path: str) -> str:
    """``file://`` URL of an absolute path, spelled like fsspec (no percent-encoding)."""
    if WINDOWS:
        return "file:///" + path.replace("\\", "/")
    return "file://" + path


@functools.lru_cache(maxsize=64)
def lock_prefix(real_base: str) -> str:
    """The lock files' path prefix for one store root (a private directory per user, created on first use;
    the result is cached, so a directory that cannot be made is retried on every lock)."""
    directory = os.path.join(tempfile.gettempdir(), f"zarr_dask-locks-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return os.path.join(directory, hashlib.sha256(os.fsencode(real_base)).hexdigest()[:32])


def open_lock_file(real_base: str, name: str) -> int:
    """Open (create) the lock file of one store root and lock name."""
    try:
        return os.open(f"{lock_prefix(real_base)}-{name}.lock", LOCK_FLAGS, 0o600)
    except FileNotFoundError:  # the directory was removed meanwhile (a temp-dir cleaner): make it again
        lock_prefix.cache_clear()
        return os.open(f"{lock_prefix(real_base)}-{name}.lock", LOCK_FLAGS, 0o600)


def listable(name: str) -> bool:
    """False for temporary files and names that are not valid keys."""
    return not (name.startswith(".") and name.endswith(TEMP_SUFFIX)) and is_valid_key(name)


def entry_kind(entry: os.DirEntry[str]) -> bool | None:
    """True for a directory, False for a regular file, None for anything else (symlinks included)."""
    if entry.is_dir(follow_symlinks=False):
        return True
    if entry.is_file(follow_symlinks=False):
        return False
    return None


def scan_entries(directory: str) -> list[tuple[os.DirEntry[str], bool]]:
    """``(entry, is_dir)`` for the files and directories of ``directory`` that are store entries (none if the
    directory is missing; other errors are raised)."""
    try:
        with os.scandir(directory) as entries:
            return [(e, is_dir) for e in entries if listable(e.name) and (is_dir := entry_kind(e)) is not None]
    except MISSING:
        return []


def walk_entries(directory: str, key_prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(key, entry)`` for every store file below ``directory``, whose keys start with ``key_prefix``."""
    stack = [(directory, key_prefix)]
    while stack:
        path, prefix = stack.pop()
        for entry, is_dir in scan_entries(path):
            if is_dir:
                stack.append((entry.path, prefix + entry.name + "/"))
            else:
                yield prefix + entry.name, entry


def regular_size(fd: int) -> int | None:
    """Size of an open regular file, None for directories, FIFOs, devices..."""
    info = os.fstat(fd)
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def read_exactly(fd: int, offset: int, length: int) -> bytes:
    """Read ``length`` bytes at ``offset`` (fewer if the file is shorter)."""
    parts: list[bytes] = []
    while length > 0:
        part = pread(fd, length, offset)
        if not part:
            break
        parts.append(part)
        offset += len(part)
        length -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def readv_exactly(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from the file at ``offset``; returns the bytes read (fewer if the file is shorter)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            break
        done += n
    return done


def pread(fd: int, length: int, offset: int) -> bytes:
    """``os.pread``, or seek + read where there is none."""
    if hasattr(os, "pread"):
        return os.pread(fd, length, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, length)


def read_range(fd: int, size: int, start: int | None, end: int | None) -> bytes:
    """Read an fsspec-style range of an open file of ``size`` bytes."""
    offset, length = resolve_range(start, end, size)
    return read_exactly(fd, offset, length) if length else b""


def write_all(fd: int, value: Buffer | Parts) -> None:
    """Write a whole buffer (or each buffer of a :class:`~zarr_dask.store.base.Parts`, in order), looping over
    short writes."""
    for buffer in value.buffers if isinstance(value, Parts) else (value,):
        view = memoryview(buffer).cast("B")
        while view:
            written = os.write(fd, view)
            view = view[written:]


def replace(temp: str, path: str) -> bool:
    """Atomically move ``temp`` over ``path``."""
    os.replace(temp, path)
    return True


def create_exclusive(path: str, temp: str) -> bool:
    """Fallback of :func:`link_exclusive` without hard links: ``O_EXCL`` create, then copy."""
    try:
        fd = os.open(path, TEMP_FLAGS, 0o666)
    except FileExistsError:
        return False
    try:
        with open(temp, "rb") as source:
            write_all(fd, source.read())
    finally:
        os.close(fd)
    return True


_CREATE_ATTEMPTS = 20


def write_temp(directory: str, name: str, value: Buffer | Parts, *, fsync: bool) -> str:
    """Create ``directory`` if needed and write ``value`` into a fresh temporary file there (named after
    ``name``, with :data:`~zarr_dask.store.tempfiles.TEMP_SUFFIX`); its path."""
    sweep_directory(directory)  # stale temporary files of killed writers (see store/tempfiles.py)
    for _ in range(_CREATE_ATTEMPTS):  # retry: a concurrent delete may prune the directory
        temp = os.path.join(directory, f".{name[:40]}.{secrets.token_hex(8)}{TEMP_SUFFIX}")
        try:
            fd = os.open(temp, TEMP_FLAGS, 0o666)
            break
        except FileNotFoundError:
            # a concurrent prune removed a parent: retry (makedirs itself raises FileExistsError when a
            # directory it found existing is pruned before it checks it)
            with suppress(FileNotFoundError, FileExistsError):
                os.makedirs(directory, exist_ok=True)
    else:
        raise FileNotFoundError(errno.ENOENT, "directory keeps disappearing", directory)
    try:
        write_all(fd, value)
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(temp)
        raise
    os.close(fd)
    return temp


def link_exclusive(temp: str, path: str) -> bool:
    """Hard-link the complete ``temp`` to ``path``; False if ``path`` exists."""
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in NO_HARDLINKS:
            raise
        return create_exclusive(path, temp)
    return True


def unlink_quietly(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)


def fsync_directory(directory: str) -> None:
    """Make a rename durable (no-op where directories cannot be opened)."""
    if WINDOWS:
        return
    fd = os.open(directory, os.O_RDONLY | O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Remove the directory tree at ``path`` (a link to a directory: the link); missing is fine."""
    if os.path.islink(path):
        if os.path.isdir(path):
            os.unlink(path)
        return
    if not os.path.isdir(path):
        return
    for _ in range(_CREATE_ATTEMPTS):  # again while a concurrent writer adds files below it meanwhile
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return
    shutil.rmtree(path)  # again, to raise the real error


def empty_directory(root: str) -> None:
    """Remove everything inside ``root`` but ``root`` itself (an entry another process removed meanwhile is
    gone either way)."""
    try:
        entries = list(os.scandir(root))
    except MISSING:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


#: A wait this long for a lock file is logged, naming the process that holds it (a stopped or frozen process
#: keeps its locks until it resumes or exits, and every writer of that key waits meanwhile).
LOCK_WAIT_WARNING = 10.0


def lock_exclusively(fd: int, what: str, where: str) -> None:
    """``flock(fd, LOCK_EX)``: wait for the lock of an open lock file (released when ``fd`` is closed). A wait
    longer than :data:`LOCK_WAIT_WARNING` is logged (``what``: the key or lock name, ``where``: the store),
    and the wait goes on."""
    assert _fcntl is not None, "callers check HAVE_FLOCK"
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    timer = threading.Timer(LOCK_WAIT_WARNING, _warn_waiting, (os.fstat(fd), what, where))
    timer.daemon = True
    timer.start()
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX)
    finally:
        timer.cancel()


def _warn_waiting(st: os.stat_result, what: str, where: str) -> None:
    holders = lock_holders(st)
    who = ", ".join(f"process {pid} ({state})" for pid, state in holders) or "another process"
    _log.warning("waiting over %g s for the lock of %r in %s, held by %s; a stopped or frozen process keeps it "
                 "until it resumes or exits, and this write waits until then", LOCK_WAIT_WARNING, what, where,
                 who)  # fmt: skip


_PROCESS_STATES = {"T": "stopped", "t": "stopped by a debugger", "D": "waiting for a disk", "Z": "exited"}


def lock_holders(st: os.stat_result) -> list[tuple[int, str]]:
    """``(pid, state)`` of the processes holding an ``flock`` on the file ``st`` describes, from ``/proc/locks``
    (Linux; empty elsewhere). A state is "running", "stopped", ..."""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->" or fields[5] != inode:  # "->": a waiter, not a holder
            continue
        pid = int(fields[4])
        try:
            with open(f"/proc/{pid}/stat") as f:
                code = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            code = "?"
        found.append((pid, _PROCESS_STATES.get(code, "running" if code in "RS" else code)))
    return found


#: Keys hash onto this many lock files per store root (a plain write or delete of a key takes one, briefly).
KEY_LOCK_STRIPES = 4096
#: In-process stand-ins for the key lock files where those cannot be had.
_THREAD_LOCKS = [threading.Lock() for _ in range(64)]
_WARNED: set[str] = set()


class LockFiles:
    """The lock files of one store root: ``flock`` on files in a private directory under the system's
    temporary directory (never in the store), shared by every process of this machine."""

    def __init__(self, real_base: str, url: str) -> None:
        self.real_base = real_base
        self.url = url

    def key_lock(self, key: str) -> AbstractContextManager[None]:
        """The lock of one key: one of :data:`KEY_LOCK_STRIPES` lock files (not reentrant)."""
        stripe = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "little") % KEY_LOCK_STRIPES
        return self.lock(f"k{stripe}", _THREAD_LOCKS[stripe % len(_THREAD_LOCKS)], key=key)

    @contextmanager
    def lock(self, name: str, fallback: threading.Lock | None = None, key: str | None = None) -> Iterator[None]:
        """``flock`` on the lock file ``name`` (taken for ``key``, if given: a long wait's warning names it).
        Without flock or a usable lock directory the work goes on with a warning, serialised in this process
        only (by ``fallback``, if given)."""
        try:
            fd = open_lock_file(self.real_base, name) if HAVE_FLOCK else -1
        except OSError as exc:
            if self.real_base not in _WARNED:  # once per root: every write of a key takes a lock
                _WARNED.add(self.real_base)
                _log.warning("%s: no lock file for %r (%s); other processes are not locked out", self.url, name, exc)
            fd = -1
        if fd < 0:
            with fallback or nullcontext():
                yield
            return
        try:
            lock_exclusively(fd, name if key is None else key, self.url)
            yield
        finally:
            os.close(fd)  # closing releases the lock
