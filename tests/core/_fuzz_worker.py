"""Fuzz worker, run in a subprocess under an address-space limit by ``test_fuzz_hostile.py``.

``python _fuzz_worker.py LIMIT_BYTES EXAMPLES TMPDIR`` sets ``RLIMIT_AS``, then feeds hostile metadata
geometry, chunk bytes, shard indexes and vlen payloads to the memory store and local files, opening, reading
and building dask graphs from each. Prints one JSON line: inputs run, slowest input, and every failure (an
exception that is not a ``zarr_dask.errors`` error, a ``MemoryError`` anywhere in the chain, or an input
that took more than 1 s of CPU time, or 5 s of wall time).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
import traceback
from typing import Any

import numcodecs
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarr_dask
from zarr_dask import errors

BIG = [0, 1, 2, 3, 7, 64, 1000, 2**16, 2**20, 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64]
sizes = st.one_of(st.integers(0, 40), st.sampled_from(BIG), st.integers(-3, 2**64))
BYTES_CODEC = {"name": "bytes", "configuration": {"endian": "little"}}
CODECS: list[list[dict[str, Any]]] = [
    [BYTES_CODEC],
    [BYTES_CODEC, {"name": "zstd", "configuration": {"level": 1}}],
    [BYTES_CODEC, {"name": "gzip", "configuration": {"level": 1}}],
    [BYTES_CODEC, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle",
                                                      "typesize": 4, "blocksize": 0}}],
    [BYTES_CODEC, {"name": "crc32c"}],
    [BYTES_CODEC, {"name": "numcodecs.bz2", "configuration": {"level": 1}}],
]  # fmt: skip
V2_COMPRESSORS = [None, {"id": "zstd", "level": 1}, {"id": "lz4"}, {"id": "zlib", "level": 1}, {"id": "bz2"}]
#: Wall time allowed per input (its CPU time may be at most 1 s).
WALL_LIMIT = 5.0
STATS: dict[str, Any] = {"inputs": 0, "slowest": 0.0, "failures": [], "outcomes": {}}
WORK = sys.argv[3] if len(sys.argv) > 3 else "/tmp"


def v3_doc(shape: Any, chunks: Any, codecs: Any, dtype: str = "int32") -> dict[str, Any]:
    return {"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": codecs}  # fmt: skip


def sharded(inner: Any, index_location: str = "end") -> list[dict[str, Any]]:
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": [BYTES_CODEC, {"name": "zstd", "configuration": {"level": 1}}],
        "index_codecs": [BYTES_CODEC, {"name": "crc32c"}], "index_location": index_location}}]  # fmt: skip


#: JSON of any type: what a hostile sharding configuration holds where an object or a list belongs
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 2**64), st.floats(allow_nan=False), st.text(max_size=8),
              st.sampled_from(["bytes", "sharding_indexed", "end"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["name", "configuration", "chunk_shape", "codecs", "endian", "x"]), inner, max_size=3)),
    max_leaves=8,
)  # fmt: skip
SHARDING_KEYS = ["configuration", "chunk_shape", "codecs", "index_codecs", "index_location", "inner codec",
                 "inner sharding"]  # fmt: skip


def hostile_sharding(key: str, value: Any) -> list[Any]:
    """A valid sharding chain with one part replaced by ``value`` (of any JSON type)."""
    chain = sharded([2])
    config = chain[0]["configuration"]
    if key == "configuration":
        chain[0]["configuration"] = value
    elif key == "inner codec":
        config["codecs"] = [BYTES_CODEC, value]
    elif key == "inner sharding":  # nested sharding whose own configuration is hostile
        config["codecs"] = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1], "codecs": value}}]
    else:
        config[key] = value
    return chain


#: the zarr-extensions codecs of 2025-26, each with a valid configuration that the fuzzer spoils one key of
EXTENSION_CODECS: dict[str, dict[str, Any]] = {
    "bitround": {"keepbits": 3},
    "packbits": {"padding_encoding": "first_byte"},
    "reshape": {"shape": [[0, 1]]},
    "conditional": {"codecs": [{"name": "zstd", "configuration": {"level": 1}}]},
    "n5_default": {"codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                              {"name": "bytes", "configuration": {"endian": "big"}}]},
}  # fmt: skip
N5_HEADER = bytes.fromhex("0000" "0002" "00000004" "00000006")


def extension_chain(name: str, key: str | None, value: Any) -> list[Any]:
    """A chain around the codec ``name``, its configuration's ``key`` set to ``value`` (None: kept valid)."""
    config = json.loads(json.dumps(EXTENSION_CODECS[name]))
    if key is not None:
        config[key] = value
    codec = {"name": name, "configuration": config}
    if name in ("bitround", "reshape"):
        return [codec, BYTES_CODEC]
    return [BYTES_CODEC, codec] if name == "conditional" else [codec]


def _exercise(files: dict[str, bytes]) -> str:
    """Write ``files`` into a fresh memory store and local directory; open, read and build graphs."""
    outcome = "ok"
    for kind in ("memory", "local"):
        if kind == "memory":
            store: Any = zarr_dask.MemoryStore()
        else:
            root = os.path.join(WORK, "fuzz.zarr")
            shutil.rmtree(root, ignore_errors=True)
            store = zarr_dask.LocalStore(root)
        for key, value in files.items():
            store.set(key, value)
        try:
            a = zarr_dask.open_array(store, path="a", mode="r")
            a[(0,) * a.ndim] if a.size else a[...]
            a[tuple(slice(0, 3) for _ in range(a.ndim))]
            zarr_dask.from_zarr(a)
        except errors.ZarrDaskError as e:
            if any(isinstance(c, MemoryError) for c in _chain(e)):
                raise
            outcome = type(e).__name__
    return outcome


def _chain(e: BaseException) -> list[BaseException]:
    out = []
    seen: BaseException | None = e
    while seen is not None and len(out) < 20:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def run(files: dict[str, bytes]) -> None:
    STATS["inputs"] += 1
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        outcome = _exercise(files)
    except BaseException as e:  # noqa: BLE001 - every escape is the finding
        outcome = "FAIL"
        STATS["failures"].append({"error": f"{type(e).__name__}: {e}"[:500], "trace": traceback.format_exc()[-1500:],
                                  "files": {k: v[:300].hex() for k, v in files.items()}})  # fmt: skip
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    STATS["slowest"] = max(STATS["slowest"], cpu)
    STATS["outcomes"][outcome] = STATS["outcomes"].get(outcome, 0) + 1
    # CPU time (all threads) for work, wall time for waiting: a shared machine's load stretches wall time
    # several-fold, but no input may compute for over 1 s nor wait (retries, backoff) for over WALL_LIMIT
    if cpu > 1.0 or elapsed > WALL_LIMIT:
        STATS["failures"].append({"error": f"took {cpu:.2f} s of CPU, {elapsed:.2f} s of wall time",
                                  "files": {k: v[:300].hex() for k, v in files.items()}})  # fmt: skip


def main() -> None:
    limit, examples = int(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    settings.register_profile("ci", derandomize=True, deadline=None)  # as tests/conftest.py: CI replays
    settings.load_profile(os.environ.get("ZD_HYPOTHESIS_PROFILE", "default"))
    zarr_dask.set_limits(max_chunk_bytes=256 << 20)  # the policy limit this machine can afford under `limit`
    fuzz = settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))  # fmt: skip

    @fuzz
    @given(st.lists(sizes, max_size=40), st.lists(sizes, max_size=40), st.sampled_from(CODECS),
           st.one_of(st.none(), st.lists(sizes, max_size=4)), st.binary(max_size=64))  # fmt: skip
    def geometry(shape: list[int], chunks: list[int], codecs: Any, inner: Any, chunk: bytes) -> None:
        n = min(len(shape), len(chunks))
        doc = v3_doc(shape[:n], chunks[:n], sharded(inner) if inner is not None else codecs)
        run({"a/zarr.json": json.dumps(doc).encode(), "a/c/" + "/".join(["0"] * n) if n else "a/c": chunk})

    @fuzz
    @given(st.lists(sizes, min_size=1, max_size=3), st.lists(sizes, min_size=1, max_size=3),
           st.sampled_from(V2_COMPRESSORS), st.sampled_from(["<i4", "<f8", "|u1", "|O"]))  # fmt: skip
    def geometry_v2(shape: list[int], chunks: list[int], compressor: Any, dtype: str) -> None:
        n = min(len(shape), len(chunks))
        doc = {"zarr_format": 2, "shape": shape[:n], "chunks": chunks[:n], "dtype": dtype, "compressor": compressor,
               "fill_value": 0 if dtype != "|O" else None, "order": "C",
               "filters": [{"id": "vlen-utf8"}] if dtype == "|O" else None}  # fmt: skip
        payload = numcodecs.Zstd(1).encode(np.zeros(min(max(chunks[0], 1), 4096), dtype="u1"))
        run({"a/.zarray": json.dumps(doc).encode(), "a/" + ".".join(["0"] * n): payload})

    @fuzz
    @given(st.sampled_from(CODECS), st.lists(st.sampled_from([1, 2, 5, 64, 2**12, 2**16]), min_size=1, max_size=3),
           st.binary(max_size=256), st.sampled_from(["int32", "float64", "uint8"]))  # fmt: skip
    def chunk_bytes(codecs: Any, chunks: list[int], chunk: bytes, dtype: str) -> None:
        doc = v3_doc([c * 2 for c in chunks], chunks, codecs, dtype)
        if "blosc" in json.dumps(codecs) and chunk[:1]:  # a plausible blosc header with hostile sizes
            chunk = bytes([2, 1, 1, 4]) + chunk[1:]
        run({"a/zarr.json": json.dumps(doc).encode(), "a/c/" + "/".join(["0"] * len(chunks)): chunk})

    @fuzz
    @given(st.sampled_from([[4], [2, 2], [1, 8]]), st.lists(st.integers(0, 2**64 - 1), min_size=2, max_size=40),
           st.sampled_from(["start", "end"]), st.binary(max_size=64))  # fmt: skip
    def shard_index(inner: list[int], words: list[int], location: str, payload: bytes) -> None:
        shard = [i * 4 for i in inner]
        doc = v3_doc([s * 2 for s in shard], shard, sharded(inner, location))
        index = np.asarray(words[: 2 * int(np.prod([4] * len(inner)))], dtype="<u8").tobytes()
        import crc32c

        index += crc32c.crc32c(index).to_bytes(4, "little")
        value = index + payload if location == "start" else payload + index
        run({"a/zarr.json": json.dumps(doc).encode(), "a/c/" + "/".join(["0"] * len(inner)): value})

    @fuzz
    @given(st.binary(max_size=200), st.integers(0, 2**32 - 1), st.sampled_from(["string", "bytes"]),
           st.sampled_from([[4], [2**20], [2**28]]))  # fmt: skip
    def vlen(payload: bytes, count: int, dtype: str, chunks: list[int]) -> None:
        codec = {"name": "vlen-utf8" if dtype == "string" else "vlen-bytes"}
        doc = v3_doc([chunks[0] * 2], chunks, [codec], dtype)
        doc["fill_value"] = "" if dtype == "string" else ""
        run({"a/zarr.json": json.dumps(doc).encode(), "a/c/0": count.to_bytes(4, "little") + payload})

    @fuzz
    @given(st.sampled_from(SHARDING_KEYS), json_values, st.booleans())
    def sharding_config(key: str, value: Any, outer: bool) -> None:
        codecs = hostile_sharding(key, value) + ([{"name": "gzip", "configuration": {"level": 1}}] if outer else [])
        run({"a/zarr.json": json.dumps(v3_doc([8], [4], codecs)).encode(), "a/c/0": b"\x00" * 64})

    @fuzz
    @given(st.sampled_from(sorted(EXTENSION_CODECS)), st.sampled_from([None, "keepbits", "padding_encoding",
           "first_bit", "last_bit", "shape", "codecs", "header_bits", "x"]), json_values, st.booleans(),
           st.binary(max_size=200))  # fmt: skip
    def extension_codecs(name: str, key: str | None, value: Any, header: bool, payload: bytes) -> None:
        codecs = extension_chain(name, key, value)
        chunk = (N5_HEADER if header and name == "n5_default" else b"\x01"[: int(header)]) + payload
        run({"a/zarr.json": json.dumps(v3_doc([8, 6], [4, 6], codecs)).encode(), "a/c/0/0": chunk})

    # warm up (first imports of the graph modules take about a second), not counted
    _exercise({"a/zarr.json": json.dumps(v3_doc([4], [2], CODECS[1])).encode()})
    for test in (geometry, geometry_v2, chunk_bytes, shard_index, vlen, sharding_config, extension_codecs):
        test()
    print(json.dumps(STATS))


if __name__ == "__main__":
    main()
