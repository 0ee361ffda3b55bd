"""Codec pipelines: the v3 codec chain and the v2 filters + compressor, behind one interface.

A v2 chain is mapped onto the v3 model: ``order="F"`` is a leading transpose (reversed axes), numcodecs
filters are array->array codecs, an object codec (``vlen-utf8`` ...) is the array->bytes codec (else the raw
element bytes in the stored byte order), and the remaining filters plus the compressor are bytes->bytes codecs.

Everything that can be resolved is resolved once per chunk shape into a :class:`~zarr_dask.codecs.chunk_plan.ChunkPlan` (bound codecs,
intermediate specs, expected sizes, the decode fast path), so decoding a chunk costs one dict lookup plus
the codec calls. The fast path (``bytes`` + a compressor that decodes into a buffer: zstd, blosc, lz4)
allocates the output array and has numcodecs decompress straight into it.
"""

from __future__ import annotations

import copy
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zarr_dask.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BufferLike,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from zarr_dask.codecs.builtin import BytesCodec, TransposeCodec
from zarr_dask.codecs.chunk_plan import ChunkPlan
from zarr_dask.codecs.numcodecs_bridge import NumcodecsBytesBytes
from zarr_dask.codecs.registry import codec_from_v2, codec_from_v3
from zarr_dask.errors import ChunkDecodeError, ChunkEncodeError, MetadataError, ZarrDaskError
from zarr_dask.spec.dtypes import DataType

__all__ = ["CodecPipeline", "pipeline_from_v2", "pipeline_from_v3"]

_log = logging.getLogger("zarr_dask.codecs")

_KIND_TEXT = {"array_array": "array->array", "array_bytes": "array->bytes", "bytes_bytes": "bytes->bytes"}


class CodecPipeline(ABC):
    """Encodes and decodes whole chunks of one array. Thread-safe; pickles by configuration.

    Attributes
    ----------
    zarr_format
        2 or 3.
    data_type
        The array's data type.
    """

    zarr_format: Literal[2, 3]
    data_type: DataType

    @abstractmethod
    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        """Decode stored chunk bytes.

        Parameters
        ----------
        data
            The stored bytes of one chunk.
        spec
            The chunk's spec (shape = the full stored chunk shape).

        Returns
        -------
        numpy.ndarray
            Shape ``spec.shape``, dtype ``spec.data_type.numpy_dtype``; may be read-only or a non-contiguous
            view: copy before writing into it.

        Raises
        ------
        ChunkDecodeError
            Truncated, corrupt or wrongly-sized data, or a checksum mismatch.
        """

    @abstractmethod
    def check_stored(self, data: BufferLike, spec: ChunkSpec) -> None:
        """Raise :class:`ChunkDecodeError` when ``data`` is too small to decode to a chunk of ``spec`` with these
        codecs (each codec's :attr:`~zarr_dask.codecs.base.Codec.max_ratio`); chunks up to
        :data:`~zarr_dask.codecs.chunk_plan.PLAUSIBLE_FLOOR` bytes are never refused. :meth:`decode` checks this itself; callers that
        allocate for a chunk before decoding it call it first."""

    def decode_into(self, data: BufferLike, spec: ChunkSpec, out: np.ndarray[Any, Any]) -> None:
        """Decode into ``out`` (shape ``spec.shape``, dtype ``numpy_dtype``), without a copy when possible.

        Zero copy when ``out`` is C-contiguous and the chain ends in zstd/blosc/lz4 + ``bytes`` (native order).
        """
        out[...] = self.decode(data, spec)

    @abstractmethod
    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> bytes:
        """Encode one whole chunk (``chunk.shape == spec.shape``) to the bytes to store.

        Raises
        ------
        ChunkEncodeError
            The data does not fit the codecs (e.g. a non-str element for ``vlen-utf8``).
        """

    @abstractmethod
    def to_json(self) -> Any:
        """v3: the list of codec objects; v2: ``{"compressor": ..., "filters": ...}`` (as given)."""

    def direct_codec(self, spec: ChunkSpec) -> str | None:
        """How a stored chunk of ``spec`` becomes its decoded bytes when nothing else is involved: ``"raw"``
        (stored as they are) or the numcodecs id of the one compressor (``"zstd"``, ``"blosc"``, ``"lz4"``).
        None when the chain does more (byte swaps, transposes, filters, checksums, object codecs): what the
        native reader (:mod:`zarr_dask.native`) may decode itself."""
        return None

    @abstractmethod
    def fixed_encoded_size(self, shape: tuple[int, ...]) -> int | None:
        """Exact encoded size of a chunk of ``shape`` when every codec is fixed-size (``bytes``, ``transpose``,
        ``crc32c``: e.g. a shard index), else None."""


_DIRECT = frozenset({"zstd", "blosc", "lz4"})

def _fill(data_type: DataType) -> np.ndarray[Any, Any]:
    return np.zeros((), dtype=data_type.numpy_dtype)


class _ChainPipeline(CodecPipeline):
    """Shared machinery: plans cached per key, error wrapping, pickling and dask tokens."""

    def __init__(
        self,
        aa: Sequence[ArrayArrayCodec],
        ab: ArrayBytesCodec,
        bb: Sequence[BytesBytesCodec],
        *,
        data_type: DataType,
        args: dict[str, Any],
    ) -> None:
        self._aa, self._ab, self._bb = tuple(aa), ab, tuple(bb)
        self.data_type = data_type
        self._args = args
        self._plans: dict[Any, ChunkPlan] = {}

    @abstractmethod
    def _plan_for(self, spec: ChunkSpec) -> ChunkPlan: ...

    def check_stored(self, data: BufferLike, spec: ChunkSpec) -> None:
        self._plan_for(spec).check_stored(data)

    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        try:
            plan = self._plan_for(spec)
            plan.check_stored(data)
            return plan.decode(data, spec)
        except (ZarrDaskError, MemoryError):
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"chunk cannot be decoded ({type(e).__name__}: {e}): truncated or corrupt"
            ) from e

    def decode_into(self, data: BufferLike, spec: ChunkSpec, out: np.ndarray[Any, Any]) -> None:
        if out.shape != spec.shape:
            raise ValueError(f"out has shape {out.shape}, the chunk has shape {spec.shape}")
        try:
            plan = self._plan_for(spec)
            plan.check_stored(data)
            done = plan.decode_into(data, spec, out)
        except (ZarrDaskError, MemoryError):
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"chunk cannot be decoded ({type(e).__name__}: {e}): truncated or corrupt"
            ) from e
        if not done:
            out[...] = self.decode(data, spec)

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> bytes:
        if chunk.shape != spec.shape:
            raise ChunkEncodeError(
                f"chunk has shape {chunk.shape}, expected the full chunk shape {spec.shape}"
            )
        try:
            return self._plan_for(spec).encode(chunk, spec)
        except (ZarrDaskError, MemoryError):
            raise
        except Exception as e:
            raise ChunkEncodeError(f"chunk cannot be encoded ({type(e).__name__}: {e})") from e

    def direct_codec(self, spec: ChunkSpec) -> str | None:
        plan = self._plan_for(spec)
        if plan.aa or plan._swap or not isinstance(plan.ab, BytesCodec) or spec.dtype.hasobject:
            return None
        if not plan.bb:
            return "raw"
        codec = plan.bb[0]
        if len(plan.bb) == 1 and isinstance(codec, NumcodecsBytesBytes) and codec.codec_id in _DIRECT:
            return codec.codec_id
        return None

    def fixed_encoded_size(self, shape: tuple[int, ...]) -> int | None:
        default = self._default_spec
        spec = ChunkSpec(
            shape=shape, data_type=self.data_type, fill_value=default.fill_value, order=default.order
        )
        return self._plan_for(spec).encoded_size

    @property
    def codecs(self) -> tuple[Codec, ...]:
        """The codecs in encode order (v2: filters then compressor, with the implicit array->bytes step)."""
        return tuple(self._plan_for(self._default_spec).codecs())

    @property
    @abstractmethod
    def _default_spec(self) -> ChunkSpec: ...

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.zarr_format, self._args))

    def _token(self) -> tuple[Any, ...]:
        dt = self.data_type
        args = {k: v for k, v in self._args.items() if k != "data_type"}
        return (
            type(self).__name__,
            json.dumps(args, sort_keys=True, default=str),
            dt.name,
            json.dumps(dt.configuration, sort_keys=True, default=str),
            str(dt.numpy_dtype),
            dt.vlen,
            dt.zarr_format,
        )

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return self._token()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ChainPipeline) and self._token() == other._token()

    def __hash__(self) -> int:
        return hash(self._token())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r}, data_type={self.data_type.name!r})"


def _rebuild(zarr_format: int, args: dict[str, Any]) -> CodecPipeline:
    if zarr_format == 3:
        return pipeline_from_v3(**args)
    return pipeline_from_v2(**args)


class V3Pipeline(_ChainPipeline):
    """A Zarr v3 codec chain bound to the array's data type."""

    zarr_format: Literal[2, 3] = 3

    def __init__(
        self,
        aa: Sequence[ArrayArrayCodec],
        ab: ArrayBytesCodec,
        bb: Sequence[BytesBytesCodec],
        *,
        data_type: DataType,
        chunk_shape: tuple[int, ...],
        args: dict[str, Any],
    ) -> None:
        super().__init__(aa, ab, bb, data_type=data_type, args=args)
        self.chunk_shape = chunk_shape
        self._default = ChunkSpec(shape=chunk_shape, data_type=data_type, fill_value=_fill(data_type))
        self._plans[chunk_shape] = ChunkPlan(self._aa, self._ab, self._bb, self._default)

    @property
    def _default_spec(self) -> ChunkSpec:
        return self._default

    def _plan_for(self, spec: ChunkSpec) -> ChunkPlan:
        plan = self._plans.get(spec.shape)
        if plan is None:
            plan = self._plans[spec.shape] = ChunkPlan(self._aa, self._ab, self._bb, spec)
        return plan

    def to_json(self) -> list[dict[str, Any]]:
        """The codec objects as zarr-python writes them (canonical form, defaults filled in)."""
        return [c.to_json() for c in self._plans[self.chunk_shape].codecs()]


class V2Pipeline(_ChainPipeline):
    """Zarr v2 filters + compressor (and the chunk memory order) bound to the array's data type."""

    zarr_format: Literal[2, 3] = 2

    def __init__(
        self,
        aa: Sequence[ArrayArrayCodec],
        ab: ArrayBytesCodec,
        bb: Sequence[BytesBytesCodec],
        *,
        data_type: DataType,
        order: Literal["C", "F"],
        args: dict[str, Any],
    ) -> None:
        super().__init__(aa, ab, bb, data_type=data_type, args=args)
        self.order = order
        self._default = ChunkSpec(shape=(1,), data_type=data_type, fill_value=_fill(data_type), order=order)
        self._plan_for(self._default)  # validates the chain against the data type

    @property
    def _default_spec(self) -> ChunkSpec:
        return self._default

    def _plan_for(self, spec: ChunkSpec) -> ChunkPlan:
        key = (spec.shape, spec.order)
        plan = self._plans.get(key)
        if plan is None:
            aa = self._aa
            if spec.order == "F" and len(spec.shape) > 1:
                aa = (TransposeCodec(tuple(reversed(range(len(spec.shape))))), *aa)
            plan = self._plans[key] = ChunkPlan(aa, self._ab, self._bb, spec)
        return plan

    def to_json(self) -> dict[str, Any]:
        """``{"compressor": dict | None, "filters": list | None}`` as given (an empty list becomes None)."""
        return {
            "compressor": copy.deepcopy(self._args["compressor"]),
            "filters": copy.deepcopy(self._args["filters"]) or None,
        }


# ----------------------------------------------------------------------------------------------- order rules
def _split_v3(
    codecs: Sequence[Codec],
) -> tuple[list[ArrayArrayCodec], ArrayBytesCodec, list[BytesBytesCodec]]:
    aa: list[ArrayArrayCodec] = []
    bb: list[BytesBytesCodec] = []
    ab: tuple[int, ArrayBytesCodec] | None = None
    rule = "the order must be: array->array codecs, exactly one array->bytes codec, then bytes->bytes codecs"
    for i, codec in enumerate(codecs):
        if isinstance(codec, ArrayArrayCodec):
            if ab is not None:
                raise MetadataError(
                    f"codec {codec.name!r} (array->array, position {i}) comes after the array->bytes codec "
                    f"{ab[1].name!r} (position {ab[0]}); {rule}"
                )
            aa.append(codec)
        elif isinstance(codec, ArrayBytesCodec):
            if ab is not None:
                raise MetadataError(
                    f"codec {codec.name!r} (position {i}) is a second array->bytes codec after {ab[1].name!r} "
                    f"(position {ab[0]}); {rule}"
                )
            ab = (i, codec)
        elif isinstance(codec, BytesBytesCodec):
            if ab is None:
                raise MetadataError(
                    f"codec {codec.name!r} (bytes->bytes, position {i}) comes before the array->bytes codec; {rule}"
                )
            bb.append(codec)
    if ab is None:
        raise MetadataError(
            f"'codecs' {[c.name for c in codecs]} has no array->bytes codec; add "
            '{"name": "bytes", "configuration": {"endian": "little"}} (or "vlen-utf8" for strings)'
        )
    return aa, ab[1], bb


def pipeline_from_v3(
    codecs: Sequence[Any],
    *,
    data_type: DataType,
    chunk_shape: tuple[int, ...],
    allow_unsafe_codecs: bool = False,
) -> CodecPipeline:
    """Build the pipeline of a v3 array from its ``codecs`` metadata.

    Parameters
    ----------
    codecs
        The ``codecs`` list: codec objects (``{"name", "configuration", "must_understand"}``) or short-hand
        name strings.
    data_type
        The array's data type.
    chunk_shape
        The (regular) chunk shape, resolved now; other shapes (rectilinear grids) are resolved on first use.
    allow_unsafe_codecs
        Allow ``numcodecs.pickle`` & co.

    Returns
    -------
    CodecPipeline
        ``to_json()`` gives the canonical codec list (as zarr-python writes it).

    Raises
    ------
    UnknownCodecError, UnsafeCodecError, MetadataError
        Unknown / refused codecs, bad configurations and order-rule violations (named in the message).

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.codecs import ChunkSpec
    >>> from zarr_dask.spec.dtypes import DataType
    >>> dt = DataType(name="int32", numpy_dtype=np.dtype("int32"), zarr_format=3)
    >>> codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, "zstd"]
    >>> p = pipeline_from_v3(codecs, data_type=dt, chunk_shape=(2,))
    >>> p.to_json()[1]
    {'name': 'zstd', 'configuration': {'level': 0, 'checksum': False}}
    >>> spec = ChunkSpec(shape=(2,), data_type=dt, fill_value=np.zeros((), "int32"))
    >>> p.decode(p.encode(np.array([1, 2], dtype="int32"), spec), spec)
    array([1, 2], dtype=int32)
    """
    if isinstance(codecs, str | bytes | Mapping) or not isinstance(codecs, Sequence):
        raise MetadataError(f"'codecs' must be a list of codec objects, got {codecs!r}")
    if not codecs:
        raise MetadataError('\'codecs\' is empty; it needs one array->bytes codec, e.g. [{"name": "bytes"}]')
    parsed = [codec_from_v3(entry, allow_unsafe=allow_unsafe_codecs) for entry in codecs]
    aa, ab, bb = _split_v3(parsed)
    args = {
        "codecs": copy.deepcopy(list(codecs)),
        "data_type": data_type,
        "chunk_shape": tuple(chunk_shape),
        "allow_unsafe_codecs": allow_unsafe_codecs,
    }
    _log.debug("v3 pipeline for %s %s: %s", data_type.name, tuple(chunk_shape), [c.name for c in (*aa, ab, *bb)])
    return V3Pipeline(aa, ab, bb, data_type=data_type, chunk_shape=tuple(chunk_shape), args=args)


def _split_v2(
    codecs: Sequence[Codec],
) -> tuple[list[ArrayArrayCodec], ArrayBytesCodec, list[BytesBytesCodec]]:
    aa: list[ArrayArrayCodec] = []
    bb: list[BytesBytesCodec] = []
    ab: ArrayBytesCodec | None = None
    for codec in codecs:
        if isinstance(codec, ArrayArrayCodec) and ab is None and not bb:
            aa.append(codec)
        elif isinstance(codec, ArrayBytesCodec) and ab is None and not bb:
            ab = codec
        elif isinstance(codec, BytesBytesCodec):
            bb.append(codec)
        else:
            raise MetadataError(
                f"v2 codec {codec.name!r} ({_KIND_TEXT[codec.kind]}) cannot follow "
                f"{'the object codec ' + repr(ab.name) if ab is not None else 'a bytes codec'} in filters + "
                "compressor; array filters must come first, then at most one object codec, then byte codecs"
            )
    return aa, ab if ab is not None else BytesCodec(None, v2=True), bb


def pipeline_from_v2(
    *,
    compressor: Mapping[str, Any] | None,
    filters: Sequence[Mapping[str, Any]] | None,
    data_type: DataType,
    order: str,
    allow_unsafe_codecs: bool = False,
) -> CodecPipeline:
    """Build the pipeline of a v2 array from its ``compressor``, ``filters`` and ``order``.

    Encoding applies the filters in order, then the compressor; decoding the reverse, then views the bytes as
    ``data_type.numpy_dtype`` (the stored typestr) in ``order``. Object arrays need ``vlen-utf8`` /
    ``vlen-bytes`` (as a filter or as the compressor).

    Parameters
    ----------
    compressor
        The ``.zarray`` ``compressor`` (a numcodecs config with ``id``) or None.
    filters
        The ``.zarray`` ``filters`` list or None.
    data_type
        The array's (v2) data type; decoded chunks have its ``numpy_dtype``, byte order included.
    order
        ``"C"`` or ``"F"``: the default chunk memory order (each call uses ``spec.order``).
    allow_unsafe_codecs
        Allow ``pickle``, ``json2``, ``msgpack2``, ``vlen-array``.

    Returns
    -------
    CodecPipeline
        ``to_json()`` gives ``{"compressor": ..., "filters": ...}`` as given (``[]`` filters -> None).

    Raises
    ------
    UnknownCodecError, UnsafeCodecError, MetadataError
        Ids outside the allowlist, ``pickle`` & co. without ``allow_unsafe_codecs``, bad configurations.
    """
    if order not in ("C", "F"):
        raise MetadataError(f"'order' must be 'C' or 'F', got {order!r}")
    if filters is not None and (isinstance(filters, str | Mapping) or not isinstance(filters, Sequence)):
        raise MetadataError(f"'filters' must be a list of codec configs or null, got {filters!r}")
    items = [codec_from_v2(f, allow_unsafe=allow_unsafe_codecs, where="'filters'") for f in filters or ()]
    if compressor is not None:
        items.append(codec_from_v2(compressor, allow_unsafe=allow_unsafe_codecs, where="'compressor'"))
    aa, ab, bb = _split_v2(items)
    args = {
        "compressor": copy.deepcopy(dict(compressor)) if compressor is not None else None,
        "filters": [copy.deepcopy(dict(f)) for f in filters] if filters else None,
        "data_type": data_type,
        "order": order,
        "allow_unsafe_codecs": allow_unsafe_codecs,
    }
    return V2Pipeline(aa, ab, bb, data_type=data_type, order="F" if order == "F" else "C", args=args)
