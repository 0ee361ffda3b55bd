"""What ``--chunks`` / ``--shards`` name, checked against the selected arrays, and the layout changes a
conversion makes on its own (:class:`LayoutChange`).

A per-dimension option (``{"time": 24}``, ``"time=24,0=5"``) applies to every selected array that has the
dimension (by name) or the axis (by number). A key that matches no dimension of any selected array is a
typo that would otherwise copy everything with the old layout, so :func:`check_dimension_keys` refuses it,
listing the dimension names and axes there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zarr_dask.errors import MetadataError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3

__all__ = ["LayoutChange", "check_dimension_keys"]

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3


def _quote(keys: Sequence[str | int]) -> str:
    """``'time', axis 7``: names quoted, axes numbered."""
    return ", ".join(repr(k) if isinstance(k, str) else f"axis {k}" for k in keys)


def _unknown(spec: object, names: set[str], ndim: int) -> list[str | int]:
    """The keys of a per-dimension mapping that match no dimension name and no axis."""
    if not isinstance(spec, Mapping):
        return []
    return [k for k in spec if not (k in names if isinstance(k, str) else 0 <= int(k) < ndim)]


def check_dimension_keys(arrays: Sequence[tuple[str, ArrayMetadata]], options: Mapping[str, object]) -> None:
    """Refuse ``chunks`` / ``shards`` keys (``options``: option name -> parsed value) that match no
    dimension name or axis of any of ``arrays`` (``(path, metadata)`` pairs); nothing to check without
    arrays.

    Examples
    --------
    >>> from zarr_dask.core.create import build_array_metadata
    >>> meta = build_array_metadata(shape=(4, 5), dtype="f4", zarr_format=3, chunks=(2, 5),
    ...                             dimension_names=["time", "x"])
    >>> check_dimension_keys([("t", meta)], {"chunks": {"time": 2, 1: 5}})
    >>> check_dimension_keys([("t", meta)], {"chunks": {"tim": 2}})
    Traceback (most recent call last):
    ...
    zarr_dask.errors.MetadataError: --chunks 'tim' matches no dimension of the selected array (/t): its dimension names are 'time', 'x' and its axes 0 to 1; ...
    """
    if not arrays:
        return
    names: list[str] = []  # in the order of the arrays with most dimensions first ('time', 'lat', 'lon')
    for _, meta in sorted(arrays, key=lambda item: -len(item[1].shape)):
        names += [n for n in meta.dimension_names or () if n is not None and n not in names]
    ndim = max(len(meta.shape) for _, meta in arrays)
    problems = [(what, bad) for what, spec in options.items() if (bad := _unknown(spec, set(names), ndim))]
    if not problems:
        return
    which = (f"selected array (/{arrays[0][0]})" if len(arrays) == 1
             else f"{len(arrays)} selected arrays")  # fmt: skip
    own = "its" if len(arrays) == 1 else "their"
    have = (f"{own} dimension names are {_quote(names)} and {own} axes" if names
            else f"{'it has' if len(arrays) == 1 else 'they have'} no dimension names; {own} axes are")  # fmt: skip
    keys = "; ".join(f"--{what} {_quote(bad)}" for what, bad in problems)
    verb = "matches" if sum(len(bad) for _, bad in problems) == 1 else "match"
    raise MetadataError(
        f"{keys} {verb} no dimension of the {which}: {have} 0 to {ndim - 1}; check the spelling (names are "
        "case-sensitive) or the --include/--exclude selection"
    )


@dataclass(frozen=True, kw_only=True)
class LayoutChange:
    """A layout change a conversion made on its own: inner chunks that were kept (not given) shrink to the
    greatest common divisor of their size and the asked shard size, so that they divide the shards.

    Attributes
    ----------
    dimension
        The dimension name, or the axis when the array has no name for it.
    kept
        The chunk size the array had (and would have kept).
    shard
        The shard size asked for.
    used
        The inner chunk size written (``gcd(kept, shard)``).
    """

    dimension: str | int
    kept: int
    shard: int
    used: int

    def __str__(self) -> str:
        dim = f"{self.dimension!r}" if isinstance(self.dimension, str) else f"axis {self.dimension}"
        opt = self.dimension if isinstance(self.dimension, str) else str(self.dimension)
        return (
            f"inner chunks along {dim} reduced from {self.kept} to {self.used} so that they divide the shards of "
            f"{self.shard} ({self.kept // self.used}x more chunks); give --chunks {opt}=N with N dividing "
            f"{self.shard}, or shards that are a multiple of {self.kept}"
        )

    def to_json(self) -> dict[str, str | int]:
        return {"dimension": self.dimension, "kept": self.kept, "shard": self.shard, "used": self.used}
