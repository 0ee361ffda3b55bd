"""What every part of the ZOM shares without importing the model: the tree protocol (a group has ``members``,
an array does not), depth-first iteration, and the port through which the pure model reaches storage.

The model (:mod:`zarr_dask.zom.model`, :mod:`zarr_dask.zom.array`) does no I/O and imports no module that
does: its ``from_store`` / ``to_store`` methods go through :func:`port`, to which :mod:`zarr_dask.zom.io`
and :mod:`zarr_dask.zom.write` connect their functions when they are imported (``import zarr_dask.zom``
imports both). So the modules of ``zom/`` import one another without a cycle.

Examples
--------
>>> from zarr_dask.zom import GroupSpec
>>> [path for path, _ in iter_nodes(GroupSpec(members={"a": GroupSpec(members={"b": GroupSpec()})}))]
['', 'a', 'a/b']
>>> is_group(GroupSpec()), sorted(_PORT)
(True, ['read_array', 'read_group', 'read_node', 'write_spec'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["WriteReport", "connect", "is_group", "iter_nodes", "port"]


def is_group(node: Any) -> bool:
    """True for a group node (it has ``members``, possibly None), False for an array node."""
    return hasattr(node, "members")


def iter_nodes(node: Any, prefix: str = "", *, flat: bool = False) -> Iterator[tuple[str, Any]]:
    """Depth-first ``(path, node)`` pairs, parents first (``flat``: groups with ``members=None``)."""
    if not is_group(node):
        yield prefix, node
        return
    yield prefix, (dataclasses.replace(node, members=None) if flat else node)
    for name, child in (node.members or {}).items():
        yield from iter_nodes(child, f"{prefix}/{name}" if prefix else name, flat=flat)


@dataclass(frozen=True, kw_only=True)
class WriteReport:
    """What :func:`write_spec` did.

    Attributes
    ----------
    store, path
        Where the hierarchy was written.
    written
        The store keys written (each exactly once), sorted.
    created, unchanged, replaced
        Node paths: new nodes, nodes that were already as specified (not written), and nodes that differed and
        were replaced (``overwrite=True``).
    """

    store: str
    path: str
    written: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """True if anything was written or deleted."""
        return bool(self.written or self.replaced)


_PORT: dict[str, Callable[..., Any]] = {}


def connect(**functions: Callable[..., Any]) -> None:
    """Connect I/O functions to the port (called by :mod:`zarr_dask.zom.io` and :mod:`zarr_dask.zom.write`)."""
    _PORT.update(functions)


def port(name: str) -> Callable[..., Any]:
    """The I/O function connected as ``name`` (``read_node``, ``read_group``, ``read_array``, ``write_spec``)."""
    try:
        return _PORT[name]
    except KeyError:  # only if zarr_dask.zom's own __init__ did not run, which Python does not allow
        raise RuntimeError(f"zarr_dask.zom's I/O {name!r} is not connected; import zarr_dask.zom") from None
