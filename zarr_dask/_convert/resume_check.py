"""Why a resumed conversion cannot finish what is at the destination: which option differs from the
interrupted run's, with the values on both sides, spelled as the caller spells options (``chunks=`` from
Python, ``--chunks`` from the ``zarr-dask convert`` command: :func:`cli_spelling`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any, Literal

from zarr_dask.core import nodes
from zarr_dask.errors import HierarchyConflictError
from zarr_dask.spec import ArrayMetadata
from zarr_dask.spec.paths import join_path
from zarr_dask.store import Store

__all__ = ["cli_spelling", "resume_conflict", "spell"]

_SPELLING: ContextVar[Literal["api", "cli"]] = ContextVar("zarr_dask_convert_spelling", default="api")

#: option -> (its spelling in zarr_dask.convert, its flag in zarr-dask convert)
_OPTIONS = {
    "chunks": ("chunks=", "--chunks"),
    "shards": ("shards=", "--shards"),
    "compressors": ("compressors=", "--compressor"),
    "zarr_format": ("zarr_format=", "--zarr-format"),
    "overwrite": ("mode='w'", "--overwrite"),
    "resume": ("mode='resume'", "--resume"),
}


@contextlib.contextmanager
def cli_spelling() -> Iterator[None]:
    """Within it, conversion messages name the command's flags (``--chunks``) instead of the arguments."""
    token = _SPELLING.set("cli")
    try:
        yield
    finally:
        _SPELLING.reset(token)


def spell(option: str) -> str:
    """``"chunks"`` -> ``"chunks="`` (or ``"--chunks"`` under :func:`cli_spelling`).

    Examples
    --------
    >>> spell("chunks")
    'chunks='
    >>> with cli_spelling():
    ...     spell("chunks"), spell("overwrite")
    ('--chunks', '--overwrite')
    """
    api, cli = _OPTIONS[option]
    return cli if _SPELLING.get() == "cli" else api


def _sizes(option: str, sizes: Sequence[int] | None, meta: ArrayMetadata, other: Sequence[int] | None) -> str:
    """How to ask for ``sizes`` again, by dimension name and only where they differ from ``other`` (the
    other side): ``--chunks time=10`` / ``chunks='time=10'``."""
    if sizes is None:
        value = "none"
    else:
        names = getattr(meta, "dimension_names", None) or meta.attributes.get("_ARRAY_DIMENSIONS") or ()
        keys = [str(n) if n else str(i) for i, n in enumerate(names)] if len(names) == len(sizes) else None
        keys = keys or [str(i) for i in range(len(sizes))]
        pick = [i for i in range(len(sizes)) if other is None or len(other) != len(sizes) or other[i] != sizes[i]]
        value = ",".join(f"{keys[i]}={sizes[i]}" for i in pick)
    return f"{spell(option)} {value}" if _SPELLING.get() == "cli" else f"{spell(option)}{value!r}"


def _compressors(meta: ArrayMetadata) -> Any:
    from zarr_dask._convert.target import _split_codecs

    if meta.zarr_format == 2:
        return meta.compressor
    codecs = list(meta.codecs)
    if codecs and codecs[0].get("name") == "sharding_indexed":
        codecs = list(codecs[0].get("configuration", {}).get("codecs", []))
    found = _split_codecs(codecs)[2]
    return found[0] if len(found) == 1 else found or None


def _compressor(meta: ArrayMetadata) -> str:
    value = _compressors(meta)
    text = "none" if value is None else json.dumps(value, separators=(",", ":"))
    return f"{spell('compressors')} '{text}'" if _SPELLING.get() == "cli" else f"{spell('compressors')}{text}"


def option_differences(old: Any, new: ArrayMetadata) -> list[tuple[str, str, str]]:
    """``(option, stored, asked)`` for each conversion option on which the stored node ``old`` (metadata or
    None) differs from the target ``new``, each value spelled as the option that asks for it; ``("other",
    ...)`` for a difference no option makes."""
    from zarr_dask._convert.target import inner_chunks, shard_shape

    if old is None or not nodes.is_array(old):
        return [("other", "a group" if old is not None else "nothing", "an array")]
    if old.zarr_format != new.zarr_format:
        return [("zarr_format", _flag("zarr_format", old.zarr_format), _flag("zarr_format", new.zarr_format))]
    out = []
    if inner_chunks(old) != inner_chunks(new):
        old_chunks, new_chunks = inner_chunks(old), inner_chunks(new)
        out.append(("chunks", _sizes("chunks", old_chunks, old, new_chunks), _sizes("chunks", new_chunks, new, old_chunks)))
    if shard_shape(old) != shard_shape(new):
        old_shards, new_shards = shard_shape(old), shard_shape(new)
        out.append(("shards", _sizes("shards", old_shards, old, new_shards), _sizes("shards", new_shards, new, old_shards)))
    if _compressors(old) != _compressors(new):
        out.append(("compressors", _compressor(old), _compressor(new)))
    if old.shape != new.shape or old.data_type != new.data_type:
        out.append(("other", f"shape {old.shape} of {old.data_type}", f"shape {new.shape} of {new.data_type}"))
    return out


def _flag(option: str, value: Any) -> str:
    return f"{spell(option)} {value}" if _SPELLING.get() == "cli" else f"{spell(option)}{value!r}"


def resume_conflict(e: HierarchyConflictError, store: Store, root: str, targets: dict[str, Any]) -> HierarchyConflictError:
    """The error of a resumed conversion whose destination's metadata differs from what these options write
    (``e``: :meth:`GroupSpec.to_store`'s; ``targets``: relative path -> target ArraySpec): which option
    differs, for which arrays, what is stored (spelled as the option that asks for it) and the fixes."""
    found: dict[str, dict[tuple[str, str], list[str]]] = {}
    paths = sorted({d.path.lstrip("/") for d in (e.conflicts or ())})
    for rel in paths:
        target = targets.get(rel)
        old = nodes.read_node(store, join_path(root, rel))
        differences = option_differences(old, target.metadata) if target is not None else []
        for option, stored, asked in differences or [("other", "other metadata", "this")]:
            found.setdefault(option, {}).setdefault((stored, asked), []).append(f"/{rel}")
    said = []
    for option, values in found.items():
        what = "the source changed since the interrupted run" if option == "other" else f"{spell(option)} differs"
        rows = [f"{_names(where)} {'is' if len(where) == 1 else 'are'} stored with {stored}, these options give {asked}"
                for (stored, asked), where in values.items()]  # fmt: skip
        said.append(f"{what}: {'; '.join(rows)}")
    fix = f"run {spell('resume')} with the interrupted run's options (as stored), or " if set(found) - {"other"} else ""
    return HierarchyConflictError(
        f"cannot resume this conversion: {len(paths)} node(s) at the destination were written with other "
        f"options, so nothing was written. {'. '.join(said)}. Fix: {fix}start over with {spell('overwrite')} "
        "(this deletes what is at the destination). What differs:\n" + str(e.conflicts),
        store=store.url,
        path=root,
        conflicts=e.conflicts,
    )


def _names(paths: Sequence[str]) -> str:
    return ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
