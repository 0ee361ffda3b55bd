"""The array node of the Zarr Object Model: :class:`ArraySpec` (a Zarr v2 or v3 array's metadata, no data)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from zarr_dask.errors import MetadataError, ZarrDaskError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec.chunk_grid import RectilinearChunkGrid, RegularChunkGrid
from zarr_dask.spec.dtypes import DataType
from zarr_dask.spec.json import JsonEquality, loads, prefixed, to_jsonable
from zarr_dask.spec.layout import Sharding, sharding_of
from zarr_dask.zom.build import metadata_from_array
from zarr_dask.zom.diff import diff
from zarr_dask.zom.schema import json_schema
from zarr_dask.zom.tree import WriteReport, port
from zarr_dask.zom.v2_to_v3 import array_to_format

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ArrayMetadata", "ArraySpec", "array_metadata", "document", "is_array_document"]

ZarrFormat = Literal[2, 3]
ArrayMetadata: TypeAlias = ArrayMetadataV2 | ArrayMetadataV3


def _plain(obj: Any) -> Any:
    """JSON-like data with tuples turned into lists (pydantic's python-mode dumps use tuples)."""
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def document(obj: Any, what: str) -> dict[str, Any]:
    """A JSON object from a dict or JSON text, with tuples as lists (MetadataError if it is not an object)."""
    if isinstance(obj, str | bytes | bytearray):
        obj = loads(obj, what=what)
    if not isinstance(obj, Mapping):
        raise MetadataError(f"{what} must be a JSON object, got {type(obj).__name__}")
    out: dict[str, Any] = _plain(obj)
    return out


def _with_endian(codecs: Any, multi_byte: bool) -> Any:
    """Give a ``bytes`` codec without ``endian`` the little-endian default (pydantic-zarr writes it bare)."""
    if not isinstance(codecs, list):
        return codecs
    out = []
    for codec in codecs:
        if isinstance(codec, dict) and codec.get("name") in ("bytes", "endian") and multi_byte:
            config = codec.get("configuration") or {}
            if isinstance(config, dict) and "endian" not in config:
                codec = {**codec, "configuration": {**config, "endian": "little"}}
        elif isinstance(codec, dict) and codec.get("name") == "sharding_indexed":
            config = dict(codec.get("configuration") or {})
            config["codecs"] = _with_endian(config.get("codecs"), multi_byte)
            config["index_codecs"] = _with_endian(config.get("index_codecs"), True)
            codec = {**codec, "configuration": config}
        out.append(codec)
    return out


def is_array_document(doc: Mapping[str, Any]) -> bool:
    """True if a ZEP 6 JSON object describes an array (v3: ``node_type``; v2: a shape and no members)."""
    if doc.get("zarr_format") == 3:
        return doc.get("node_type") == "array"
    return "members" not in doc and ("shape" in doc or doc.get("node_type") == "array")


def array_metadata(doc: dict[str, Any]) -> ArrayMetadata:
    """The spec-layer metadata of an array's ZEP 6 JSON (v3: ``zarr.json`` fields; v2: ``.zarray`` fields +
    ``attributes``)."""
    fmt = doc.get("zarr_format")
    if fmt == 3:
        meta3 = ArrayMetadataV3.from_json(doc)
        codecs = _with_endian([dict(c) for c in meta3.codecs], meta3.data_type.has_endianness)
        return dataclasses.replace(meta3, codecs=tuple(codecs))
    if fmt == 2:
        zarray = {k: v for k, v in doc.items() if k not in ("attributes", "node_type")}
        if doc.get("node_type", "array") != "array":
            raise MetadataError(f"field 'node_type' must be 'array' for an array, got {doc['node_type']!r}")
        return ArrayMetadataV2.from_json(zarray, doc.get("attributes"))
    raise MetadataError(f"field 'zarr_format' must be 2 or 3, got {fmt!r}")


class NotebookDisplay:
    """``_repr_html_`` for ZOM specs: the renderer of stored arrays and groups (:mod:`zarr_dask.core.html`)."""

    def _repr_html_(self) -> str:
        from zarr_dask.core.html import spec_html

        return spec_html(self)


@dataclass(frozen=True, kw_only=True, eq=False)
class ArraySpec(NotebookDisplay, JsonEquality):
    """A Zarr array node: its metadata (v2 or v3), attributes included; no data, no store.

    Build one with :meth:`from_array` (from a NumPy / dask array), :meth:`build` (from ``create_array``-style
    arguments), :meth:`from_json`, :meth:`from_store`, or directly from spec-layer metadata.

    Parameters
    ----------
    metadata
        An ``ArrayMetadataV2`` or ``ArrayMetadataV3``.

    Examples
    --------
    >>> import numpy as np
    >>> spec = ArraySpec.from_array(np.zeros((4, 6), "int16"), chunks=(2, 3), dimension_names=["y", "x"])
    >>> spec.shape, spec.zarr_format, spec.dimension_names
    ((4, 6), 3, ('y', 'x'))
    >>> spec.to_json()["chunk_grid"]
    {'name': 'regular', 'configuration': {'chunk_shape': [2, 3]}}
    >>> ArraySpec.from_json(spec.to_json()) == spec
    True
    """

    node_type: ClassVar[Literal["array"]] = "array"
    metadata: ArrayMetadata

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, ArrayMetadataV2 | ArrayMetadataV3):
            raise MetadataError(
                f"ArraySpec.metadata must be ArrayMetadataV2 or ArrayMetadataV3, got {type(self.metadata).__name__}"
            )
        to_jsonable(self.metadata.attributes, "attributes")

    def __repr__(self) -> str:
        grid = self.chunk_grid.to_json()
        parts = [f"zarr_format={self.zarr_format}", f"shape={self.shape}", f"data_type={self.data_type.to_json()!r}",
                 f"chunk_grid={grid['configuration']!r}"]  # fmt: skip
        if self.dimension_names is not None:
            parts.append(f"dimension_names={self.dimension_names}")
        if self.attributes:
            parts.append(f"attributes={self.attributes!r}")
        return f"ArraySpec({', '.join(parts)})"

    # ------------------------------------------------------------------ properties
    @property
    def zarr_format(self) -> ZarrFormat:
        """2 or 3."""
        return self.metadata.zarr_format

    @property
    def shape(self) -> tuple[int, ...]:
        """The array shape."""
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.metadata.shape)

    @property
    def data_type(self) -> DataType:
        """The Zarr data type."""
        return self.metadata.data_type

    @property
    def dtype(self) -> np.dtype[Any]:
        """The NumPy dtype of the data."""
        return self.metadata.data_type.numpy_dtype

    @property
    def attributes(self) -> dict[str, Any]:
        """User attributes (v2: the ``.zattrs`` content)."""
        return self.metadata.attributes

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        """v3 ``dimension_names``; v2 the ``_ARRAY_DIMENSIONS`` attribute when it is valid, else None."""
        return self.metadata.dimension_names

    @property
    def chunk_grid(self) -> RegularChunkGrid | RectilinearChunkGrid:
        """The chunk grid (v2: regular); for sharded arrays the grid of shards."""
        return self.metadata.chunk_grid

    @property
    def sharding(self) -> Sharding | None:
        """How the array is sharded, and its read and write units (:func:`~zarr_dask.spec.layout.sharding_of`),
        or None when it is not sharded."""
        return sharding_of(self.metadata)

    @property
    def fill_value(self) -> np.ndarray[Any, Any] | None:
        """The fill value as a 0-d NumPy array (v2: may be None)."""
        return self.metadata.fill_value

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_json(cls, obj: Any) -> ArraySpec:
        """Parse the ZEP 6 JSON of an array (a dict, or JSON text).

        v3: the ``zarr.json`` fields; v2: the ``.zarray`` fields plus ``attributes``.  Also accepts
        pydantic-zarr's ``model_dump()`` (tuples, a ``bytes`` codec without ``endian`` -- read as little).

        Raises
        ------
        MetadataError
            Naming the field and the value (subclasses for data types, fill values, extensions).
        """
        doc = document(obj, "the ZEP 6 JSON")
        if not is_array_document(doc):
            raise MetadataError("the JSON describes a group, not an array; use GroupSpec.from_json")
        try:
            return cls(metadata=array_metadata(doc))
        except ZarrDaskError as e:
            raise prefixed(e, "node '/'") from None

    def to_json(self) -> dict[str, Any]:
        """The ZEP 6 JSON (pydantic-zarr's field names and order; v3 keeps ``dimension_names`` only if set).

        Examples
        --------
        >>> import numpy as np
        >>> sorted(ArraySpec.from_array(np.arange(3), zarr_format=2).to_json())  # doctest: +NORMALIZE_WHITESPACE
        ['attributes', 'chunks', 'compressor', 'dimension_separator', 'dtype', 'fill_value', 'filters',
         'order', 'shape', 'zarr_format']
        """
        doc = self.metadata.to_json()
        head: dict[str, Any] = {"zarr_format": self.zarr_format}
        if self.zarr_format == 3:
            head["node_type"] = "array"
        head["attributes"] = to_jsonable(self.metadata.attributes, "attributes")
        head.update((k, v) for k, v in doc.items() if k not in ("zarr_format", "node_type", "attributes"))
        if self.zarr_format == 3:  # pydantic-zarr's order: storage_transformers before dimension_names
            head = _move_to_end(head, "dimension_names")
        return head

    def _json_key(self) -> Any:
        return self.to_json()

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_array(cls, array: Any, *, zarr_format: ZarrFormat | None = None, **overrides: Any) -> ArraySpec:
        """Describe a NumPy or dask array (or anything with ``shape`` and ``dtype``) as a Zarr array.

        Chunks come from the array where it has them: dask's chunks become a regular grid when uniform
        (the last chunk may be smaller), else -- Zarr v3 only -- a rectilinear grid; ``attrs`` and ``dims``
        (xarray) become ``attributes`` and ``dimension_names``.  A zarr_dask ``Array`` is described exactly.

        Parameters
        ----------
        array
            A ``numpy.ndarray``, ``dask.array.Array``, xarray ``DataArray``, zarr_dask ``Array``...
        zarr_format
            2 or 3 (default: the array's own format if it has one, else 3).
        **overrides
            ``create_array`` arguments: ``chunks``, ``shards`` (v3: chunks are then the inner chunks),
            ``fill_value``, ``compressors``, ``filters``, ``serializer``, ``order``, ``chunk_key_encoding``,
            ``dimension_separator``, ``dimension_names``, ``attributes``; also ``shape`` and ``dtype``.

        Raises
        ------
        MetadataError
            For invalid arguments (named), irregular chunks for Zarr v2, shards that the chunks do not divide.

        Examples
        --------
        >>> import dask.array as da
        >>> spec = ArraySpec.from_array(da.zeros((10, 4), chunks=((3, 3, 4), 4)))
        >>> spec.chunk_grid.to_json()["name"]
        'rectilinear'
        """
        return cls(metadata=metadata_from_array(array, zarr_format=zarr_format, **overrides))

    @classmethod
    def build(cls, *, shape: Any, dtype: Any = "float64", zarr_format: ZarrFormat = 3, **options: Any) -> ArraySpec:
        """An array spec from ``create_array``-style arguments (see :meth:`from_array` for ``options``).

        Examples
        --------
        >>> spec = ArraySpec.build(shape=(100, 100), dtype="f4", chunks=(10, 10), shards=(50, 50))
        >>> spec.to_json()["codecs"][0]["name"]
        'sharding_indexed'
        """
        return cls.from_array(None, zarr_format=zarr_format, shape=shape, dtype=dtype, **options)

    def replace(self, **changes: Any) -> ArraySpec:
        """A copy with metadata fields changed (``attributes``, ``shape``, ``dimension_names``, ``codecs``...).

        Examples
        --------
        >>> import numpy as np
        >>> ArraySpec.from_array(np.zeros(3)).replace(attributes={"units": "m"}).attributes
        {'units': 'm'}
        """
        names = {f.name for f in dataclasses.fields(self.metadata)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise MetadataError(
                f"{unknown} are not fields of Zarr v{self.zarr_format} array metadata; use one of {sorted(names)}"
            )
        return ArraySpec(metadata=dataclasses.replace(self.metadata, **changes))

    def to_format(self, zarr_format: ZarrFormat, *, chunk_key_encoding: Literal["v2", "default"] = "v2") -> ArraySpec:
        """This array in another Zarr format (v2 -> v3; see :func:`zarr_dask.zom.v2_to_v3.array_to_v3`)."""
        return ArraySpec(metadata=array_to_format(self.metadata, zarr_format, chunk_key_encoding=chunk_key_encoding))

    # ------------------------------------------------------------------ comparison, schema, I/O
    def like(self, other: Any, *, exclude: Iterable[str] = ()) -> bool:
        """True if ``other`` (a spec, or a zarr_dask Array) has the same structure, ignoring ``exclude``.

        ``exclude`` holds field names (``"attributes"``, ``"attributes.history"``, ``"shape"``...);
        :func:`zarr_dask.zom.diff` says what differs.
        """
        return not diff(self, other, exclude=exclude)

    @classmethod
    def json_schema(cls, zarr_format: ZarrFormat = 3) -> dict[str, Any]:
        """The JSON Schema of an array node (ZEP 6, corrected; see :mod:`zarr_dask.zom.schema`)."""
        return json_schema(zarr_format, "array")

    @classmethod
    def from_store(cls, store: Any, *, path: str = "", storage_options: Mapping[str, Any] | None = None) -> ArraySpec:
        """The spec of the array at ``path`` (one batched read).

        Raises
        ------
        ArrayNotFoundError
            If there is no array there.
        """
        spec: ArraySpec = port("read_array")(store, path=path, storage_options=storage_options)
        return spec

    def to_store(
        self,
        store: Any,
        *,
        path: str = "",
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> WriteReport:
        """Create the array's metadata at ``path`` (idempotent; see :meth:`GroupSpec.to_store`)."""
        report: WriteReport = port("write_spec")(
            self, store, path=path, overwrite=overwrite, storage_options=storage_options
        )
        return report


def _move_to_end(doc: dict[str, Any], key: str) -> dict[str, Any]:
    if key in doc:
        doc[key] = doc.pop(key)
    return doc
