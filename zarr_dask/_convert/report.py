"""What a conversion planned and did: :class:`ConvertReport` (per array: :class:`ArrayReport`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_dask._convert.dims import LayoutChange
from zarr_dask._convert.plan import StagePlan
from zarr_dask._convert.tasks import Box, CopyJob, Stats, write_plan
from zarr_dask.graph.plan import WritePlan
from zarr_dask.zom import ArraySpec, GroupSpec

__all__ = ["ArrayReport", "ConvertReport", "PassReport", "human"]


def human(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@dataclass(frozen=True, kw_only=True)
class PassReport:
    """One pass over one array: ``source`` -> ``target`` (node paths), in ``tasks`` boxes of ``box``."""

    source: str
    target: str
    box: tuple[int, ...]
    tasks: int  #: boxes in the pass
    pending: int  #: boxes to copy (fewer than ``tasks`` when resuming)
    memory: int  #: estimated peak bytes of one task
    write_plan: WritePlan | None  #: the dask engine's plan of the pass (keys, writers, requests)


@dataclass(frozen=True, kw_only=True)
class ArrayReport:
    """How one array is copied; ``changes``: the layout changes made without being asked."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    plan: StagePlan
    passes: tuple[PassReport, ...]
    changes: tuple[LayoutChange, ...] = ()

    @classmethod
    def of(
        cls, path: str, plan: StagePlan, stages: Sequence[tuple[CopyJob, list[Box]]], changes: Sequence[LayoutChange] = ()
    ) -> ArrayReport:
        passes = []
        for (job, boxes), stage in zip(stages, plan.stages[-len(stages) :], strict=True):
            wp = write_plan(job)
            passes.append(PassReport(
                source=job.source.path, target=job.target.path, box=job.box, tasks=wp.tasks if wp else 0,
                pending=len(boxes), memory=stage.memory, write_plan=wp,
            ))  # fmt: skip
        last = stages[-1][0].target
        return cls(path=path, shape=last.shape, dtype=last.dtype, plan=plan, passes=tuple(passes), changes=tuple(changes))

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def describe(self) -> str:
        """A few lines: the layouts, the passes, their tasks and memory."""
        first, last = self.plan.stages[0], self.plan.stages[-1]
        kind = f"staged through chunks {self.plan.intermediate}" if self.plan.staged else "direct"
        lines = [
            f"/{self.path or ''}  {self.shape} {self.dtype}  {human(self.nbytes)}",
            f"  source chunks {first.source.chunk} (units {first.source.unit}) -> target chunks "
            f"{last.target.chunk} (units {last.target.unit}); {kind}",
        ]
        lines += [f"  changed: {c}" for c in self.changes]
        for i, p in enumerate(self.passes):
            todo = f", {p.tasks - p.pending} already done" if p.pending != p.tasks else ""
            lines.append(f"  pass {i + 1}: /{p.source} -> /{p.target}: {p.tasks} task(s) of {p.box}{todo}, "
                         f"~{human(p.memory)} per task")  # fmt: skip
        return "\n".join(lines)


def _count_groups(node: ArraySpec | GroupSpec) -> int:
    if isinstance(node, ArraySpec):
        return 0
    return 1 + sum(_count_groups(m) for m in (node.members or {}).values())


@dataclass(frozen=True, kw_only=True)
class ConvertReport:
    """The outcome of :func:`zarr_dask.convert`.

    ``stats`` sums what the copy tasks measured (``data_bytes``: the data copied, counted once; ``nbytes``:
    the data every pass moved, twice for a staged array; ``bytes_read``/``bytes_written`` and the requests,
    counted in the tasks, wherever they ran); ``metadata_requests`` counts this process's own
    requests (reading the source hierarchy, writing metadata, listings).
    """

    source: str
    destination: str
    dry_run: bool
    mode: str
    threads: int
    max_memory: int
    groups: int
    arrays: tuple[ArrayReport, ...]
    seconds: float
    stats: Stats = field(default_factory=dict)
    metadata_requests: int = 0

    @classmethod
    def of(cls, run: Any, spec: Any, target: Any, stats: Stats, seconds: float, dry_run: bool) -> ConvertReport:
        stores = {id(s): s for s in (run.src, run.dst, run.temp)}.values()
        meta = sum(sum(v for k, v in s.counters.snapshot().items() if not k.startswith("bytes")) for s in stores)
        return cls(source=run.src.url, destination=run.dst.url, dry_run=dry_run, mode=run.mode, threads=run.threads,
                   max_memory=run.max_memory, groups=_count_groups(target), arrays=tuple(run.arrays),
                   seconds=seconds, stats=dict(stats), metadata_requests=meta)  # fmt: skip

    @property
    def passes(self) -> int:
        """Passes over the data: 2 when an array is staged through an intermediate array, else 1."""
        return max((len(a.plan.stages) for a in self.arrays), default=1)

    @property
    def changes(self) -> list[tuple[str, LayoutChange]]:
        """``(array path, change)`` for every layout change made without being asked."""
        return [(a.path, c) for a in self.arrays for c in a.changes]

    @property
    def requests(self) -> int:
        """Every store request: the tasks' and this process's."""
        s = self.stats
        kinds = ("read_requests", "write_requests", "delete_requests", "list_requests")
        return sum(s.get(k, 0) for k in kinds) + self.metadata_requests

    def plan_text(self) -> str:
        """The plan: per array its passes, and the dask engine's write plan of the final pass."""
        head = (f"convert {self.source} -> {self.destination}: {len(self.arrays)} array(s), {self.groups} group(s); "
                f"{self.threads} task(s) at once, max memory {human(self.max_memory)}")  # fmt: skip
        parts = [head]
        for a in self.arrays:
            parts.append(a.describe())
            wp = a.passes[-1].write_plan if a.passes else None
            if wp is not None:
                parts.append("\n".join("    " + line for line in repr(wp).splitlines()))
        return "\n".join(parts)

    def _changed(self) -> list[str]:
        return [f"  changed /{path}: {c}" for path, c in self.changes]

    def _data(self, secs: float) -> str:
        """The data copied (once), the passes, and what staging moved in all."""
        data, moved = self.stats.get("data_bytes", 0), self.stats.get("nbytes", 0)
        line = f"  data    {human(data)} in {self.passes} pass{'es' if self.passes > 1 else ''} ({human(data / secs)}/s)"
        staged = sum(a.plan.staged for a in self.arrays)
        if staged:
            line += (f"; {staged} of {len(self.arrays)} array(s) staged through an intermediate array, "
                     f"{human(moved)} moved in all")  # fmt: skip
        return line

    def summary(self) -> str:
        """One paragraph: what was copied (the data once, and the passes), bytes, time, throughput, requests,
        and the layout changes made without being asked."""
        s = self.stats
        if self.dry_run:
            pending = sum(p.pending for a in self.arrays for p in a.passes)
            return "\n".join([f"dry run: nothing written; {pending} copy task(s) would run", *self._changed()])
        secs = max(self.seconds, 1e-9)
        done = sum(p.tasks - p.pending for a in self.arrays for p in a.passes)
        lines = [
            f"converted {len(self.arrays)} array(s) and {self.groups} group(s) in {self.seconds:.2f} s "
            f"({s.get('tasks', 0)} copy task(s)" + (f", {done} skipped: already written" if done else "") + ")",
            self._data(secs),
            f"  read    {human(s.get('bytes_read', 0))} in {s.get('read_requests', 0)} request(s)",
            f"  written {human(s.get('bytes_written', 0))} in {s.get('write_requests', 0)} request(s) "
            f"({human(s.get('bytes_written', 0) / secs)}/s)",
            f"  requests {self.requests} in total (incl. {self.metadata_requests} for metadata and listings here)",
            *self._changed(),
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (the CLI's ``--json``)."""
        return {
            "source": self.source,
            "destination": self.destination,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            "threads": self.threads,
            "max_memory": self.max_memory,
            "groups": self.groups,
            "requests": self.requests,
            "metadata_requests": self.metadata_requests,
            "passes": self.passes,
            "stats": self.stats,
            "arrays": [
                {
                    "path": a.path,
                    "shape": list(a.shape),
                    "staged": a.plan.staged,
                    "intermediate_chunks": list(a.plan.intermediate) if a.plan.intermediate else None,
                    "changes": [c.to_json() for c in a.changes],
                    "passes": [
                        {"source": p.source, "target": p.target, "box": list(p.box), "tasks": p.tasks,
                         "pending": p.pending, "memory": p.memory}  # fmt: skip
                        for p in a.passes
                    ],
                }
                for a in self.arrays
            ],
        }

    def __str__(self) -> str:
        return self.summary()
