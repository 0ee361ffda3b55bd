"""zarr-python's indexing API on :class:`~zarr_dask.core.array.Array`: ``oindex``, ``vindex``, ``blocks`` and the
``get_*_selection`` / ``set_*_selection`` methods (a mixin, so ``array.py`` keeps to storage and metadata).

Parsing lives in :mod:`zarr_dask.core.indexing_fancy`, chunk IO in :mod:`zarr_dask.core.indexing_tiles`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_dask.core import indexing_fancy as fancy
from zarr_dask.core import indexing_tiles as tiles
from zarr_dask.errors import (
    IndexingError,
    InvalidArgumentError,
    MetadataError,
    ReadOnlyError,
    ShapeMismatchError,
    ZarrDaskError,
)
from zarr_dask.spec.ml_types import cast_values

if TYPE_CHECKING:
    from zarr_dask.core.chunk_io import ChunkIO
    from zarr_dask.store import Store


class OIndex:
    """``array.oindex[...]``: orthogonal (outer) indexing, each dimension selected independently.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://doc-oindex", shape=(4, 5), dtype="i4", chunks=(2, 2))
    >>> a[:] = np.arange(20).reshape(4, 5)
    >>> a.oindex[[3, 0], [True, False, False, False, True]]
    array([[15, 19],
           [ 0,  4]], dtype=int32)
    """

    def __init__(self, array: SelectionMixin) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Any:
        return self._array.get_orthogonal_selection(self._array._materialize(selection))

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._array.set_orthogonal_selection(self._array._materialize(selection), value)


class VIndex:
    """``array.vindex[...]``: coordinate (vectorized) indexing, or a boolean mask of the array's shape.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://doc-vindex", shape=(4, 5), dtype="i4", chunks=(2, 2))
    >>> a[:] = np.arange(20).reshape(4, 5)
    >>> a.vindex[[3, 0], [1, 4]]
    array([16,  4], dtype=int32)
    >>> a.vindex[np.arange(20).reshape(4, 5) % 7 == 0]
    array([ 0,  7, 14], dtype=int32)
    """

    def __init__(self, array: SelectionMixin) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Any:
        return self._array.get_coordinate_selection(self._array._materialize(selection))

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._array.set_coordinate_selection(self._array._materialize(selection), value)


class BlockIndex:
    """``array.blocks[...]``: whole storage units (shards if sharded, else chunks) by their grid position.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> a = zarr_dask.create_array("memory://doc-blocks", shape=(5,), dtype="i4", chunks=(2,))
    >>> a[:] = np.arange(5)
    >>> a.blocks[-1], a.blocks[:2]
    (array([4], dtype=int32), array([0, 1, 2, 3], dtype=int32))
    """

    def __init__(self, array: SelectionMixin) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Any:
        return self._array.get_block_selection(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._array.set_block_selection(selection, value)


class SelectionMixin:
    """The selection methods of zarr-python's ``Array`` (what ``Array[...]`` dispatches to)."""

    _store: Store
    _path: str

    @property
    def _io(self) -> ChunkIO:  # pragma: no cover - overridden by Array
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:  # pragma: no cover - overridden by Array
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype[Any]:  # pragma: no cover - overridden by Array
        raise NotImplementedError

    def get_basic_selection(self, selection: Any = Ellipsis, *, out: Any = None) -> Any:  # pragma: no cover
        raise NotImplementedError

    def set_basic_selection(self, selection: Any, value: Any) -> None:  # pragma: no cover - defined by Array
        raise NotImplementedError

    # ------------------------------------------------------------------ dispatch
    def _materialize(self, selection: Any) -> Any:
        """A zarr_dask ``Array`` used as an index (the whole selection or one item of it) read into NumPy, as
        zarr-python does; it must hold integers or booleans."""
        if isinstance(selection, tuple):
            return tuple(self._materialize_one(s) for s in selection)
        return self._materialize_one(selection)

    def _materialize_one(self, item: Any) -> Any:
        if not isinstance(item, SelectionMixin):
            return item
        if item.dtype.kind not in "iub":
            raise IndexingError(
                f"an array used as an index must hold integers or booleans, got dtype {item.dtype}",
                store=self._store.url,
                path=self._path,
            )
        return np.asarray(item.get_basic_selection(Ellipsis))

    def _selection_kind(self, selection: Any) -> str:
        try:
            return fancy.classify(selection, len(self.shape)) if self.shape else "basic"
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None

    def __getitem__(self, selection: Any) -> Any:
        """Read a selection, as zarr-python's ``Array.__getitem__`` dispatches it: integer arrays (or a boolean
        mask of the array's shape) in every dimension → :attr:`vindex`; one integer or boolean array among
        integers and slices, or one array per dimension with a boolean one → :attr:`oindex`; else basic
        indexing (integers, slices with any step, ``...``)."""
        selection = self._materialize(selection)
        kind = self._selection_kind(selection)
        if kind == "vindex":
            return self.get_coordinate_selection(selection)
        if kind == "oindex":
            return self.get_orthogonal_selection(selection)
        return self.get_basic_selection(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        """Write ``value`` (broadcast to the selection's shape) into a selection (dispatched as reads are)."""
        selection = self._materialize(selection)
        kind = self._selection_kind(selection)
        if kind == "vindex":
            self.set_coordinate_selection(selection, value)
        elif kind == "oindex":
            self.set_orthogonal_selection(selection, value)
        else:
            self.set_basic_selection(selection, value)

    @property
    def oindex(self) -> OIndex:
        """Orthogonal (outer) indexing: integers, slices, integer arrays and boolean arrays per dimension."""
        return OIndex(self)

    @property
    def vindex(self) -> VIndex:
        """Coordinate (vectorized) indexing: integer arrays broadcast together, or a boolean mask."""
        return VIndex(self)

    @property
    def blocks(self) -> BlockIndex:
        """Block indexing: integers and unit-step slices over the grid of storage units."""
        return BlockIndex(self)

    # ------------------------------------------------------------------ orthogonal / coordinate / mask
    def _parse(self, parse: Any, selection: Any) -> Any:
        try:
            return parse(selection, self.shape)
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None

    def get_orthogonal_selection(self, selection: Any, *, out: Any = None) -> Any:
        """Read an orthogonal selection (see :attr:`oindex`); reads only the chunks it touches. With ``out``,
        the result is written there (:meth:`_into`)."""
        if not self.shape:
            result = np.asarray(self.get_basic_selection(selection))
        else:
            result = tiles.get_selection(self._io, self._parse(fancy.orthogonal_selection, selection))
        return result if out is None else self._into(out, result)

    def get_coordinate_selection(self, selection: Any, *, out: Any = None) -> Any:
        """Read points (see :attr:`vindex`); reads only the chunks holding them. With ``out``, the result is
        written there (:meth:`_into`)."""
        if not self.shape:
            result = np.asarray(self.get_basic_selection(selection))
        else:
            result = tiles.get_selection(self._io, self._parse(fancy.coordinate_selection, selection))
        return result if out is None else self._into(out, result)

    def get_mask_selection(self, mask: Any, *, out: Any = None) -> Any:
        """Read the elements where the boolean ``mask`` (of the array's shape) is true, in C order."""
        return self.get_coordinate_selection((np.asarray(mask, dtype=bool),), out=out)

    def _into(self, out: Any, result: np.ndarray[Any, Any]) -> Any:
        """Write ``result`` into ``out`` (zarr-python's ``out=``): a NumPy array of the selection's shape, or an
        object whose ``as_ndarray_like()`` is one (zarr-python's ``NDBuffer``); returns ``out``."""
        target = out.as_ndarray_like() if hasattr(out, "as_ndarray_like") else out
        if not isinstance(target, np.ndarray):
            raise InvalidArgumentError(
                f"out= must be a NumPy array (or a zarr-python NDBuffer), got {type(out).__name__}",
                store=self._store.url,
                path=self._path,
            )
        if target.shape != np.shape(result):
            raise ShapeMismatchError(
                f"out= has shape {target.shape}, the selection has shape {np.shape(result)}",
                store=self._store.url,
                path=self._path,
            )
        target[...] = result
        return out

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` into an orthogonal selection (see :attr:`oindex`)."""
        if not self.shape:
            self.set_basic_selection(selection, value)
            return
        self._set(self._parse(fancy.orthogonal_selection, selection), value)

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` at points (see :attr:`vindex`); a repeated point takes the last value."""
        if not self.shape:
            self.set_basic_selection(selection, value)
            return
        self._set(self._parse(fancy.coordinate_selection, selection), value)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Write ``value`` where the boolean ``mask`` (of the array's shape) is true."""
        self.set_coordinate_selection((np.asarray(mask, dtype=bool),), value)

    def _set(self, sel: fancy.OrthogonalSelection | fancy.CoordinateSelection, value: Any) -> None:
        with self._writing(value):
            tiles.set_selection(self._io, sel, as_value(value, self.dtype))

    @contextmanager
    def _writing(self, value: Any) -> Iterator[None]:
        """Around a write of ``value``: refused on a read-only array; errors name the store, node and value."""
        if self._store.read_only:
            raise ReadOnlyError(f"cannot write: the array is read-only; {self._store.read_only_advice}", store=self._store.url, path=self._path)
        try:
            yield
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None
        except (ValueError, TypeError) as e:
            raise MetadataError(
                f"cannot write a value of type {type(value).__name__} into an array of dtype {self.dtype}: {e}",
                store=self._store.url,
                path=self._path,
            ) from None

    # ------------------------------------------------------------------ blocks
    def _block_region(self, selection: Any) -> tuple[slice, ...]:
        try:
            return fancy.block_selection(selection, self._io.grids, self.shape)
        except ZarrDaskError as e:
            raise e.with_context(store=self._store.url, path=self._path) from None

    def get_block_selection(self, selection: Any, *, out: Any = None) -> Any:
        """Read whole storage units by grid position (see :attr:`blocks`)."""
        return self.get_basic_selection(self._block_region(selection), out=out)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write whole storage units by grid position (see :attr:`blocks`)."""
        self.set_basic_selection(self._block_region(selection), value)


def as_value(value: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``value`` as an array of ``dtype`` (object arrays keep their elements, strings stay whole)."""
    if dtype.kind != "O":
        return cast_values(value, dtype)
    if isinstance(value, np.ndarray):
        return value.astype(object) if value.dtype != object else value
    if isinstance(value, str | bytes):
        out = np.empty((), dtype=object)
        out[()] = value
        return out
    return np.asarray(value, dtype=object)
