"""The zarr_dask exception tree.

Every error raised by zarr_dask derives from :class:`ZarrDaskError` and mixes in the builtin exception that
fits (a missing array is a ``FileNotFoundError``, bad metadata a ``ValueError``...), so callers can catch
either.  Messages say *which store*, *which node*, *what value* and *how to fix it*::

    store 'file:///data/x.zarr', node 'temp': unknown codec 'foo' in 'codecs' (...); install ... or ...

Low layers (``spec``, ``codecs``) do not know the store; they raise with the problem only and the layer that
does know (``core``) adds the context with :meth:`ZarrDaskError.with_context` before re-raising.

Examples
--------
>>> import zarr_dask
>>> try:
...     zarr_dask.open_array("memory://doc-errors-nothing-here", mode="r")
... except FileNotFoundError as e:  # or zarr_dask.errors.ArrayNotFoundError / NodeNotFoundError
...     print(type(e).__name__, isinstance(e, zarr_dask.errors.ZarrDaskError))
ArrayNotFoundError True
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArrayNotFoundError",
    "BucketNotFoundError",
    "ChunkDecodeError",
    "ChunkEncodeError",
    "ContainsArrayError",
    "ContainsGroupError",
    "DataTypeError",
    "FencedWriteError",
    "HierarchyConflictError",
    "FillValueError",
    "GroupNotFoundError",
    "IndexingError",
    "InvalidArgumentError",
    "InvalidModeError",
    "InvalidPathError",
    "MetadataError",
    "NodeExistsError",
    "NodeNotFoundError",
    "NonMonotonicCoordinateWarning",
    "ReadOnlyError",
    "ResumeInputsChangedError",
    "ShapeMismatchError",
    "StoreAccessDeniedError",
    "StoreCredentialsError",
    "StoreError",
    "StoreThrottledError",
    "UnknownCodecError",
    "UnknownExtensionError",
    "UnprotectedWriteWarning",
    "UnsafeCodecError",
    "UnsupportedFeatureError",
    "VariableNotFoundError",
    "WriteConflictError",
    "WritePlanError",
    "ZarrDaskError",
]


class ZarrDaskError(Exception):
    """Base class of every zarr_dask error.

    Parameters
    ----------
    problem
        What is wrong and, where possible, how to fix it.
    store, path
        The store URL and the node path (``""`` for the root), when known.

    Examples
    --------
    >>> e = MetadataError("'shape' must be a list", store="memory://x", path="a")
    >>> str(e)
    "store 'memory://x', node '/a': 'shape' must be a list"
    >>> isinstance(e, ValueError), e.problem
    (True, "'shape' must be a list")
    """

    def __init__(self, problem: str, *, store: str | None = None, path: str | None = None) -> None:
        self.problem = problem
        self.store = store
        self.path = path
        super().__init__(problem)

    def with_context(self, *, store: str | None = None, path: str | None = None) -> ZarrDaskError:
        """Fill in the store URL / node path if not already known; returns ``self`` (for ``raise``)."""
        if self.store is None and store is not None:
            self.store = store
        if self.path is None and path is not None:
            self.path = path
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        where = []
        if self.store is not None:
            where.append(f"store {self.store!r}")
        if self.path is not None:
            where.append(f"node {('/' + self.path) if self.path else '/'!r}")
        return (", ".join(where) + ": " + self.problem) if where else self.problem

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (type(self), self.problem, self.store, self.path))


def _rebuild(cls: type[ZarrDaskError], problem: str, store: str | None, path: str | None) -> ZarrDaskError:
    return cls(problem, store=store, path=path)


class MetadataError(ZarrDaskError, ValueError):
    """A metadata document is not valid JSON, misses a required field or has a field of the wrong type."""


class UnknownExtensionError(MetadataError):
    """Metadata names an extension (data type, grid, key encoding, codec, field) we must understand but don't."""


class UnknownCodecError(UnknownExtensionError):
    """A codec id / name that is not known (or not allowed) here."""


class UnsafeCodecError(ZarrDaskError, ValueError):
    """A codec that can run code or build arbitrary objects on decode (pickle & co.) without an opt-in."""


class DataTypeError(MetadataError, TypeError):
    """A data type that is invalid or not supported."""


class FillValueError(MetadataError):
    """A fill value that cannot be represented in the array's data type."""


class InvalidPathError(ZarrDaskError, ValueError):
    """A node path or name that is not allowed (``..``, ``__x``, control characters, ...)."""


class InvalidArgumentError(ZarrDaskError, TypeError):
    """An argument of the wrong kind (``out=`` that is not an array, say); a ``TypeError``."""


class InvalidModeError(ZarrDaskError, ValueError):
    """A ``mode`` argument that is not one of the modes the function accepts (``"R"``, ``"rw"``, ``"x"``...)."""


class NodeNotFoundError(ZarrDaskError, FileNotFoundError):
    """No array or group at that path."""


class ArrayNotFoundError(NodeNotFoundError):
    """No array at that path."""


class GroupNotFoundError(NodeNotFoundError):
    """No group at that path."""


class NodeExistsError(ZarrDaskError, FileExistsError):
    """A node already exists where a new one was to be created."""


class ContainsArrayError(NodeExistsError):
    """An array already exists at that path."""


class HierarchyConflictError(NodeExistsError):
    """Existing nodes differ from a :mod:`zarr_dask.zom` spec being written (nothing was written);
    ``conflicts`` lists them as a :class:`zarr_dask.zom.Diff` with ``left`` = existing and ``right`` = new."""

    def __init__(
        self, problem: str, *, store: str | None = None, path: str | None = None, conflicts: Any = None
    ) -> None:
        super().__init__(problem, store=store, path=path)
        self.conflicts = conflicts

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_conflict, (self.problem, self.store, self.path, self.conflicts))


def _rebuild_conflict(problem: str, store: str | None, path: str | None, conflicts: Any) -> HierarchyConflictError:
    return HierarchyConflictError(problem, store=store, path=path, conflicts=conflicts)


class ContainsGroupError(NodeExistsError):
    """A group already exists at that path."""


class ChunkDecodeError(ZarrDaskError, ValueError):
    """Stored chunk bytes that cannot be decoded (truncated, wrong size, bad checksum, corrupt)."""


class ChunkEncodeError(ZarrDaskError, ValueError):
    """Data that cannot be encoded with the array's codecs."""


class IndexingError(ZarrDaskError, IndexError):
    """An index/selection that does not fit the array."""


class ShapeMismatchError(ZarrDaskError, ValueError):
    """A value written into a selection (or appended) whose shape does not broadcast to the selection's shape;
    a ``ValueError``, as NumPy and zarr-python raise there."""


class VariableNotFoundError(ZarrDaskError, KeyError):
    """A write names a variable the dataset does not have (an ``encoding`` key with a typo, say); a
    ``KeyError`` as xarray raises there, with the names the dataset has and the closest one."""


class ReadOnlyError(ZarrDaskError, PermissionError):
    """A write was attempted on a store or array opened read-only."""


class StoreError(ZarrDaskError, OSError):
    """The storage backend failed (I/O error, permission, network)."""


class BucketNotFoundError(StoreError):
    """The bucket or container of a remote store does not exist (or the credentials cannot see it): nothing
    was written. Never reported as a missing node, an existing one or a lost race."""


class StoreCredentialsError(StoreError):
    """The storage service did not accept the credentials (missing, wrong or expired)."""


class StoreAccessDeniedError(StoreError):
    """The storage service denied a request: the credentials lack the permission for it."""


class StoreThrottledError(StoreError):
    """The storage service kept throttling the requests (S3 ``SlowDown``, HTTP 429, Azure ``ServerBusy``)
    through every retry."""


class WritePlanError(ZarrDaskError, ValueError):
    """A parallel write that cannot be planned safely (names the array, the key or blocks, and the fix)."""


class WriteConflictError(WritePlanError):
    """A conditional write kept losing to other writers of the same key (or the same array document) after
    every retry, or an append found the array changed in a way it cannot build on; nothing of this write is
    visible to readers in a half-done state (names the key, the attempts and the fix)."""


class FencedWriteError(WriteConflictError):
    """A writer lost its append lease (it stalled past the lease's time to live and another writer took it
    over) and was refused by the store before it could change anything that writer committed: its rows are
    not committed, nothing of others was changed (see ``docs/safe-writes.md``, "Writers that stall")."""


class ResumeInputsChangedError(WritePlanError):
    """A named resumable run (``resume="name"``) found its journal, but what it reads changed since that run
    started (a source array rewritten): its receipts vouch for other inputs (names the source, the run and the
    fix: ``overwrite=True`` starts over, or another run name; see ``docs/safe-writes.md``, "When a write dies")."""


class UnprotectedWriteWarning(UserWarning):
    """A write merges data into storage keys on a store that cannot make conditional writes, so another,
    independent writer of the same keys at the same moment could lose data (see ``docs/safe-writes.md``)."""


class FillValueWarning(UserWarning):
    """A fill value that another implementation reads differently: zarr_dask reads it as the spec says, and the
    message names the other reading and the unambiguous spelling to write instead (docs/formats.md)."""


class NonMonotonicCoordinateWarning(UserWarning):
    """An append along a dimension made its index coordinate (the 1-D coordinate named like the dimension)
    non-monotonic: selections by label (``sel``, slicing) on that dimension no longer work as expected (names
    the store, the variable, the last value stored before the append and the first one appended)."""


class UnsupportedFeatureError(ZarrDaskError, NotImplementedError):
    """A valid request that this version of zarr_dask cannot carry out yet."""
