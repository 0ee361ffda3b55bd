"""Shared helpers for the dask-engine tests."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import zarr_dask
from zarr_dask.core.create import build_array_metadata
from zarr_dask.store import LocalStore
from zarr_dask.store.base import Buffer

SHARDS_SUPPORTED = "shards" in inspect.signature(build_array_metadata).parameters


def random_partition(draw: Any, st: Any, n: int, max_parts: int = 6) -> tuple[int, ...]:
    """A dask chunking of ``n`` elements into 1..max_parts irregular parts (``(0,)`` for n == 0)."""
    if n == 0:
        return (0,)
    cuts = draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=min(max_parts - 1, n - 1)))
    bounds = [0, *sorted(c for c in cuts if 0 < c < n), n]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


def reference_data(shape: Sequence[int], dtype: str = "f8", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(-1000, 1000, size=tuple(shape)) + 0.5).astype(dtype)


class FlakyLocalStore(LocalStore):
    """A LocalStore whose ``set_many`` fails once per marker file, after writing half of the batch: a task
    that dies in the middle of its writes. Pickles by configuration (worker processes import this module)."""

    def __init__(self, root: str | os.PathLike[str], *, marker_dir: str, read_only: bool = False) -> None:
        super().__init__(root, read_only=read_only)
        self.marker_dir = marker_dir

    def __reduce__(self) -> Any:
        return (FlakyLocalStore._rebuild, (self.root, self.marker_dir, self.read_only))

    @staticmethod
    def _rebuild(root: str, marker_dir: str, read_only: bool) -> FlakyLocalStore:
        return FlakyLocalStore(root, marker_dir=marker_dir, read_only=read_only)

    def with_read_only(self, read_only: bool = True) -> FlakyLocalStore:
        return FlakyLocalStore(self.root, marker_dir=self.marker_dir, read_only=read_only)

    def _config(self) -> Any:
        return (*super()._config(), "flaky", self.marker_dir)

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        keys = sorted(items)
        data_keys = [k for k in keys if not k.rsplit("/", 1)[-1].startswith((".z", "zarr.json"))]
        marker = Path(self.marker_dir) / ("fail-" + "-".join(data_keys[:1]).replace("/", "_"))
        if data_keys and not marker.exists():
            marker.touch()
            half = keys[: max(1, len(keys) // 2)]
            super().set_many({k: items[k] for k in half})
            raise OSError(f"injected failure after writing {half}")
        super().set_many(items)


class CallCounter:
    """Counts calls of a method (thread-safe), e.g. ``Store.get_many``."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def wrap(self, func: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.calls += 1
            return func(*args, **kwargs)

        return counted


def create(url: Any, shape: Sequence[int], chunks: Any, *, shards: Any = None, **kwargs: Any) -> zarr_dask.Array:
    if shards is not None:
        kwargs["shards"] = shards
    return zarr_dask.create_array(url, shape=tuple(shape), chunks=chunks, **kwargs)
