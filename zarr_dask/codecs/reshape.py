"""The zarr-extensions ``reshape`` codec (array->array): a C-order reshape of each chunk (a view when it can be).

``shape`` gives each output dimension as a size, ``-1`` (inferred, at most once) or a list of input dimensions
whose sizes multiply (useful with variable chunk sizes). The registry's constraints are checked against every
chunk shape: input dimensions listed in strictly increasing order, each list's dimensions aligned with the
output dimensions before and after it, and the same number of elements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Self

import numpy as np

from zarr_dask.codecs.base import ArrayArrayCodec, ChunkSpec, Codec, derived_spec
from zarr_dask.errors import MetadataError

__all__ = ["ReshapeCodec", "parse_reshape"]

Array = np.ndarray[Any, Any]
Item = int | tuple[int, ...]


def _error(problem: str) -> MetadataError:
    return MetadataError(f"codec 'reshape': {problem}")


def _output_shape(items: tuple[Item, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape for input ``shape`` (MetadataError when the registry's constraints fail)."""
    dims = [d for item in items if isinstance(item, tuple) for d in item]
    if any(b <= a for a, b in zip(dims, dims[1:], strict=False)) or any(d >= len(shape) for d in dims):
        raise _error(f"the input dimensions {dims} must be in strictly increasing order and below {len(shape)}")
    sizes = [math.prod(shape[d] for d in item) if isinstance(item, tuple) else item for item in items]
    total = math.prod(shape)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if known == 0 or total % known:
            raise _error(f"no size for -1 makes {sizes} hold the {total} elements of the chunk {list(shape)}")
        sizes[sizes.index(-1)] = total // known
    if math.prod(sizes) != total:
        raise _error(f"the output shape {sizes} does not hold the {total} elements of the chunk {list(shape)}")
    for i, item in enumerate(items):
        if isinstance(item, tuple) and item and (
            math.prod(sizes[:i]) != math.prod(shape[: item[0]])
            or math.prod(sizes[i + 1 :]) != math.prod(shape[item[-1] + 1 :])
        ):
            raise _error(f"output dimension {i} ({list(item)}) does not line up with the input dimensions of the "
                         f"chunk {list(shape)}: the dimensions before and after it must hold as many elements")  # fmt: skip
    return tuple(sizes)


class ReshapeCodec(ArrayArrayCodec):
    """``{"name": "reshape", "configuration": {"shape": [[0, 1], [2], 3]}}``.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.codecs import ChunkSpec
    >>> from zarr_dask.spec import parse_data_type
    >>> spec = ChunkSpec(shape=(100, 50, 64, 3), data_type=parse_data_type("uint8", zarr_format=3),
    ...                  fill_value=np.zeros((), "u1"))
    >>> parse_reshape({"shape": [[0, 1], [2], 3]}).bind(spec).resolve(spec).shape
    (5000, 64, 3)
    """

    name = "reshape"
    max_ratio = 1

    def __init__(self, items: tuple[Item, ...], output: tuple[int, ...] | None = None) -> None:
        self.items, self.output = items, output

    def bind(self, spec: ChunkSpec) -> Self:
        return type(self)(self.items, _output_shape(self.items, spec.shape))

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        assert self.output is not None, "bind() first"
        return derived_spec(spec, shape=self.output)

    def to_json(self) -> dict[str, Any]:
        shape = [list(item) if isinstance(item, tuple) else item for item in self.items]
        return {"name": self.name, "configuration": {"shape": shape}}

    def encode(self, chunk: Array, spec: ChunkSpec) -> Array:
        assert self.output is not None, "bind() first"
        return chunk.reshape(self.output)

    def decode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return chunk.reshape(spec.shape)


def _item(value: Any) -> Item:
    if isinstance(value, int) and not isinstance(value, bool) and (value >= 1 or value == -1):
        return value
    if isinstance(value, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        return tuple(value)
    raise _error(f"each 'shape' entry must be a positive size, -1 or a list of input dimensions, got {value!r}")


def parse_reshape(configuration: Mapping[str, Any] | None) -> Codec:
    """``reshape``: ``shape`` (required)."""
    config = dict(configuration or {})
    shape = config.pop("shape", None)
    if config:
        raise _error(f"unknown configuration key(s) {sorted(config)}; it takes 'shape'")
    if not isinstance(shape, list):
        raise _error(f"'shape' must be a list, got {shape!r}")
    items = tuple(_item(v) for v in shape)
    if sum(item == -1 for item in items) > 1:
        raise _error(f"-1 may appear at most once in 'shape', got {shape!r}")
    return ReshapeCodec(items)
