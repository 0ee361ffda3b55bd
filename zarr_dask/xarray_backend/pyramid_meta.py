"""The pyramid metadata of :func:`zarr_dask.pyramid`, pure: the zarr-conventions ``multiscales`` attribute
(v1, https://github.com/zarr-conventions/multiscales) and OME-Zarr 0.5's ``ome.multiscales``
(https://ngff.openmicroscopy.org/0.5/). Versions and choices: docs/formats.md, "Multiscale pyramids".

Examples
--------
>>> attrs = multiscales_attributes(2, ("y", "x"), 2, "mean")
>>> attrs["multiscales"]["layout"][1]
{'asset': '1', 'derived_from': '0', 'transform': {'scale': [2.0, 2.0], 'translation': [0.0, 0.0]}, 'resampling_method': 'average'}
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from zarr_dask.errors import UnsupportedFeatureError

__all__ = [
    "MULTISCALES_CONVENTION", "carried_attributes", "multiscales_attributes", "ome_attributes", "spatial_for_level",
]  # fmt: skip

#: The ``zarr_conventions`` entry of multiscales v1, exactly as its schema's constants spell it.
MULTISCALES_CONVENTION = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md",
    "uuid": "d35379db-88df-4056-af3a-620245f8e347",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}

#: Our method names as the convention's ``resampling_method`` spells them (GDAL's names).
RESAMPLING = {"mean": "average", "nearest": "nearest", "mode": "mode", "min": "min", "max": "max"}


def multiscales_attributes(count: int, dims: Sequence[Hashable], factor: int, method: str,
                           levels: Sequence[Any] = ()) -> dict[str, Any]:  # fmt: skip
    """The root group's attributes: level ``i`` in child group ``"i"``, derived from ``"i - 1"`` with a scale
    of ``factor`` along each coarsened dimension (in ``dims`` order) and no translation (trimmed windows start
    at the level's first pixel). Given the level datasets, their ``spatial:``/``proj:`` attributes are
    carried: onto the root (with their ``zarr_conventions`` entries) and, per level, ``spatial:transform``
    and ``spatial:shape`` into its layout entry."""
    n = len(dims)
    entries, carried = carried_attributes(levels[0].attrs) if levels else ([], {})
    resampling = RESAMPLING.get(method, method)
    layout: list[dict[str, Any]] = [{"asset": "0", "transform": {"scale": [1.0] * n, "translation": [0.0] * n}}]
    for i in range(1, count):
        layout.append({
            "asset": str(i),
            "derived_from": str(i - 1),
            "transform": {"scale": [float(factor)] * n, "translation": [0.0] * n},
            "resampling_method": resampling,
        })  # fmt: skip
    for entry, level in zip(layout, levels, strict=False):
        entry.update({k: level.attrs[k] for k in ("spatial:transform", "spatial:shape") if k in level.attrs})
    return {
        "zarr_conventions": [dict(MULTISCALES_CONVENTION), *entries],
        "multiscales": {"layout": layout, "resampling_method": resampling},
        **carried,
    }


_TIME = ("t", "time")
_CHANNEL = ("c", "channel", "band")


def _axis(dim: Hashable, dims: Sequence[Hashable]) -> dict[str, str]:
    name = str(dim)
    if dim in dims:
        return {"name": name, "type": "space"}
    if name.lower() in _TIME:
        return {"name": name, "type": "time"}
    if name.lower() in _CHANNEL:
        return {"name": name, "type": "channel"}
    return {"name": name}  # a custom axis: OME-Zarr allows one without a type


def _check_axes(var: str, axes: list[dict[str, str]], where: str) -> None:
    order = {"time": 0, "space": 2}
    ranks = [order.get(a.get("type", ""), 1) for a in axes]
    spaces = sum(a.get("type") == "space" for a in axes)
    if not 2 <= len(axes) <= 5 or not 2 <= spaces <= 3 or ranks != sorted(ranks):
        raise UnsupportedFeatureError(
            f"variable {var!r} has dimensions {[a['name'] for a in axes]}: OME-Zarr 0.5 wants 2 to 5 axes, 2 or 3 "
            "of them coarsened (space), ordered time, channel/other, space; transpose the variable (e.g. "
            "ds.transpose('time', 'band', 'y', 'x')) or use convention='multiscales'", store=where,
        )  # fmt: skip


def _transforms(level: Any, top: Any, dims: Sequence[Hashable], var: Any, step: int) -> list[dict[str, Any]]:
    """Scale and translation from the level's array indices to level 0's coordinates (or pixels when a
    dimension has no regular 1-D coordinate)."""
    scale, translation = [], []
    for d in var.dims:
        if d not in dims:
            scale.append(1.0)
            translation.append(0.0)
        elif d in top.coords and top.sizes[d] > 1 and top[d].dtype.kind in "iuf":
            c0 = top[d].values
            spacing = float(c0[1] - c0[0]) * step
            scale.append(spacing)
            translation.append(float(level[d].values[0]))
        else:
            scale.append(float(step))
            translation.append((step - 1) / 2)  # the window's centre, in level-0 pixels
    return [{"type": "scale", "scale": scale}, {"type": "translation", "translation": translation}]


def ome_attributes(levels: Sequence[Any], dims: Sequence[Hashable], factor: int, method: str,
                   where: str) -> dict[str, Any]:  # fmt: skip
    """OME-Zarr 0.5 ``ome`` attributes: one ``multiscales`` image per data variable holding every coarsened
    dimension, its levels at ``"i/<variable>"``."""
    top = levels[0]
    images = []
    for name, var in top.data_vars.items():
        if not all(d in var.dims for d in dims):
            continue
        axes = [_axis(d, dims) for d in var.dims]
        _check_axes(str(name), axes, where)
        datasets = [
            {"path": f"{i}/{name}", "coordinateTransformations": _transforms(level, top, dims, var, factor**i)}
            for i, level in enumerate(levels)
        ]
        images.append({"name": str(name), "axes": axes, "datasets": datasets, "type": method,
                       "metadata": {"method": "zarr_dask.pyramid", "factor": factor}})  # fmt: skip
    if not images:
        raise UnsupportedFeatureError(
            f"no data variable has all of the dimensions {list(dims)}: OME-Zarr has no image to describe; pass "
            "dims= naming the image's spatial dimensions or use convention='multiscales'", store=where,
        )  # fmt: skip
    return {"ome": {"version": "0.5", "multiscales": images}}


#: The zarr-conventions whose attributes describe every level and are carried onto the pyramid's root.
CARRIED_PREFIXES = ("spatial:", "proj:")


def _spatial_dims(attrs: Mapping[str, Any], dims: Sequence[Hashable]) -> tuple[Hashable, Hashable] | None:
    names = attrs.get("spatial:dimensions", dims)
    return (names[0], names[1]) if len(names) == 2 else None


def spatial_for_level(attrs: Mapping[str, Any], sizes: Mapping[Hashable, int], dims: Sequence[Hashable],
                      step: int) -> dict[str, Any]:  # fmt: skip
    """``attrs`` with ``spatial:transform`` and ``spatial:shape`` (the zarr-conventions ``spatial`` convention)
    made true for a level ``step`` times coarser, whose sizes are ``sizes``; other attributes unchanged.

    The pixel size grows ``step`` times; with ``"pixel"`` registration (the default) the origin (``c``, ``f``:
    the outer corner) stays, as trimmed windows start at the first pixel; with ``"node"`` it moves to the
    centre of the first window.

    Examples
    --------
    >>> spatial_for_level({"spatial:transform": [10.0, 0.0, 500.0, 0.0, -10.0, 900.0], "spatial:shape": [9, 8]},
    ...                   {"y": 4, "x": 4}, ("y", "x"), 2)
    {'spatial:transform': [20.0, 0.0, 500.0, 0.0, -20.0, 900.0], 'spatial:shape': [4, 4]}
    """
    out = dict(attrs)
    names = _spatial_dims(attrs, dims)
    if "spatial:shape" in out and names is not None and all(n in sizes for n in names):
        out["spatial:shape"] = [int(sizes[names[0]]), int(sizes[names[1]])]
    transform = out.get("spatial:transform")
    if isinstance(transform, Sequence) and len(transform) == 6:
        a, b, c, d, e, f = (float(v) for v in transform)
        if out.get("spatial:registration", "pixel") == "node":
            c, f = c + (a + b) * (step - 1) / 2, f + (d + e) * (step - 1) / 2
        out["spatial:transform"] = [a * step, b * step, c, d * step, e * step, f]
    return out


def carried_attributes(attrs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The source's ``spatial:``/``proj:`` attributes and their ``zarr_conventions`` entries (all but a
    multiscales one), for the pyramid's root."""
    entries = [
        dict(c) for c in attrs.get("zarr_conventions", ())
        if isinstance(c, Mapping) and c.get("uuid") != MULTISCALES_CONVENTION["uuid"]
        and str(c.get("name", "")).rstrip(":") in ("spatial", "proj")
    ]  # fmt: skip
    return entries, {k: v for k, v in attrs.items() if k.startswith(CARRIED_PREFIXES)}
