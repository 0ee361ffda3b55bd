"""Copy a Zarr hierarchy somewhere else -- changing its format, chunks, shards and compressors -- in bounded
memory: :func:`convert`, public as ``zarr_dask.convert`` (this package is internal; the command is ``zarr-dask convert``).

How it works:

1. The source hierarchy is read as a ZOM spec (:func:`zarr_dask.zom.from_store`), the selected nodes are
   re-described for the target (:mod:`zarr_dask._convert.target`) and every metadata document of the target
   is written up front, once (:meth:`~zarr_dask.zom.GroupSpec.to_store`: idempotent, refuses conflicts).
2. Each array is copied in *boxes* of whole target units (shards or chunks), so every storage key has exactly
   one writer task (the dask engine's write planner checks it: :func:`zarr_dask.explain_write`'s plan of
   each pass is in the report). Box sizes follow a memory model (:mod:`zarr_dask._convert.plan`): with
   ``threads`` tasks at once, each task stays under ``max_memory / threads``. When a box that covers whole
   source chunks does not fit, the copy is staged through an intermediate array (like rechunker), under
   ``__zarr_dask_staging__/`` of the destination (or of ``temp_store``), which is deleted at the end.
3. Consolidated metadata is written last, from the finished hierarchy.

**Resuming** (``mode="resume"``): local files are written to a temporary name and renamed, and object stores
store an object whole or not at all, so a key that is present is complete. A resumed conversion checks that
the target metadata is the one it would write (else it stops, before writing anything), lists the keys that
are there, and skips every box whose keys are all present. Boxes whose units all equal the fill value store
no keys (``write_empty_chunks=False``) and are copied again. Resume from the same source only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from zarr_dask._convert.dims import LayoutChange, check_dimension_keys
from zarr_dask._convert.options import parse_compressor, parse_dim_sizes, parse_size
from zarr_dask._convert.plan import Layout, StagePlan, plan_copy
from zarr_dask._convert.report import ArrayReport, ConvertReport
from zarr_dask._convert.resume_check import resume_conflict
from zarr_dask._convert.target import TargetOptions, inner_chunks, select, shard_shape, target_tree
from zarr_dask._convert.tasks import Box, CopyJob, build_graph, merge, run_graph
from zarr_dask.core import nodes
from zarr_dask.core.api import consolidate_metadata
from zarr_dask.core.create import build_array_metadata
from zarr_dask.errors import (
    HierarchyConflictError,
    InvalidModeError,
    NodeExistsError,
    UnsupportedFeatureError,
    ZarrDaskError,
)
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.layout import sharding_of
from zarr_dask.spec.paths import join_path, key_prefix, normalize_path
from zarr_dask.store import MemoryStore, Store, open_store
from zarr_dask.store.transactions import is_transactional
from zarr_dask.zom import ArraySpec, GroupSpec, from_store

__all__ = ["ArrayReport", "ConvertReport", "LayoutChange", "TargetOptions", "convert", "parse_compressor", "parse_dim_sizes", "parse_size"]

log = logging.getLogger("zarr_dask.convert")

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
Mode = Literal["w-", "w", "resume"]
STAGING = "__zarr_dask_staging__"
_STAGING_COMPRESSOR = {"id": "blosc", "cname": "lz4", "clevel": 1, "shuffle": 1}


@dataclass(kw_only=True)
class _Run:
    """What one conversion works with (internal)."""

    src: Store
    dst: Store
    temp: Store
    src_path: str
    dst_path: str
    threads: int
    max_memory: int
    mode: Mode
    write_empty_chunks: bool
    allow_unsafe_codecs: bool
    arrays: list[ArrayReport] = field(default_factory=list)
    changes: dict[str, list[LayoutChange]] = field(default_factory=dict)
    jobs: list[list[tuple[CopyJob, list[Box]]]] = field(default_factory=list)


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 * 2**30


@contextlib.contextmanager
def _client(scheduler: Any) -> Iterator[Any]:
    """A ``distributed.Client`` for a scheduler address; anything else as it is."""
    if isinstance(scheduler, str) and "://" in scheduler:
        distributed: Any = importlib.import_module("distributed")
        with distributed.Client(scheduler) as client:
            yield client
    else:
        yield scheduler


def _workers(scheduler: Any, threads: int | None, max_memory: Any) -> tuple[int, int]:
    """(concurrent tasks per process, memory budget per process) for the chosen scheduler."""
    if scheduler is not None and not isinstance(scheduler, str):  # a distributed.Client
        workers = list(scheduler.scheduler_info().get("workers", {}).values())
        threads = threads or max((int(w.get("nthreads", 1)) for w in workers), default=1)
        limits: list[int] = [int(w.get("memory_limit") or 0) for w in workers]
        lowest = min(limits, default=0)
        default = lowest // 2 if lowest else 4 * 2**30
    else:
        threads = threads or os.cpu_count() or 1
        default = _physical_memory() // 2
    return max(1, int(threads)), parse_size(max_memory) if max_memory is not None else default


def _read_source(src: Store, path: str, include: Sequence[str], exclude: Sequence[str]) -> ArraySpec | GroupSpec:
    spec = from_store(src, path=path)
    if isinstance(spec, GroupSpec):
        return select(spec, include, exclude)
    if include or exclude:
        log.warning("--include/--exclude select nodes of a hierarchy; the source is a single array")
    return spec


def _arrays(spec: ArraySpec | GroupSpec, prefix: str = "") -> list[tuple[str, ArraySpec]]:
    if isinstance(spec, ArraySpec):
        return [(prefix, spec)]
    return [item for name, child in (spec.members or {}).items() for item in _arrays(child, join_path(prefix, name))]


def _layout(meta: ArrayMetadata) -> Layout:
    chunk, sharding = inner_chunks(meta), sharding_of(meta)
    unit = shard_shape(meta) or chunk
    return Layout(unit=unit, chunk=chunk if sharding is None or sharding.whole_chain else unit)  # the read unit


def _staging_metadata(meta: ArrayMetadata, chunks: tuple[int, ...]) -> ArrayMetadataV3:
    dt = meta.data_type
    dtype: Any = dt.numpy_dtype if dt.vlen is None else (str if dt.vlen == "str" else bytes)
    fill = None if meta.fill_value is None else meta.fill_value[()]
    out = build_array_metadata(shape=meta.shape, dtype=dtype, zarr_format=3, chunks=chunks, fill_value=fill,
                               compressors=_STAGING_COMPRESSOR if dt.vlen is None else "zstd")  # fmt: skip
    assert isinstance(out, ArrayMetadataV3)
    return out


def _present(store: Store, path: str) -> set[str]:
    return set(store.list_prefix(key_prefix(path)))


def _staging_handle(run: _Run, rel: str, src_meta: ArrayMetadata, chunks: tuple[int, ...], dry_run: bool) -> tuple[ArrayHandle, set[str] | None]:
    """The intermediate array of a staged copy (its metadata written, or checked when resuming)."""
    base = join_path(run.dst_path, STAGING) if run.temp is run.dst else STAGING
    path = join_path(base, join_path(run.dst_path, rel) if run.temp is not run.dst else rel)
    meta = _staging_metadata(src_meta, chunks)
    docs = nodes.documents(path, meta)
    present: set[str] | None = None
    if run.mode == "resume":
        found = run.temp.get_many(list(docs))
        if found == docs:
            present = _present(run.temp, path)
        elif found and not dry_run:
            run.temp.delete_prefix(key_prefix(path))  # another plan's intermediate: start it again
    if not dry_run:
        run.temp.set_many(docs)
    handle = ArrayHandle(run.temp, path, meta, allow_unsafe_codecs=True, write_empty_chunks=run.write_empty_chunks)
    return handle, present if present is not None else (set() if run.mode == "resume" else None)


def _plan(run: _Run, rel: str, src_meta: ArrayMetadata, dst_meta: ArrayMetadata) -> StagePlan:
    """The copy plan of one array (pure: refusals happen before anything is written)."""
    try:
        return plan_copy(src_meta.shape, src_meta.data_type.itemsize or 64, _layout(src_meta), _layout(dst_meta),
                         max_memory=run.max_memory, threads=run.threads)  # fmt: skip
    except ZarrDaskError as e:
        raise e.with_context(store=run.dst.url, path=join_path(run.dst_path, rel)) from None


def _jobs(run: _Run, rel: str, src_meta: ArrayMetadata, dst_meta: ArrayMetadata, plan: StagePlan, dry_run: bool) -> None:
    """The passes of one array and the boxes each still has to copy."""
    src = ArrayHandle(run.src, join_path(run.src_path, rel), src_meta, allow_unsafe_codecs=run.allow_unsafe_codecs)
    dst = ArrayHandle(run.dst, join_path(run.dst_path, rel), dst_meta, allow_unsafe_codecs=run.allow_unsafe_codecs,
                      write_empty_chunks=run.write_empty_chunks)  # fmt: skip
    present = _present(run.dst, dst.path) if run.mode == "resume" else None
    final = plan.stages[-1]
    last = CopyJob(path=rel, source=src, target=dst, box=final.box, read_batch=final.read_batch,
                   write_batch=final.write_batch, workers=final.workers)  # fmt: skip
    stages: list[tuple[CopyJob, list[Box]]] = []
    pending = last.pending(present)
    if plan.staged and pending:
        assert plan.intermediate is not None
        mid, mid_present = _staging_handle(run, rel, src_meta, plan.intermediate, dry_run)
        one = plan.stages[0]
        first = CopyJob(path=rel, source=src, target=mid, box=one.box, read_batch=one.read_batch,
                        write_batch=one.write_batch, workers=one.workers)  # fmt: skip
        last = dataclasses.replace(last, source=mid)
        stages.append((first, first.pending(mid_present)))
    stages.append((last, pending))
    run.jobs.append(stages)
    report = ArrayReport.of(rel, plan, stages, run.changes.get(rel, ()))
    run.arrays.append(report)
    kind = f"staged copy through chunks {plan.intermediate}" if plan.staged else "direct copy"
    log.info("/%s: %s; %s", rel, kind, "; ".join(
        f"pass {i + 1}: {p.pending} of {p.tasks} task(s) of {p.box}, ~{p.memory >> 20} MiB each" for i, p in enumerate(report.passes)
    ))
    for change in report.changes:
        log.info("/%s: %s", rel, change)


def _prepare_destination(run: _Run, target: ArraySpec | GroupSpec) -> None:
    """Clear (``"w"``) or check (``"w-"``) the destination, then write every metadata document once."""
    prefix = key_prefix(run.dst_path)
    if run.mode == "w":
        run.dst.delete_prefix(prefix) if prefix else run.dst.delete_prefix("")
    elif run.mode == "w-":
        keys, dirs = run.dst.list_dir(prefix)
        if keys or dirs:
            raise NodeExistsError(
                "the destination is not empty; pass overwrite (--overwrite) to replace what is there, or resume "
                "(--resume) to finish an interrupted conversion into it",
                store=run.dst.url,
                path=run.dst_path,
            )
    try:
        target.to_store(run.dst, path=run.dst_path)
    except HierarchyConflictError as e:
        if run.mode != "resume":
            raise
        raise resume_conflict(e, run.dst, run.dst_path, dict(_arrays(target))) from None


def _finish(run: _Run, target: ArraySpec | GroupSpec, consolidate: bool) -> None:
    staging = [p for stages in run.jobs for job, _ in stages for p in [job.target.path] if STAGING in p.split("/")]
    for path in staging:
        run.temp.delete_prefix(key_prefix(path))
    if staging:
        base = join_path(run.dst_path, STAGING) if run.temp is run.dst else STAGING
        run.temp.delete_prefix(key_prefix(base))
    if consolidate and isinstance(target, GroupSpec):
        consolidate_metadata(run.dst, path=run.dst_path)


def convert(
    source: Any,
    destination: Any,
    *,
    source_path: str = "",
    destination_path: str = "",
    zarr_format: Literal[2, 3] | None = None,
    chunks: Any = "keep",
    shards: Any = "keep",
    compressors: Any = "keep",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    mode: Mode = "w-",
    max_memory: Any = None,
    threads: int | None = None,
    scheduler: Any = None,
    temp_store: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    destination_storage_options: Mapping[str, Any] | None = None,
    consolidate: bool = True,
    write_empty_chunks: bool = False,
    allow_unsafe_codecs: bool = False,
    dry_run: bool = False,
    progress: bool = False,
    tune_malloc: bool = False,
) -> ConvertReport:
    """Copy the hierarchy (or array) at ``source`` to ``destination``, converting it on the way.

    Groups, attributes, dimension names and xarray conventions are kept; what changes is what you ask for.
    Memory stays under ``max_memory`` per process whatever the source and target chunking (see the module
    docstring for how, and for the resume rule).

    Parameters
    ----------
    source, destination
        URLs or paths (any fsspec URL: ``s3://``, ``gs://``, ``memory://``...) or Stores.
    source_path, destination_path
        The node inside each store (default: the root).
    zarr_format
        2 or 3; None keeps each node's format.
    chunks
        ``"keep"``, ``"auto"``, ``{dimension name or axis: size}`` or ``"time=720,lat=30"`` (the inner chunks
        when sharded; -1 = the whole dimension; dimensions not named keep their size). A name or axis that no
        selected array has is an error (:class:`~zarr_dask.errors.MetadataError` listing the names there are).
    shards
        ``"keep"``, None (unsharded), ``"auto"`` (~64 MiB shards) or ``{dimension: size}`` / ``"lat=180"``
        (names checked as for ``chunks``). Kept chunk sizes that do not divide the asked shards are reduced
        to the gcd of the two; the report lists each such change (:attr:`ConvertReport.changes`).
    compressors
        ``"keep"``, None, ``"zstd:3"``-style text or anything :func:`zarr_dask.create_array` takes.
    include, exclude
        Shell patterns on node paths (``"fields/*"``); a matching group brings its subtree.
    mode
        ``"w-"``: the destination must be empty; ``"w"``: delete what is there first; ``"resume"``: finish an
        interrupted conversion (see the module docstring).
    max_memory
        Bytes (or ``"2GiB"``) the data in flight may take per process: this one, or each distributed worker.
        Default: half the RAM (distributed: half a worker's memory limit).
    threads
        Tasks at once per process (default: the CPU count; distributed: the workers' threads).
    scheduler
        None / ``"threads"`` / ``"synchronous"`` (dask's local schedulers), a ``distributed.Client`` or a
        scheduler address (``"tcp://10.0.0.1:8786"``).
    temp_store
        Where staged copies keep their intermediate arrays (default: inside the destination).
    storage_options, destination_storage_options
        fsspec options of the source and of the destination (default: the source's, if the destination is a
        URL too).
    consolidate
        Write consolidated metadata at the end (groups only).
    write_empty_chunks
        Store units equal to the fill value everywhere (default: skip them).
    allow_unsafe_codecs
        Allow reading codecs that can run code (pickle & co.).
    dry_run
        Plan only: nothing is written; the report says what would be done.
    progress
        Show a progress bar on stderr.
    tune_malloc
        Set glibc's malloc so that freed buffers of 1 MiB or more go back to the system at once, in every
        process that runs the copy. This keeps a long conversion's memory near ``max_memory``. It changes the
        allocator for the rest of the process's life, which is why only the ``zarr-dask convert`` command turns
        it on. Without it, each task still returns its freed memory when it ends (``malloc_trim``).

    Returns
    -------
    ConvertReport
        The per-array plans and layout changes and, unless ``dry_run``, bytes (the data once, and what every
        pass moved), requests and time.

    Examples
    --------
    >>> import numpy as np, zarr_dask
    >>> src = zarr_dask.create_group("memory://convert-doc-src", zarr_format=2, overwrite=True)
    >>> t = src.create_array("t", shape=(48, 20), dtype="f4", chunks=(1, 20), dimension_names=["time", "x"])
    >>> t[:] = np.arange(960, dtype="f4").reshape(48, 20)
    >>> report = zarr_dask.convert("memory://convert-doc-src", "memory://convert-doc-dst", zarr_format=3,
    ...                            chunks="time=48,x=5", shards="x=20", mode="w", scheduler="synchronous")
    >>> out = zarr_dask.open_array("memory://convert-doc-dst", path="t")
    >>> out.chunks, out.shards, out.dimension_names, float(out[47, 19])
    ((48, 5), (48, 20), ('time', 'x'), 959.0)
    """
    t0 = time.perf_counter()
    if mode not in ("w-", "w", "resume"):
        raise InvalidModeError(
            f"mode {mode!r} is not a convert mode: 'w-' (fail if the destination exists), 'w' (replace it) or "
            "'resume' (finish an interrupted conversion)"
        )
    options = TargetOptions(zarr_format=zarr_format, chunks=parse_dim_sizes(chunks, "chunks"),
                            shards=parse_dim_sizes(shards, "shards"), compressors=parse_compressor(compressors))  # fmt: skip
    dst_options = destination_storage_options
    if dst_options is None and _is_url(destination):  # the source's options, for a destination URL
        dst_options = storage_options
    with _client(scheduler) as client:
        run = _setup(
            source, destination, temp_store, storage_options, dst_options, source_path, destination_path,
            _workers(client, threads, max_memory), mode, write_empty_chunks, allow_unsafe_codecs, dry_run,
        )  # fmt: skip
        _check_overlap(run)
        _check_scheduler(run, client)
        spec = _read_source(run.src, run.src_path, include, exclude)
        _check_dimension_keys(run, spec, options)
        try:
            target = target_tree(spec, options, changes=run.changes)
        except ZarrDaskError as e:  # the node is named already: add the store it would be written to
            raise e.with_context(store=run.dst.url) from None
        targets = dict(_arrays(target))
        arrays = [(rel, node.metadata, targets[rel].metadata) for rel, node in _arrays(spec)]
        plans = [_plan(run, rel, s, d) for rel, s, d in arrays]  # refusals come before any write
        if not dry_run:
            _prepare_destination(run, target)
        for (rel, src_meta, dst_meta), plan in zip(arrays, plans, strict=True):
            _jobs(run, rel, src_meta, dst_meta, plan, dry_run)
        stats = merge()
        if not dry_run:
            if any(boxes for stages in run.jobs for _, boxes in stages):
                graph = build_graph(run.jobs, tune_malloc=tune_malloc)
                stats = run_graph(graph, scheduler=client, threads=run.threads, progress=progress)
            _finish(run, target, consolidate)
    return ConvertReport.of(run, spec, target, stats, time.perf_counter() - t0, dry_run)


def _is_url(target: Any) -> bool:
    """True for fsspec URLs that take storage options (not local paths, ``file://`` or Store objects)."""
    return isinstance(target, str) and "://" in target and not target.startswith("file://")


def _check_overlap(run: _Run) -> None:
    """Refuse a destination that is the source, or inside it, or holds it (``mode="w"`` would delete it)."""
    if run.src.url != run.dst.url:
        return
    a, b = run.src_path, run.dst_path
    if a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/"):
        raise NodeExistsError(
            f"the destination node /{b} overlaps the source node /{a} in the same store; convert into another "
            "store or a separate path (then move it into place)",
            store=run.dst.url,
            path=b,
        )


def _check_dimension_keys(run: _Run, spec: ArraySpec | GroupSpec, options: TargetOptions) -> None:
    """Refuse --chunks/--shards keys that match no dimension of the selected arrays (typos)."""
    try:
        check_dimension_keys([(rel, node.metadata) for rel, node in _arrays(spec)],
                             {"chunks": options.chunks, "shards": options.shards})  # fmt: skip
    except ZarrDaskError as e:
        raise e.with_context(store=run.src.url, path=run.src_path) from None


def _check_scheduler(run: _Run, client: Any) -> None:
    if client is None or isinstance(client, str):
        return
    if is_transactional(run.dst) and not run.dst.read_only:
        raise UnsupportedFeatureError(
            f"converting into {run.dst.url} runs on this process's threads: the conversion's tasks do not carry "
            "forks of an Icechunk session back from other processes; drop the scheduler (--workers / --scheduler)",
        )
    for store in (run.src, run.dst, run.temp):
        if isinstance(store, MemoryStore):
            raise TypeError(
                f"{store!r} lives in this process, so distributed workers cannot share it; use a URL that "
                "every worker reaches (object storage or a shared file system), or run locally (scheduler=None)"
            )


def _setup(
    source: Any, destination: Any, temp_store: Any, src_options: Any, dst_options: Any, source_path: str,
    destination_path: str, workers: tuple[int, int], mode: Mode, write_empty_chunks: bool, allow_unsafe: bool,
    dry_run: bool,
) -> _Run:  # fmt: skip
    src = open_store(source, storage_options=dict(src_options or {}) or None, read_only=True)
    dst = open_store(destination, storage_options=dict(dst_options or {}) or None, read_only=dry_run)
    temp = dst if temp_store is None else open_store(temp_store, storage_options=dict(dst_options or {}) or None)
    return _Run(src=src, dst=dst, temp=temp, src_path=normalize_path(source_path),
                dst_path=normalize_path(destination_path), threads=workers[0], max_memory=workers[1], mode=mode,
                write_empty_chunks=write_empty_chunks, allow_unsafe_codecs=allow_unsafe)  # fmt: skip

