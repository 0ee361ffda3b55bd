"""Stale temporary files of :class:`~zarr_dask.store.LocalStore` writers that were killed mid-write.

A local write goes to ``.<name>.<random>.zd-tmp`` next to its target and is renamed into place, so a crash
never tears a value, but a writer killed (SIGKILL, OOM, power loss) between creating and renaming its
temporary file leaves it behind. Listings never show such files; these functions remove them:

* :func:`sweep_directory`, called on a write, removes the stale temporary files of the directory written to
  (at most once per directory and :data:`DEFAULT_MAX_AGE` per process, so writes stay O(1) per key);
* :func:`remove_stale_temp_files` walks a whole store (``LocalStore.remove_stale_temp_files``, the
  ``zarr-dask cleanup`` command).

"Stale" is by age: a file whose last modification is older than ``max_age`` seconds (default one hour,
``ZARR_DASK_TEMP_MAX_AGE``). A live writer modifies its temporary file as it writes and renames it right
after, so its file is always younger than that and is never removed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

from zarr_dask import config

__all__ = ["DEFAULT_MAX_AGE", "TEMP_SUFFIX", "is_temp_name", "remove_stale_temp_files", "sweep_directory"]

#: Temporary files are named ``.<name>.<random>.zd-tmp`` next to their target; listings skip them.
TEMP_SUFFIX = ".zd-tmp"
#: Age (seconds) after which a temporary file is stale: one hour, or ``ZARR_DASK_TEMP_MAX_AGE``.
DEFAULT_MAX_AGE = 3600.0
_MAX_SWEPT = 10_000
_swept: dict[str, float] = {}
_swept_lock = threading.Lock()


def default_max_age() -> float:
    """The ``temp_max_age`` knob (:mod:`zarr_dask.config`; default :data:`DEFAULT_MAX_AGE`)."""
    return float(config.get("temp_max_age"))


def is_temp_name(name: str) -> bool:
    """True for a temporary file's name (``.x.<random>.zd-tmp``).

    Examples
    --------
    >>> is_temp_name(".0.3f2a9c.zd-tmp"), is_temp_name("0")
    (True, False)
    """
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def _stale(directory: str, max_age: float, now: float) -> Iterator[str]:
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not is_temp_name(entry.name):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if now - st.st_mtime > max_age and entry.is_file(follow_symlinks=False):
                    yield entry.path
    except OSError:
        return


def _remove(paths: Iterator[str]) -> list[str]:
    removed = []
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            continue  # already removed by another sweep, or not ours to remove
        removed.append(path)
    return removed


def sweep_directory(directory: str, max_age: float | None = None) -> list[str]:
    """Remove the stale temporary files of ``directory``, unless this process swept it less than
    ``max_age`` seconds ago; returns the paths removed."""
    age = default_max_age() if max_age is None else max_age
    now = time.time()
    with _swept_lock:
        last = _swept.get(directory)
        if last is not None and now - last < age:
            return []
        if len(_swept) >= _MAX_SWEPT:
            _swept.clear()
        _swept[directory] = now
    return _remove(_stale(directory, age, now))


def remove_stale_temp_files(root: str, max_age: float | None = None) -> list[str]:
    """Remove every stale temporary file below ``root`` (symbolic links are not followed); returns the
    paths removed, sorted.

    Examples
    --------
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> path = os.path.join(root, ".0.3f2a9c.zd-tmp")
    >>> open(path, "wb").close()
    >>> remove_stale_temp_files(root) == []  # younger than an hour: perhaps a live writer's
    True
    >>> os.utime(path, (0, 0))
    >>> remove_stale_temp_files(root) == [path]
    True
    """
    age = default_max_age() if max_age is None else max_age
    now = time.time()
    removed: list[str] = []
    for directory, _dirs, _files in os.walk(root, followlinks=False):
        removed += _remove(_stale(directory, age, now))
    return sorted(removed)
