"""Helpers for the sharding tests: a store that records its batched calls, sample data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_dask.store import MemoryStore
from zarr_dask.store.base import ByteRange


class RecordingStore(MemoryStore):
    """A MemoryStore that records every ``get_ranges`` / ``get_many`` call (one entry per call)."""

    def __init__(self) -> None:
        super().__init__()
        self.range_calls: list[list[ByteRange]] = []
        self.many_calls: list[list[str]] = []

    def get_ranges(self, requests: Sequence[ByteRange]) -> list[bytes | None]:
        self.range_calls.append(list(requests))
        return super().get_ranges(requests)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        self.many_calls.append(list(keys))
        return super().get_many(keys)

    def reset(self) -> None:
        self.range_calls.clear()
        self.many_calls.clear()
        self.counters.reset()


def noise(shape: tuple[int, ...], dtype: Any = "f4", seed: int = 0) -> np.ndarray[Any, Any]:
    """Incompressible data (inner chunk sizes are then predictable)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype)
