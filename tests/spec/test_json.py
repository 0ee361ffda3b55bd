"""zarr_dask.spec.json: lenient decoding, zarr-python style encoding, shared parsers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_dask.errors import MetadataError
from zarr_dask.spec.json import (
    canonical_json,
    dumps,
    loads,
    loads_object,
    parse_int,
    parse_int_tuple,
    parse_named_config,
    to_jsonable,
)


def test_loads_accepts_bare_non_finite_tokens() -> None:
    out = loads(b'{"a": NaN, "b": Infinity, "c": -Infinity}')
    assert math.isnan(out["a"])
    assert out["b"] == math.inf
    assert out["c"] == -math.inf


def test_loads_str_and_bytes() -> None:
    assert loads('{"a": 1}') == loads(b'{"a": 1}') == {"a": 1}
    assert loads(bytearray(b"[1]")) == [1]
    assert loads(memoryview(b"[1]")) == [1]


def test_loads_invalid_json_names_position_and_snippet() -> None:
    with pytest.raises(MetadataError) as info:
        loads(b'{"shape": [1, 2,, 3]}', what=".zarray")
    msg = str(info.value)
    assert ".zarray" in msg
    assert "line 1 column 17" in msg
    assert "[1, 2,, 3]" in msg


def test_loads_invalid_utf8() -> None:
    with pytest.raises(MetadataError, match="not valid UTF-8"):
        loads(b'{"a": "\xff"}')


def test_loads_not_bytes() -> None:
    with pytest.raises(MetadataError, match="expected bytes or str"):
        loads(123)  # type: ignore[arg-type]


def test_loads_too_deep_is_metadata_error() -> None:
    with pytest.raises(MetadataError):
        loads("[" * 100_000 + "]" * 100_000)


def test_loads_object_requires_object() -> None:
    assert loads_object(b'{"zarr_format": 2}', ".zgroup") == {"zarr_format": 2}
    with pytest.raises(MetadataError, match=r"\.zgroup must be a JSON object, got list"):
        loads_object(b"[1, 2]", ".zgroup")


def test_dumps_matches_python_json_with_indent_2() -> None:
    doc: dict[str, Any] = {"shape": [5, 7], "fill_value": None, "ü": "é", "nested": {"a": [], "b": {}}}
    assert dumps(doc) == json.dumps(doc, indent=2).encode()
    assert b"\\u00fc" in dumps(doc)  # ASCII output, as zarr-python


def test_dumps_non_finite_as_bare_tokens() -> None:
    assert dumps({"a": [math.nan, math.inf, -math.inf]}, indent=None) == b'{"a": [NaN, Infinity, -Infinity]}'


def test_dumps_numpy_values() -> None:
    attrs = {
        "i": np.int64(3),
        "f": np.float32(0.5),
        "b": np.bool_(True),
        "arr": np.arange(3, dtype="u1"),
        "arr2": np.array([[1.5, np.nan]]),
        "s": np.str_("x"),
        "t": (1, 2),
    }
    out = json.loads(dumps(attrs).decode().replace("NaN", "null"))
    assert out == {
        "i": 3,
        "f": 0.5,
        "b": True,
        "arr": [0, 1, 2],
        "arr2": [[1.5, None]],
        "s": "x",
        "t": [1, 2],
    }


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": {"b": [1, {1, 2}]}}, "attributes['a']['b'][1]"),
        ({"when": np.datetime64("2020-01-01")}, "attributes['when']"),
        ({"raw": b"bytes"}, "attributes['raw']"),
        ({1: "x"}, "attributes[1]"),
    ],
)
def test_dumps_unsupported_values_name_the_attribute(value: object, where: str) -> None:
    with pytest.raises(MetadataError) as info:
        dumps(value, where="attributes")
    assert str(info.value).startswith(where)


def test_canonical_json_is_order_insensitive_and_nan_safe() -> None:
    assert canonical_json({"a": 1, "b": math.nan}) == canonical_json({"b": float("nan"), "a": 1})


def test_parse_int() -> None:
    assert parse_int(3, "x") == 3
    assert parse_int(np.int32(3), "x") == 3
    for bad in (True, 1.0, "1", None, -1, 2**63):
        with pytest.raises(MetadataError, match="^x must be an integer"):
            parse_int(bad, "x")
    with pytest.raises(MetadataError, match=r"x must be an integer in \[1"):
        parse_int(0, "x", minimum=1)


def test_parse_int_tuple_names_item() -> None:
    assert parse_int_tuple([1, 2], "shape") == (1, 2)
    with pytest.raises(MetadataError, match=r"shape\[1\] must be an integer >= 0, got str '2'"):
        parse_int_tuple([1, "2"], "shape")
    with pytest.raises(MetadataError, match="shape must be a list"):
        parse_int_tuple({"a": 1}, "shape")


def test_parse_named_config_forms() -> None:
    assert parse_named_config("bytes", "codec") == ("bytes", None)
    assert parse_named_config({"name": "x"}, "codec") == ("x", None)
    assert parse_named_config({"name": "x", "configuration": {"a": 1}}, "codec") == ("x", {"a": 1})
    assert parse_named_config({"name": "x", "must_understand": True}, "codec") == ("x", None)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (3, "must be a name string or an object"),
        ({"configuration": {}}, "missing its 'name'"),
        ({"name": ""}, "non-empty string"),
        ({"name": "x", "configuration": []}, "configuration must be a JSON object"),
        ({"name": "x", "other": 1}, r"unexpected key\(s\) \['other'\]"),
        ({"name": "x", "must_understand": False}, "does not allow"),
        ({"name": "x", "must_understand": "no"}, "must be true or false"),
    ],
)
def test_parse_named_config_errors(value: object, match: str) -> None:
    with pytest.raises(MetadataError, match=match):
        parse_named_config(value, "chunk_grid")


def test_parse_named_config_allows_must_understand_false_when_asked() -> None:
    assert (
        parse_named_config({"name": "x", "must_understand": False}, "c", allow_must_understand_false=True)[0]
        == "x"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_dumps_loads_round_trip(value: object) -> None:
    assert canonical_json(loads(dumps(value))) == canonical_json(value)
    assert canonical_json(loads(dumps(value, indent=None))) == canonical_json(value)


def test_to_jsonable_passthrough() -> None:
    assert to_jsonable({"a": [1, "x", None, True, 1.5]}) == {"a": [1, "x", None, True, 1.5]}
