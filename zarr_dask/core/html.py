"""HTML for notebooks (``_repr_html_``) of arrays, groups and ZOM specs: a tree, shapes, chunk/shard layout.

Everything is computed from metadata (no listing, no chunk reads), so rendering a huge hierarchy is cheap.
The renderers take any object with ``metadata`` (an :class:`~zarr_dask.Array` or a ZOM ``ArraySpec``) or
group-like objects (a :class:`~zarr_dask.Group` or a ZOM ``GroupSpec``), so :mod:`zarr_dask.zom` can call them
without this module importing it.

Examples
--------
>>> import zarr_dask
>>> a = zarr_dask.create_array("memory://html-doc", shape=(100, 80), dtype="f4", chunks=(10, 20), shards=(50, 80),
...                            overwrite=True)
>>> html = array_html(a)
>>> "Shards" in html and "<svg" in html and "(100, 80)" in html
True
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from zarr_dask.core.describe import shown_attributes
from zarr_dask.spec.layout import sharding_of

__all__ = ["array_html", "group_html", "record_html", "spec_html"]

_STYLE = (
    "<style>.zd-repr{font-family:monospace;font-size:12px}.zd-repr table{border-collapse:collapse}"
    ".zd-repr th{text-align:left;padding:1px 8px 1px 0;font-weight:bold;vertical-align:top}"
    ".zd-repr td{padding:1px 8px 1px 0}.zd-repr ul{list-style:none;margin:0;padding-left:16px}"
    ".zd-repr .zd-dim{color:#777}</style>"
)
_MAX_LINES = 40
_SIZE = 120


def _e(value: Any) -> str:
    return html.escape(str(value))


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _layout(meta: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None, list[list[int]]]:
    """(chunk shape, shard shape or None, per dimension the unit boundaries)."""
    shape = tuple(meta.shape)
    grids = meta.chunk_grid.dim_grids(shape)
    units = tuple(max((g.size(i) for i in range(g.nchunks())), default=1) for g in grids)
    bounds = [[min(g.start(i), n) for i in range(min(g.nchunks(), _MAX_LINES + 1))] for g, n in zip(grids, shape, strict=True)]
    sharding = sharding_of(meta)
    if sharding is None:
        return units, None, bounds
    return sharding.inner_chunk_shape if sharding.leading else units, units, bounds


def _codecs(meta: Any) -> str:
    codecs = getattr(meta, "codecs", None)
    if codecs is None:
        chain = [*(getattr(meta, "filters", None) or []), *([meta.compressor] if getattr(meta, "compressor", None) else [])]
        return ", ".join(str(c.get("id")) for c in chain) or "none"
    names = []
    for c in codecs:
        name = c.get("name") if isinstance(c, Mapping) else str(c)
        if name == "sharding_indexed":
            layout = sharding_of(meta)
            inner = ", ".join(str(x.get("name")) for x in (layout.inner_codecs if layout else []) if isinstance(x, Mapping))
            name = f"sharding_indexed({inner})"
        names.append(str(name))
    return ", ".join(names)


def _panel(dims: Sequence[int], shape: Sequence[int], bounds: Sequence[Sequence[int]], inner: Sequence[int] | None) -> tuple[str, float, float]:
    """One or two dimensions as a rectangle with the storage units (and inner chunks) drawn in: (svg, w, h)."""
    ext = [shape[d] for d in dims]
    scale = _SIZE / max(ext)
    w, h = (max(ext[-1] * scale, 8), max(ext[0] * scale, 8)) if len(dims) == 2 else (max(ext[0] * scale, 8), 12.0)
    lines = []

    def draw(d: int, positions: Sequence[int], style: str) -> None:
        horizontal = len(dims) == 2 and d == dims[0]
        for p in positions:
            if 0 < p < shape[d]:
                x = p * scale
                lines.append(f'<line x1="0" y1="{x:.1f}" x2="{w:.1f}" y2="{x:.1f}" {style}/>' if horizontal
                             else f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{h:.1f}" {style}/>')  # fmt: skip

    for d in dims:
        if inner is not None and shape[d] // max(inner[d], 1) <= _MAX_LINES:
            draw(d, range(0, shape[d], max(inner[d], 1)), 'stroke="#9ab" stroke-width="0.5"')
        if len(bounds[d]) <= _MAX_LINES:
            draw(d, bounds[d], 'stroke="#246" stroke-width="1.2"')
    rect = f'<rect x="0" y="0" width="{w:.1f}" height="{h:.1f}" fill="#eef3f8" stroke="#246" stroke-width="1.5"/>'
    return rect + "".join(lines), w, h


def _svg(shape: Sequence[int], bounds: Sequence[Sequence[int]], inner: Sequence[int] | None,
         names: Sequence[Any] | None = None) -> str:
    """Every dimension drawn with its storage units (and inner chunks): each leading dimension as a bar, the
    last two as a rectangle, each labelled with its name and length."""
    if not shape or not all(shape):
        return ""
    label = [f"{names[d]}: {n}" if names and names[d] is not None else f"dim {d}: {n}" for d, n in enumerate(shape)]
    ndim = len(shape)
    panels = [[d] for d in range(max(ndim - 2, 0))] + [list(range(ndim))[-2:]]
    parts, y, width = [], 0.0, 0.0
    for dims in panels:
        body, w, h = _panel(dims, shape, bounds, inner)
        text = " × ".join(label[d] for d in dims)
        parts.append(f'<text x="0" y="{y + 10:.1f}" font-size="10" fill="#555">{_e(text)}</text>'
                     f'<g transform="translate(1,{y + 13:.1f})">{body}</g>')  # fmt: skip
        y, width = y + h + 19, max(width, w, 7.0 * len(text))
    return f'<svg width="{width + 2:.0f}" height="{y:.0f}" style="margin:4px">{"".join(parts)}</svg>'


def _array_rows(meta: Any) -> list[tuple[str, str]]:
    shape = tuple(meta.shape)
    dtype = meta.data_type.numpy_dtype
    chunks, shards, _ = _layout(meta)
    nchunks = math.prod(-(-n // c) for n, c in zip(shape, chunks, strict=True)) if all(chunks) else 0
    rows = [("Shape", str(shape)), ("Data type", meta.data_type.label),
            ("Chunks", f"{chunks} ({_human(math.prod(chunks) * dtype.itemsize)} each, {nchunks} in all)")]  # fmt: skip
    if shards is not None:
        nshards = math.prod(-(-n // s) for n, s in zip(shape, shards, strict=True))
        per = math.prod(s // max(c, 1) for s, c in zip(shards, chunks, strict=True))
        size = _human(math.prod(shards) * dtype.itemsize)
        rows.append(("Shards", f"{shards} ({per} chunks per shard, {size} each, {nshards} shards in all)"))
    fill = meta.fill_value
    rows += [("Zarr format", str(meta.zarr_format)), ("Codecs", _codecs(meta)),
             ("Fill value", "null" if fill is None else str(fill[()])),
             ("No. bytes", _human(math.prod(shape) * dtype.itemsize))]  # fmt: skip
    dims = meta.dimension_names
    if dims:
        rows.insert(1, ("Dimensions", ", ".join(str(d) for d in dims)))
    attrs = {k: v for k, v in shown_attributes(meta.attributes, dtype, meta.zarr_format).items() if k != "_ARRAY_DIMENSIONS"}
    if attrs:
        rows.append(("Attributes", json.dumps(attrs, default=str)[:500]))
    return rows


def _fields(rows: Sequence[tuple[str, Any]]) -> str:
    """A two-column table: a name per row, its value."""
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def _head(kind: str, name: str, where: str | None) -> str:
    place = f"<div class='zd-dim'>{_e(where)}</div>" if where else ""
    return f"<b>{_e(kind)} {_e(name)}</b>{place}"


def array_html(node: Any, kind: str = "zarr_dask.Array") -> str:
    """HTML of an array (anything with ``metadata``: a zarr_dask Array or a ZOM ArraySpec)."""
    meta = node.metadata
    chunks, shards, bounds = _layout(meta)
    where = node.store.url if hasattr(node, "store") else None
    svg = _svg(tuple(meta.shape), bounds, chunks if shards is not None else None, meta.dimension_names)
    return (f"{_STYLE}<div class='zd-repr'>{_head(kind, getattr(node, 'name', ''), where)}"
            f"<table><tr><td>{_fields(_array_rows(meta))}</td><td>{svg}</td></tr></table></div>")  # fmt: skip


def record_html(
    kind: str,
    rows: Sequence[tuple[str, Any]],
    *,
    name: str = "",
    where: str | None = None,
    columns: Sequence[str] = (),
    items: Sequence[Sequence[Any]] = (),
    limit: int = 200,
) -> str:
    """HTML of a report object (a write plan, a ledger, a write's result) in the style of the array and group
    reprs: its kind, where it is, a table of ``rows`` and, with ``columns``, a table of ``items`` (at most
    ``limit`` of them shown).

    Examples
    --------
    >>> html = record_html("zarr_dask.Thing", [("action", "create")], where="memory://x",
    ...                    columns=["variable", "action"], items=[("t2m", "append")])
    >>> "<th>action</th><td>create</td>" in html and "<td>t2m</td><td>append</td>" in html
    True
    """
    listing = ""
    if columns:
        head = "".join(f"<th>{_e(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in item) + "</tr>" for item in items[:limit])
        more = f"<tr><td class='zd-dim'>... {len(items) - limit} more</td></tr>" if len(items) > limit else ""
        listing = f"<table><tr>{head}</tr>{body}{more}</table>"
    return f"{_STYLE}<div class='zd-repr'>{_head(kind, name, where)}{_fields(rows)}{listing}</div>"


def _label(name: str, node: Any) -> str:
    if hasattr(node, "metadata") and hasattr(node.metadata, "shape"):
        meta = node.metadata
        chunks, shards, _ = _layout(meta)
        extra = f" chunks {chunks}" + (f" shards {shards}" if shards else "")
        dims = f" ({', '.join(str(d) for d in meta.dimension_names)})" if meta.dimension_names else ""
        return (f"<span title='{_e(_codecs(meta))}'>📄 <b>{_e(name)}</b>{_e(dims)} {_e(tuple(meta.shape))} "
                f"{_e(meta.data_type.label)}<span class='zd-dim'>{_e(extra)}</span></span>")  # fmt: skip
    implicit = " <span class='zd-dim'>(implicit group)</span>" if getattr(node, "implicit", False) else ""
    return f"📁 <b>{_e(name)}</b>{implicit}"


def _members(node: Any) -> list[tuple[str, Any]] | None:
    """Direct members of a Group (by listing or consolidated metadata) or a GroupSpec (None = unknown)."""
    members = getattr(node, "members", None)
    if callable(members):
        return list(members(max_depth=1))
    if members is None:
        return None
    return sorted(members.items())


def _tree(node: Any, depth: int, limit: int) -> str:
    members = _members(node)
    if members is None:
        return "<ul><li class='zd-dim'>(members not read)</li></ul>"
    items = []
    for name, child in members[:limit]:
        is_array = hasattr(getattr(child, "metadata", None), "shape")
        sub = _tree(child, depth - 1, limit) if depth > 1 and not is_array else ""
        items.append(f"<li>{_label(name, child)}{sub}</li>")
    if len(members) > limit:
        items.append(f"<li class='zd-dim'>... {len(members) - limit} more</li>")
    return "<ul>" + "".join(items) + "</ul>"


def group_html(node: Any, kind: str = "zarr_dask.Group", depth: int = 4, limit: int = 50) -> str:
    """HTML of a group (a zarr_dask Group or a ZOM GroupSpec): its attributes and a tree of its members
    (``depth`` levels, at most ``limit`` members per group)."""
    name = getattr(node, "name", "")
    attrs = dict(getattr(node, "attributes", None) or getattr(node, "attrs", {}) or {})
    fmt = getattr(node, "zarr_format", "?")
    head = f"<b>{_e(kind)} {_e(name)}</b> <span class='zd-dim'>Zarr v{_e(fmt)}</span>"
    if getattr(node, "implicit", False):
        head += " <span class='zd-dim'>(implicit group)</span>"
    where = f"<div class='zd-dim'>{_e(node.store.url)}</div>" if hasattr(node, "store") else ""
    attr_html = f"<div>Attributes: {_e(json.dumps(attrs, default=str)[:500])}</div>" if attrs else ""
    return f"{_STYLE}<div class='zd-repr'>{head}{where}{attr_html}{_tree(node, depth, limit)}</div>"


def spec_html(spec: Any) -> str:
    """HTML of a ZOM spec (``ArraySpec`` or ``GroupSpec``)."""
    if hasattr(spec, "metadata") and hasattr(spec.metadata, "shape"):
        return array_html(spec, kind="zarr_dask.zom.ArraySpec")
    return group_html(spec, kind="zarr_dask.zom.GroupSpec")
