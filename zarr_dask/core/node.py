"""What arrays and groups share: where they are (store, path, names), their format, read-only flag and the
write-through :class:`Attributes` mapping. :class:`~zarr_dask.core.array.Array` and
:class:`~zarr_dask.core.group.Group` derive from :class:`Node`.

Examples
--------
>>> import zarr_dask
>>> g = zarr_dask.create_group("memory://node-doc", overwrite=True)
>>> a = g.create_array("t/x", shape=(2,), dtype="i1")
>>> a.name, a.basename, a.zarr_format, isinstance(a, Node) and isinstance(g, Node)
('/t/x', 'x', 3, True)
>>> a.attrs["units"] = "m"; dict(a.attrs)
{'units': 'm'}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Literal

from zarr_dask.store import Store

__all__ = ["Attributes", "Node"]


class Attributes(MutableMapping[str, Any]):
    """User attributes of a node; every change is written through to the store at once."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def _attrs(self) -> dict[str, Any]:
        return dict(self._node.metadata.attributes)

    def __getitem__(self, key: str) -> Any:
        return self._attrs()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs())

    def __len__(self) -> int:
        return len(self._attrs())

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        attrs = self._attrs()
        del attrs[key]
        self._node._set_attributes(attrs)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        attrs = self._attrs()
        attrs.update(dict(other), **kwargs)
        self._node._set_attributes(attrs)

    def put(self, attributes: Mapping[str, Any]) -> None:
        """Replace all attributes."""
        self._node._set_attributes(dict(attributes))

    def asdict(self) -> dict[str, Any]:
        return self._attrs()

    def __repr__(self) -> str:
        return repr(self._attrs())


class Node:
    """A node of a hierarchy in a store: subclasses set ``_store`` and ``_path``, give their ``metadata`` and
    write new attributes in ``_set_attributes``."""

    _store: Store
    _path: str

    @property
    def metadata(self) -> Any:
        raise NotImplementedError

    def _set_attributes(self, attributes: dict[str, Any]) -> None:
        raise NotImplementedError

    @property
    def store(self) -> Store:
        return self._store

    @property
    def path(self) -> str:
        return self._path

    @property
    def name(self) -> str:
        return "/" + self._path

    @property
    def basename(self) -> str:
        return self._path.rsplit("/", 1)[-1]

    @property
    def zarr_format(self) -> Literal[2, 3]:
        fmt: Literal[2, 3] = self.metadata.zarr_format
        return fmt

    @property
    def attrs(self) -> Attributes:
        return Attributes(self)

    @property
    def read_only(self) -> bool:
        return self._store.read_only
