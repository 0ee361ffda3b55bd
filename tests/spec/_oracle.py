"""Helpers for the spec tests: zarr-python as an oracle (import it only through :func:`zarr_or_skip`)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from zarr_dask.spec.json import canonical_json


def zarr_or_skip() -> Any:
    """The zarr module (skips the test when zarr-python is not installed)."""
    return pytest.importorskip("zarr")


def zarr_documents(build: Callable[[Any], None]) -> dict[str, bytes]:
    """Run ``build(store)`` against a fresh zarr-python MemoryStore and return every key's bytes.

    zarr-python's own warnings (e.g. "consolidated metadata is not in the v3 spec") are silenced here:
    they are about zarr-python, not about the code under test.
    """
    zarr = zarr_or_skip()
    backing: dict[str, Any] = {}
    store = zarr.storage.MemoryStore(store_dict=backing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(store)
    return {k: v.to_bytes() for k, v in backing.items()}


def same_json(a: bytes | str, b: bytes | str) -> bool:
    """``json.loads(a) == json.loads(b)``, with NaN equal to NaN and key order ignored."""
    return canonical_json(json.loads(a)) == canonical_json(json.loads(b))


def metadata_keys(docs: dict[str, bytes]) -> list[str]:
    """Keys of the metadata documents (not chunks) in a store dump."""
    names = (".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json")
    return sorted(k for k in docs if k.rsplit("/", 1)[-1] in names)
