"""``zarr-dask validate``: metadata, convention and (``--data``) chunk problems of a hierarchy.

Checks, from one listing of the store and one batched read of every metadata document:

* every document parses, every array's codecs can be built (unknown or unsafe codecs, bad shard shapes);
* no node lies inside an array; nodes of the other Zarr format and groups without a document (implicit
  groups) are reported as warnings (zarr-python does not show them);
* keys under an array that are not chunk keys of its grid (stray or left over after a shrink): warnings; the
  journals of resumable writes not yet published (``zarr-dask ledger``) and append records are named as such;
* index coordinates (1-D arrays named like their dimension) are monotonic: an out-of-order one (e.g. after
  appends from independent writers that landed out of turn) is a warning (label selections on it fail), and
  so is a v2 index coordinate that holds its own fill value (xarray reads those values as missing);
* consolidated metadata matches the nodes' own documents: every stale, missing or extra entry is an error
  (readers that use consolidated metadata see the wrong shape or miss nodes; ``zarr-dask consolidate``
  rebuilds it);
* ``--convention xarray``: :func:`zarr_dask.zom.conventions.xarray`;
* ``--data``: every stored chunk (every shard, with its index) is fetched and decoded; checksums
  (``crc32c``) are verified by decoding.

Errors make the command exit with status 1; warnings do not.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import zarr_dask
from zarr_dask.cli import human, node_arguments, storage_options
from zarr_dask.cli.repository import readable
from zarr_dask.core import nodes
from zarr_dask.core.commit import INCOMPLETE_NAME
from zarr_dask.core.consolidated import compare_consolidated, consolidated_holders, group_without_consolidated
from zarr_dask.core.lease import LEASE_NAME
from zarr_dask.errors import ZarrDaskError
from zarr_dask.spec.paths import key_prefix, normalize_path
from zarr_dask.store import Store, open_store

__all__ = ["Finding", "register", "validate"]

_DOCS = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")
#: Where resumable writes keep their run journals under an array (graph/journal.py's JOURNAL_DIR; the command
#: line does not import the dask engine, and a test keeps the two equal).
JOURNAL_DIR = ".zd-resume"


@dataclass(frozen=True)
class Finding:
    """One problem: where (``"/a/b"``), how bad, what and how to fix it."""

    path: str
    severity: Literal["error", "warning"]
    message: str

    def __str__(self) -> str:
        return f"{self.severity.upper():<7} {self.path}: {self.message}"


def _rel(path: str, root: str) -> str:
    return "/" + path[len(root) :].strip("/") if root else "/" + path


def _parse_nodes(store: Store, root: str, keys: list[str], url: str, out: list[Finding]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Node path -> metadata for every node with documents under ``root``, and the documents read."""
    paths = sorted({k.rpartition("/")[0] for k in keys if k.rpartition("/")[2] in _DOCS})
    docs = store.get_many([k for k in keys if k.rpartition("/")[2] in _DOCS])
    found: dict[str, Any] = {}
    for path in paths:
        own = {k: v for k, v in docs.items() if k.rpartition("/")[0] == path}
        try:
            meta = nodes.parse_node(own, path, store)
        except ZarrDaskError as e:
            meta = group_without_consolidated(own.get(key_prefix(path) + "zarr.json"))
            if meta is None:
                out.append(Finding(_rel(path, root), "error", e.problem))
                continue
            fix = f"zarr-dask consolidate {url}" + (f" --path {path}" if path else "")
            out.append(Finding(_rel(path, root), "error", f"the consolidated metadata does not parse: {e.problem}; "
                               f"rebuild it with '{fix}'"))  # fmt: skip
        if meta is not None:
            found[path] = meta
    return found, docs


def _check_structure(root: str, found: Mapping[str, Any], fmt: int, out: list[Finding]) -> None:
    arrays = [p for p, m in found.items() if nodes.is_array(m)]
    for path, meta in found.items():
        above = [a for a in arrays if path.startswith(a + "/")]
        if above:
            out.append(Finding(_rel(path, root), "error", f"a node inside the array {_rel(above[0], root)}; readers never see it"))
        elif meta.zarr_format != fmt:
            out.append(Finding(_rel(path, root), "warning", f"a Zarr v{meta.zarr_format} node in a v{fmt} hierarchy: "
                               "readers of the hierarchy do not see it; convert it (zarr-dask convert)"))  # fmt: skip
        for parent in _parents(path, root):
            if parent not in found:
                out.append(Finding(_rel(parent, root), "warning", "a group without a metadata document (implicit "
                                   "group): zarr-python and older readers do not show it or what is below it; "
                                   "write a group document (e.g. zarr_dask.create_group) or consolidate"))  # fmt: skip


def _parents(path: str, root: str) -> list[str]:
    parts = path[len(root) :].strip("/").split("/")[:-1]
    base = root
    out = []
    for p in parts:
        base = f"{base}/{p}" if base else p
        out.append(base)
    return out


def _keys_by_array(keys: list[str], arrays: set[str]) -> dict[str, list[str]]:
    """Array path -> the keys below it (each key goes to the nearest array above it), in one pass."""
    out: dict[str, list[str]] = {a: [] for a in arrays}
    for key in keys:
        parts = key.split("/")
        owner = "" if "" in arrays else None
        for i in range(1, len(parts)):
            head = "/".join(parts[:i])
            if head in arrays:
                owner = head
                break
        if owner is not None:
            out[owner].append(key)
    return out


def _stray(meta: Any, prefix: str, keys: list[str]) -> list[str]:
    grid = meta.chunk_grid.grid_shape(meta.shape)
    stray = []
    for key in keys:
        name = key[len(prefix) :]
        if name in _DOCS:
            continue
        try:
            coords = meta.chunk_key_encoding.decode(name)
            ok = len(coords) == len(grid) and all(0 <= c < g for c, g in zip(coords, grid, strict=True))
        except ZarrDaskError:
            ok = False
        if not ok:
            stray.append(name)
    return stray


def _records(url: str, path: str, stray: list[str]) -> tuple[list[str], list[str]]:
    """zarr_dask's own records among the ``stray`` names of the array at ``path`` (run journals of resumable
    writes, append records: never data), described with what to do about them; and the other names."""
    runs: dict[str, bool] = {}  # run id -> done (its ``complete`` record is there)
    named = {LEASE_NAME: "an append lease (an append is running, or died holding it: the next append takes it "
                         "over once it lapses)",
             INCOMPLETE_NAME: "the record of an append whose rows landed but whose consolidated metadata was not "
                              f"updated (appends are refused until 'zarr-dask consolidate {url}' repairs it)"}  # fmt: skip
    seen, rest = [], []
    for name in stray:
        head, _, tail = name.partition("/")
        if head == JOURNAL_DIR and tail:
            run, _, record = tail.partition("/")
            runs[run] = runs.get(run, False) or record == "complete"
        elif name in named:
            seen.append(named[name])
        else:
            rest.append(name)
    if runs:
        done = sum(runs.values())
        where = f"zarr-dask ledger {url}" + (f" --path {path}" if path else "")
        seen.insert(0, f"the journal(s) of {len(runs)} resumable write(s) (resume=True) not published yet ({done} done, "
                       f"{len(runs) - done} partial or still running; e.g. run {min(runs)}): zarr_dask's records of "
                       f"which writer tasks finished, not data. '{where}' lists them; '{where} --publish' deletes "
                       "them once every write is done")  # fmt: skip
    return seen, rest


def _check_arrays(
    store: Store, root: str, found: Mapping[str, Any], keys: list[str], url: str, out: list[Finding]
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    arrays = {p for p, m in found.items() if nodes.is_array(m)}
    by_array = _keys_by_array(keys, arrays)
    opened: dict[str, Any] = {}
    for path in sorted(arrays):
        try:
            opened[path] = zarr_dask.open_array(store, path=path, mode="r")
        except ZarrDaskError as e:
            out.append(Finding(_rel(path, root), "error", e.problem))
            continue
        records, stray = _records(url, path, _stray(found[path], key_prefix(path), by_array[path]))
        out += [Finding(_rel(path, root), "warning", text) for text in records]
        if stray:
            out.append(Finding(_rel(path, root), "warning", f"{len(stray)} key(s) that are not chunks of this array "
                               f"(e.g. {stray[0]!r}): left over after a resize, or foreign files"))  # fmt: skip
    return opened, by_array


def _check_index_coordinates(opened: Mapping[str, Any], root: str, out: list[Finding]) -> None:
    """A warning per index coordinate that is not monotonic (each is read whole: coordinates are small)."""
    from zarr_dask.xarray_backend.monotonic import index_dimension, is_monotonic

    for path, array in opened.items():
        dim = index_dimension(path.rpartition("/")[2], array.metadata)
        if dim is None:
            continue
        try:
            values = array[...]
        except (ZarrDaskError, ValueError, OSError):
            continue  # unreadable data is --data's finding
        if not is_monotonic(values):
            out.append(Finding(_rel(path, root), "warning", f"the index coordinate of dimension {dim!r} is not "
                               "monotonic: label selections (sel, slices) on it do not work as expected; sort the "
                               "dataset (ds.sortby) and rewrite it"))  # fmt: skip
        if (masked := _masked_by_fill_value(array, values)) is not None:
            out.append(Finding(_rel(path, root), "warning", masked))


def _masked_by_fill_value(array: Any, values: Any) -> str | None:
    """Why xarray reads some real values of a v2 index coordinate as missing: its ``fill_value`` (which
    xarray takes as ``_FillValue`` for v2 arrays) equals values it holds, else None."""
    fill = array.metadata.fill_value
    if array.metadata.zarr_format != 2 or fill is None or values.dtype.kind not in "iufc":
        return None
    try:
        hits = int(np.count_nonzero(values == fill))
    except (TypeError, ValueError):
        return None
    if not hits:
        return None
    return (f"its fill_value {np.asarray(fill).item()!r} equals {hits} of its values, and xarray reads a Zarr v2 fill_value as "
            "_FillValue: those coordinate values read back as missing (NaN); rewrite the coordinate with a fill "
            "value it never holds (e.g. NaN for floats), or open with mask_and_scale=False")  # fmt: skip


def _check_consolidated(url: str, root: str, found: Mapping[str, Any], docs: Mapping[str, bytes],
                        store: Store, out: list[Finding]) -> None:  # fmt: skip
    """One error per stale, missing or extra consolidated entry (nodes whose documents do not parse are
    reported already), with the command that fixes it."""
    broken = {f.path for f in out}
    try:
        holders = consolidated_holders(store, found, docs)
    except ZarrDaskError as e:
        out.append(Finding(_rel(root, root), "error", f"the consolidated metadata does not parse: {e.problem}; "
                           f"rebuild it with 'zarr-dask consolidate {url}'"))  # fmt: skip
        return
    for m in compare_consolidated(found, holders):
        where = _rel(m.path, root)
        if m.kind == "extra" and where in broken:
            continue
        fix = f"zarr-dask consolidate {url}" + (f" --path {m.group}" if m.group else "")
        what = {"stale": "stale entry in", "missing": "missing from", "extra": "extra entry in"}[m.kind]
        out.append(Finding(where, "error", f"{what} the consolidated metadata of {_rel(m.group, root)}: {m.detail}. "
                           f"Readers using consolidated metadata see the wrong node; fix: {fix}"))  # fmt: skip


def _check_convention(root: str, found: Mapping[str, Any], fmt: int) -> list[Finding]:
    """xarray's convention on the nodes whose documents parse (the others are errors already: a validator
    reports what it finds, it does not stop at it); nodes inside arrays and of the other format are left out,
    as readers leave them."""
    from zarr_dask.zom import conventions
    from zarr_dask.zom.io import spec_of
    from zarr_dask.zom.model import build_tree

    arrays = [p for p, m in found.items() if nodes.is_array(m) and p != root]
    specs = {
        path[len(root) :].strip("/"): spec_of(meta)
        for path, meta in found.items()
        if meta.zarr_format == fmt and not any(path.startswith(a + "/") for a in arrays)
    }
    top = specs.get("")
    spec = top if top is not None and top.node_type == "array" else build_tree(specs, 3 if fmt == 3 else 2, unknown=set())
    return [Finding(p.path, "error", p.message) for p in conventions.xarray(spec)]


def _check_data(
    opened: Mapping[str, Any], keys: Mapping[str, list[str]], root: str, threads: int, out: list[Finding]
) -> tuple[int, int]:
    """Decode every stored storage unit (``keys``: the listing, per array); returns (units, bytes decoded)."""
    work = []
    for path, array in opened.items():
        meta = array.metadata
        prefix = key_prefix(path)
        grids = meta.chunk_grid.dim_grids(meta.shape)
        for key in keys[path]:
            try:
                coords = meta.chunk_key_encoding.decode(key[len(prefix) :])
            except ZarrDaskError:
                continue
            if len(coords) == len(grids) and all(0 <= c < g.nchunks() for c, g in zip(coords, grids, strict=True)):
                sel = tuple(slice(g.start(c), g.start(c) + g.data_size(c)) for g, c in zip(grids, coords, strict=True))
                work.append((path, array, key, sel))

    def decode(item: tuple[str, Any, str, tuple[slice, ...]]) -> tuple[int, Finding | None]:
        path, array, key, sel = item
        try:
            return int(array[sel].nbytes) if sel else int(array.dtype.itemsize), None
        except (ZarrDaskError, ValueError, OSError) as e:
            return 0, Finding(_rel(path, root), "error", f"key {key!r} cannot be read: {getattr(e, 'problem', e)}")

    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(decode, work))
    out += [f for _, f in results if f is not None]
    return len(work), sum(n for n, _ in results)


def validate(url: Any, *, path: str = "", convention: str | None = None, data: bool = False,
             storage_options: Mapping[str, Any] | None = None, threads: int | None = None) -> tuple[list[Finding], dict[str, Any]]:  # fmt: skip
    """Check the hierarchy at ``url``/``path``; returns the findings and counts (see the module docstring)."""
    store = open_store(url, storage_options=dict(storage_options or {}) or None, read_only=True)
    root = normalize_path(path)
    out: list[Finding] = []
    keys = store.list_prefix(key_prefix(root))
    shown = url if isinstance(url, str) else store.url
    found, docs = _parse_nodes(store, root, keys, shown, out)
    if not found and not out:
        raise zarr_dask.errors.NodeNotFoundError("nothing to validate here (no metadata document below)", store=store.url, path=root)
    fmt = found[root].zarr_format if root in found else min((m.zarr_format for m in found.values()), default=3)
    _check_structure(root, found, fmt, out)
    opened, by_array = _check_arrays(store, root, found, keys, shown, out)
    _check_index_coordinates(opened, root, out)
    _check_consolidated(shown, root, found, docs, store, out)
    if convention == "xarray":
        out += _check_convention(root, found, fmt)
    counts: dict[str, Any] = {"nodes": len(found), "arrays": len(opened)}
    if data:
        t0 = time.perf_counter()
        counts["units_decoded"], counts["bytes_decoded"] = _check_data(opened, by_array, root, threads or os.cpu_count() or 1, out)
        counts["seconds"] = round(time.perf_counter() - t0, 3)
    return out, counts


def _cmd_validate(args: argparse.Namespace) -> int:
    with readable(args.url, storage_options(args.storage_options)) as (source, options):
        findings, counts = validate(source, path=args.path, convention=args.convention, data=args.data,
                                    storage_options=options, threads=args.threads)  # fmt: skip
    errors = sum(f.severity == "error" for f in findings)
    if args.json:
        print(json.dumps({"ok": errors == 0, "counts": counts,
                          "findings": [f.__dict__ for f in findings]}, indent=2))  # fmt: skip
        return 1 if errors else 0
    for f in findings:
        print(f)
    checked = f"{counts['nodes']} node(s), {counts['arrays']} array(s)"
    if "units_decoded" in counts:
        checked += f"; decoded {counts['units_decoded']} stored chunk(s)/shard(s), {human(counts['bytes_decoded'])} in {counts['seconds']} s"
    warnings = len(findings) - errors
    print(f"{'OK' if not errors else 'FAILED'}: {checked}; {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``validate`` to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("validate", parents=[common], help="check metadata, conventions and (--data) every chunk",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    node_arguments(p, repositories=True)
    p.add_argument("--convention", choices=("xarray",), default=None, help="also check a convention")
    p.add_argument("--data", action="store_true", help="fetch and decode every stored chunk (verifies checksums)")
    p.add_argument("--threads", type=int, default=None, help="chunks decoded at once with --data (default: CPUs)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_validate)
