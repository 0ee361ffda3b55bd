"""Every tuning knob of zarr_dask, in one place: read from ``dask.config`` (``zarr_dask.<name>``) or the
environment (``ZARR_DASK_<NAME>``), parsed by one set of parsers, documented by one table.

``dask.config.set({"zarr_dask.io-threads": 4})`` wins over ``ZARR_DASK_IO_THREADS=4``, which wins over the
default. ``dask.config`` is only consulted once dask is imported (``import zarr_dask`` never imports it). A
value that cannot be parsed warns once (naming the knob, the value and the form expected) and the default is
used. Values are looked up on every use (cheap: parsed once per distinct raw value), so a change takes effect
at the next read, write or pool creation.

Examples
--------
>>> get("write_attempts")
64
>>> parse_size("128MiB"), parse_size("1.5 GB"), parse_size(4096)
(134217728, 1500000000, 4096)
>>> [k.env for k in KNOBS.values()][:2]
['ZARR_DASK_IO_THREADS', 'ZARR_DASK_NATIVE']
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["KNOBS", "Knob", "get", "markdown_table", "parse_bool", "parse_seconds", "parse_size"]

_UNITS = {
    "": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}  # fmt: skip


def parse_size(value: Any) -> int:
    """Bytes from an int or a size such as ``"128MiB"``, ``"1.5 GB"``, ``"64kB"`` (the only size parser)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a size cannot be negative: {value!r}")
        return int(value)
    text = str(value).strip().replace(" ", "").lower()
    number = text.rstrip("kmgtib")
    unit = text[len(number) :]
    if unit not in _UNITS or not number:
        raise ValueError(f"not a size: {value!r}")
    size = float(number) * _UNITS[unit]
    if size < 0:
        raise ValueError(f"a size cannot be negative: {value!r}")
    return int(size)


def parse_bool(value: Any) -> bool:
    """``1/0``, ``true/false``, ``yes/no``, ``on/off`` (any case), or a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_seconds(value: Any) -> float:
    """Seconds, a non-negative number."""
    seconds = float(value)
    if not seconds >= 0:
        raise ValueError(f"not a number of seconds: {value!r}")
    return seconds


def _positive_int(value: Any) -> int:
    number = int(str(value).strip()) if not isinstance(value, int) else value
    if isinstance(value, bool) or number < 1:
        raise ValueError(f"not a positive integer: {value!r}")
    return number


def _transport(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("auto", "fsspec", "obstore"):
        raise ValueError(f"not one of auto, fsspec, obstore: {value!r}")
    return text


_CPUS = max(1, min(os.cpu_count() or 1, 16))  # read once: os.cpu_count() costs a system call per use


def _cpu_threads() -> int:
    return _CPUS


def _block_pool_default() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows)
        return 1 << 30
    return max(256 << 20, min(2 << 30, total // 8))


@dataclass(frozen=True)
class Knob:
    """One knob: its name (``dask.config`` key ``zarr_dask.<name with dashes>``), environment variable, parser,
    default (a value or a function of nothing), the form it takes, and what it does."""

    name: str
    parse: Callable[[Any], Any]
    default: Any
    form: str
    doc: str

    @property
    def env(self) -> str:
        return "ZARR_DASK_" + self.name.upper()

    @property
    def key(self) -> str:
        return "zarr_dask." + self.name.replace("_", "-")

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob("io_threads", _positive_int, _cpu_threads, "integer >= 1",
             "threads of direct `Array[...]` reads and writes and of pooled dask computes (default: the CPU count, at most 16)"),
        Knob("native", parse_bool, True, "boolean",
             "use the native reader for small local chunks and shards' inner chunks when it is built"),
        Knob("read_arena", parse_size, 128 << 20, "size",
             "bytes of reusable read buffer each reading thread keeps (0: none)"),
        Knob("block_pool", parse_size, _block_pool_default, "size",
             "bytes of idle dask-block buffers kept for reuse (default: 2 GiB or an eighth of RAM, at least 256 MiB)"),
        Knob("write_attempts", _positive_int, 64, "integer >= 1",
             "conditional attempts to merge into one chunk or shard (or to commit metadata) before WriteConflictError"),
        Knob("append_lease_ttl", parse_seconds, 60.0, "seconds",
             "life of an append lease without renewal (its holder renews it every third of that)"),
        Knob("append_wait", parse_seconds, 600.0, "seconds",
             "how long an append waits for another append's lease before WriteConflictError"),
        Knob("temp_max_age", parse_seconds, 3600.0, "seconds",
             "age after which a killed writer's temporary file is removed"),
        Knob("max_chunk_bytes", _positive_int, 8 << 30, "integer >= 1",
             "largest decoded chunk (or shard) a metadata document may declare (a policy limit, see docs/limits.md)"),
        Knob("max_shard_chunks", _positive_int, 1 << 22, "integer >= 1",
             "most inner chunks per shard a metadata document may declare"),
        Knob("max_requests", _positive_int, 64, "integer >= 1",
             "requests to remote stores (fsspec, S3) in flight at once per process, over all threads and arrays"),
        Knob("remote_transport", _transport, "auto", "auto, fsspec or obstore",
             "what sends reads of `http(s)://`, `s3://`, `gs://` and `az://` stores: `auto` = obstore for S3, GCS, "
             "Azure Blob and HTTP(S) shard reads (indexes, ranges, whole shards; HTTP chunks and documents stay on "
             "fsspec, faster there) where it "
             "is installed and can reproduce the filesystem's requests, else fsspec; "
             "`obstore` = always (an error where it cannot); `fsspec` = never obstore. On a custom GCS endpoint "
             "a key obstore reads as missing is asked of gcsfs until obstore has read a value there: if gcsfs "
             "sees it (fake-gcs-server without `-public-host`), that bucket is read through fsspec, with a "
             "warning"),
        Knob("s3_direct_put", parse_bool, True, "boolean",
             "send chunk and shard uploads to S3 (s3fs) as SigV4-signed requests of our own instead of through "
             "botocore's pipeline (same requests and errors; see zarr_dask/store/s3put.py)"),
        Knob("write_behind", parse_size, 256 << 20, "size",
             "encoded bytes of whole chunks/shards a local dask write to a remote store may still be uploading "
             "while its tasks go on (the write's final task waits for them; 0: upload inside each task)"),
    )
}  # fmt: skip

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


@functools.lru_cache(maxsize=256)
def _parsed(name: str, raw: Any) -> Any:
    return KNOBS[name].parse(raw)


def _dask_value(key: str) -> Any:
    config = sys.modules.get("dask.config")  # never import dask from here
    if config is None:
        return None
    try:
        return config.get(key, None)
    except Exception:  # noqa: BLE001 - a broken dask config must not break reading our own knobs
        return None


def get(name: str) -> Any:
    """The value of knob ``name`` in force now (see the module docstring)."""
    knob = KNOBS[name]
    for source, raw in ((knob.key, _dask_value(knob.key)), (knob.env, os.environ.get(knob.env))):
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue
        try:
            return _parsed(name, raw if isinstance(raw, str | int | float | bool) else str(raw))
        except (ValueError, TypeError):
            with _warned_lock:
                first = (source, str(raw)) not in _warned
                _warned.add((source, str(raw)))
            if first:
                warnings.warn(
                    f"ignoring {source}={raw!r}: expected {knob.form} ({knob.doc}); using the default "
                    f"{knob.default_value()!r}",
                    RuntimeWarning,
                    stacklevel=2,
                )
            break
    return knob.default_value()


def markdown_table() -> str:
    """The knobs as the Markdown table of ``docs/tuning.md`` (a test keeps the two equal)."""
    lines = ["| environment variable | `dask.config` key | value | default | what it does |", "|---|---|---|---|---|"]
    for k in KNOBS.values():
        default = "computed" if callable(k.default) else f"`{k.default!r}`"
        lines.append(f"| `{k.env}` | `{k.key}` | {k.form} | {default} | {k.doc} |")
    return "\n".join(lines)
