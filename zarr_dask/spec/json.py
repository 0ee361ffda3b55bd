"""JSON encoding and decoding of Zarr metadata documents, plus the small parsers every document shares.

Reading is lenient the way zarr-python is: bare ``NaN``, ``Infinity`` and ``-Infinity`` tokens are accepted
(zarr-python writes them in attributes).  Writing reproduces zarr-python's bytes: ``json.dumps`` with
``indent=2``, ASCII-only output (``ensure_ascii``), non-finite floats as the bare tokens.  NumPy scalars and
arrays in attributes are converted to Python values first; anything else that has no JSON form raises a
:class:`~zarr_dask.errors.MetadataError` naming where it was found.

The ``parse_*`` helpers turn JSON values into validated Python values and raise ``MetadataError`` messages
that name the field, the value and the fix.  They are used by every metadata module of :mod:`zarr_dask.spec`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from zarr_dask.errors import MetadataError, ZarrDaskError

__all__ = [
    "MAX_INT",
    "JsonEquality",
    "canonical_json",
    "coerce_int_tuple",
    "dumps",
    "loads",
    "loads_object",
    "parse_attributes",
    "parse_int",
    "parse_int_tuple",
    "parse_named_config",
    "prefixed",
    "require_object",
    "to_jsonable",
]

#: Largest shape / chunk / index value accepted (everything must fit an int64).
MAX_INT = 2**63 - 1

_SNIPPET = 30


def _decode_text(data: bytes | bytearray | memoryview | str, what: str) -> str:
    if isinstance(data, str):
        return data
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MetadataError(f"{what}: expected bytes or str to decode as JSON, got {type(data).__name__}")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetadataError(
            f"{what} is not valid UTF-8 (byte {e.start}: {bytes(data)[e.start : e.start + 8]!r}); "
            "metadata documents must be UTF-8 encoded JSON"
        ) from None


def loads(data: bytes | bytearray | memoryview | str, *, what: str = "metadata document") -> Any:
    """Decode a JSON document, accepting the bare ``NaN``/``Infinity``/``-Infinity`` tokens.

    Parameters
    ----------
    data
        UTF-8 encoded bytes (or an already decoded string).
    what
        What the document is (``".zarray"``, ``"zarr.json"``...), used in error messages.

    Returns
    -------
    Any
        The decoded value (dict, list, str, int, float, bool or None).

    Raises
    ------
    MetadataError
        If the data is not UTF-8 or not JSON; the message gives the position and a snippet.

    Examples
    --------
    >>> loads(b'{"fill_value": NaN}')
    {'fill_value': nan}
    """
    text = _decode_text(data, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        start = max(0, e.pos - _SNIPPET)
        snippet = text[start : e.pos + _SNIPPET]
        raise MetadataError(
            f"{what} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno} (char {e.pos}), "
            f"near {snippet!r}; rewrite the document as valid JSON"
        ) from None
    except (RecursionError, ValueError) as e:  # too deeply nested / integer with too many digits
        raise MetadataError(f"{what} cannot be decoded as JSON: {e}") from None


def loads_object(data: bytes | bytearray | memoryview | str, what: str) -> dict[str, Any]:
    """Decode a JSON document that must be a JSON object.

    Parameters
    ----------
    data
        UTF-8 encoded bytes or a string.
    what
        The document's name, for error messages.

    Returns
    -------
    dict
        The decoded object.

    Raises
    ------
    MetadataError
        If the data is not JSON or not a JSON object.

    Examples
    --------
    >>> loads_object(b'{"zarr_format": 2}', ".zgroup")
    {'zarr_format': 2}
    """
    obj = loads(data, what=what)
    return require_object(obj, what)


def require_object(obj: Any, what: str) -> dict[str, Any]:
    """Return ``obj`` if it is a JSON object (a dict with string keys), else raise ``MetadataError``."""
    if not isinstance(obj, dict):
        raise MetadataError(f"{what} must be a JSON object, got {_describe(obj)}")
    return obj


def _describe(obj: Any) -> str:
    text = repr(obj)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(obj).__name__} {text}"


def _location(where: str, key: Any) -> str:
    return f"{where}[{key!r}]"


def to_jsonable(obj: Any, where: str = "value") -> Any:
    """Convert ``obj`` to plain JSON types (dict with str keys, list, str, int, float, bool, None).

    NumPy scalars become Python scalars and arrays nested lists; tuples become lists.

    Parameters
    ----------
    obj
        The value to convert.
    where
        Where the value lives (e.g. ``"attributes"``), used to name the offending item in errors.

    Returns
    -------
    Any
        A structure ``json.dumps`` can encode.

    Raises
    ------
    MetadataError
        If a value has no JSON form, naming its location, e.g. ``attributes['when']``.

    Examples
    --------
    >>> to_jsonable({"a": np.float32(0.5), "b": np.arange(2)})
    {'a': 0.5, 'b': [0, 1]}
    """
    if obj is None or isinstance(obj, str | bool | int | float):
        return obj
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise MetadataError(
                    f"{_location(where, key)}: JSON object keys must be strings, got {type(key).__name__}; "
                    "convert the key to str"
                )
            out[str(key)] = to_jsonable(value, _location(where, key))
        return out
    if isinstance(obj, list | tuple):
        return [to_jsonable(v, _location(where, i)) for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), where)
    if isinstance(obj, np.generic):
        value = obj.item()
        if isinstance(value, str | bool | int | float) or value is None:
            return value
    raise MetadataError(
        f"{where}: value {_describe(obj)} cannot be written as JSON; "
        "use str, int, float, bool, None, lists, dicts or NumPy numbers/arrays"
    )


def dumps(obj: Any, *, indent: int | None = 2, where: str = "value") -> bytes:
    """Encode ``obj`` as zarr-python writes metadata: ``indent=2``, ASCII, bare ``NaN``/``Infinity``.

    Parameters
    ----------
    obj
        The document (NumPy values are converted first, see :func:`to_jsonable`).
    indent
        Indentation; ``None`` gives the single-line form zarr-python uses for ``.zmetadata``.
    where
        Name of the document or field, for error messages.

    Returns
    -------
    bytes
        The encoded document.

    Raises
    ------
    MetadataError
        If some value has no JSON form.

    Examples
    --------
    >>> dumps({"a": [1, float("nan")]}, indent=None)
    b'{"a": [1, NaN]}'
    """
    return json.dumps(to_jsonable(obj, where), indent=indent, allow_nan=True).encode("ascii")


def canonical_json(obj: Any) -> str:
    """A canonical string of ``obj`` (sorted keys, no spaces): equal documents give equal strings.

    Used for equality, hashing and dask tokens of metadata objects; NaN compares equal to NaN here.
    """
    return json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"), allow_nan=True)


def parse_int(obj: Any, what: str, *, minimum: int = 0) -> int:
    """A JSON integer ``>= minimum`` that fits an int64 (bools and floats are refused).

    Raises
    ------
    MetadataError
        Naming ``what`` and the value.
    """
    if isinstance(obj, np.integer):
        obj = int(obj)
    if not isinstance(obj, int) or isinstance(obj, bool):
        raise MetadataError(f"{what} must be an integer >= {minimum}, got {_describe(obj)}")
    if obj < minimum or obj > MAX_INT:
        raise MetadataError(f"{what} must be an integer in [{minimum}, 2**63-1], got {obj}")
    return obj


def parse_int_tuple(obj: Any, what: str, *, minimum: int = 0) -> tuple[int, ...]:
    """A JSON list (or tuple) of integers ``>= minimum``, as a tuple.

    Raises
    ------
    MetadataError
        If ``obj`` is not a list or an item is not such an integer (the message names the item).
    """
    if not isinstance(obj, list | tuple):
        raise MetadataError(f"{what} must be a list of integers >= {minimum}, got {_describe(obj)}")
    return tuple(parse_int(v, f"{what}[{i}]", minimum=minimum) for i, v in enumerate(obj))


def parse_named_config(
    obj: Any, what: str, *, allow_must_understand_false: bool = False
) -> tuple[str, dict[str, Any] | None]:
    """Parse an extension point: short-hand name string or ``{"name", "configuration", "must_understand"}``.

    Parameters
    ----------
    obj
        The JSON value.
    what
        The field (``"chunk_grid"``, ``"codecs[1]"``...), for error messages.
    allow_must_understand_false
        Whether ``"must_understand": false`` is allowed (the spec forbids it for data types, chunk grids
        and chunk key encodings).

    Returns
    -------
    tuple
        ``(name, configuration)``; ``configuration`` is None when absent.

    Raises
    ------
    MetadataError
        If the value has the wrong shape or unknown keys.

    Examples
    --------
    >>> parse_named_config("default", "chunk_key_encoding")
    ('default', None)
    >>> parse_named_config({"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_grid")
    ('regular', {'chunk_shape': [2]})
    """
    if isinstance(obj, str):
        return _check_name(obj, what), None
    if not isinstance(obj, dict):
        raise MetadataError(
            f"{what} must be a name string or an object with 'name' and 'configuration', got {_describe(obj)}"
        )
    extra = sorted(set(obj) - {"name", "configuration", "must_understand"})
    if extra:
        raise MetadataError(
            f"{what} has unexpected key(s) {extra}; an extension object may only hold "
            "'name', 'configuration' and 'must_understand'"
        )
    if "name" not in obj:
        raise MetadataError(f"{what} is missing its 'name': {_describe(obj)}")
    name = _check_name(obj["name"], f"{what}.name")
    must_understand = obj.get("must_understand", True)
    if not isinstance(must_understand, bool):
        raise MetadataError(f"{what}.must_understand must be true or false, got {_describe(must_understand)}")
    if must_understand is False and not allow_must_understand_false:
        raise MetadataError(
            f'{what} ({name!r}) sets "must_understand": false, which the Zarr spec does not allow here; '
            "remove the key"
        )
    config = obj.get("configuration")
    if config is not None and not isinstance(config, dict):
        raise MetadataError(f"{what}.configuration must be a JSON object, got {_describe(config)}")
    return name, config


def _check_name(obj: Any, what: str) -> str:
    if not isinstance(obj, str) or not obj:
        raise MetadataError(f"{what} must be a non-empty string, got {_describe(obj)}")
    return obj


def coerce_int_tuple(value: Any, what: str, *, minimum: int = 0) -> tuple[int, ...]:
    """Any sequence of integers (Python or NumPy) ``>= minimum`` as a tuple of Python ints (for ``__post_init__``)."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise MetadataError(f"{what} must be a sequence of integers >= {minimum}, got {_describe(value)}")
    return tuple(parse_int(v, f"{what}[{i}]", minimum=minimum) for i, v in enumerate(value))


def parse_attributes(obj: Any, what: str) -> dict[str, Any]:
    """User attributes: a JSON object (``None`` -> ``{}``), deep-copied so the metadata owns it."""
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise MetadataError(f"{what} must be a JSON object (a dict), got {_describe(obj)}")
    for key in obj:
        if not isinstance(key, str):
            raise MetadataError(f"{what} keys must be strings, got {_describe(key)}")
    return copy.deepcopy(dict(obj))


def prefixed(error: ZarrDaskError, prefix: str) -> ZarrDaskError:
    """A copy of ``error`` (same class) whose message starts with ``prefix`` (e.g. the document name)."""
    return type(error)(f"{prefix}: {error.problem}", store=error.store, path=error.path)


_T = TypeVar("_T")


class JsonEquality:
    """Mixin: equality, hash and dask token from the canonical JSON of :meth:`_json_key`.

    Metadata objects hold NumPy fill values and attribute dicts, which dataclass equality handles badly
    (``NaN != NaN``, unhashable dicts); comparing their JSON form is exact and NaN-safe.
    """

    #: Remember derived values (:meth:`memo`): for classes whose instances are never changed in place, the
    #: metadata of arrays, which the parse cache hands out again on every open of the same document.
    _memoize: ClassVar[bool] = False

    def _json_key(self) -> Any:
        raise NotImplementedError

    def memo(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """``build()``, remembered under ``key`` on memoizing classes (and shared by the copies that the parse
        cache hands out of one parsed document); built each time on the others."""
        if not self._memoize:
            return build()
        memo: dict[Hashable, Any] | None = self.__dict__.get("_memo")
        if memo is None:
            memo = self.__dict__.setdefault("_memo", {})
        try:
            return cast(_T, memo[key])
        except KeyError:
            value = memo[key] = build()  # two threads may both build it: same value, harmless
            return value

    def canonical(self) -> str:
        """The canonical JSON string compared by ``==``, hashed, and tokenized by dask."""
        return self.memo("canonical", lambda: canonical_json(self._json_key()))

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the fields, not the remembered values (rebuilt on demand)."""
        state = dict(self.__dict__)
        state.pop("_memo", None)
        return state

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.canonical()))

    def __dask_tokenize__(self) -> tuple[str, str]:
        return (type(self).__name__, self.canonical())
