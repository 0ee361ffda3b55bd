"""zarr_dask.spec.consolidated: v2 .zmetadata and v3 inline consolidated_metadata (digest §1.9, §2.17)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.spec._oracle import same_json, zarr_documents, zarr_or_skip
from zarr_dask.errors import InvalidPathError, MetadataError, UnknownExtensionError
from zarr_dask.spec import (
    ArrayMetadataV2,
    ArrayMetadataV3,
    ConsolidatedMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    parse_consolidated_v2,
    parse_consolidated_v3,
    parse_group_metadata,
    parse_node_metadata,
)
from zarr_dask.spec.json import loads

ZARRAY = {
    "shape": [5, 7], "chunks": [2, 3], "dtype": "<i4", "fill_value": 0, "order": "C", "filters": None,
    "dimension_separator": ".", "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zarr_format": 2,
}  # fmt: skip
ZP_QUIRK = {"metadata": {}, "must_understand": False, "kind": "inline"}

# digest §1.9
GOLDEN_V2 = {
    "zarr_consolidated_format": 1,
    "metadata": {
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {"title": "t"},
        "a/.zarray": ZARRAY,
        "a/.zattrs": {"_ARRAY_DIMENSIONS": ["y", "x"]},
        "sub/.zgroup": {"zarr_format": 2},
        "sub/.zattrs": {},
    },
}

ARRAY_V3 = {
    "shape": [5, 7], "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
               {"name": "zstd", "configuration": {"level": 0, "checksum": False}}],
    "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": [],
}  # fmt: skip
EMPTY_INLINE = {"kind": "inline", "must_understand": False, "metadata": {}}
GROUP_V3_NESTED = {
    "attributes": {},
    "zarr_format": 3,
    "consolidated_metadata": EMPTY_INLINE,
    "node_type": "group",
}
# digest §2.17
GOLDEN_V3 = {
    "attributes": {"title": "t"},
    "zarr_format": 3,
    "consolidated_metadata": {
        "kind": "inline",
        "must_understand": False,
        "metadata": {"sub": GROUP_V3_NESTED, "sub/x": ARRAY_V3},
    },
    "node_type": "group",
}


def test_golden_v2_parse_and_write() -> None:
    cm = parse_consolidated_v2(GOLDEN_V2)
    assert cm.zarr_format == 2
    assert set(cm.nodes) == {"a", "sub"}
    a, sub = cm.nodes["a"], cm.nodes["sub"]
    assert isinstance(a, ArrayMetadataV2) and a.dimension_names == ("y", "x")
    assert isinstance(sub, GroupMetadataV2) and sub.attributes == {}
    root = GroupMetadataV2.from_json({"zarr_format": 2}, {"title": "t"})
    written = json.loads(cm.to_v2_document(root=root))
    expected = copy.deepcopy(GOLDEN_V2)
    expected["metadata"]["sub/.zgroup"]["consolidated_metadata"] = ZP_QUIRK  # type: ignore[index]
    assert written == expected
    # zarr-python key order: root docs, then per node .zattrs before .zarray/.zgroup; one line, no indent
    assert list(written) == ["metadata", "zarr_consolidated_format"]
    assert list(written["metadata"]) == [
        ".zgroup",
        ".zattrs",
        "a/.zattrs",
        "a/.zarray",
        "sub/.zattrs",
        "sub/.zgroup",
    ]
    assert b"\n" not in cm.to_v2_document(root=root)
    assert cm.to_documents(root=root) == {".zmetadata": cm.to_v2_document(root=root)}
    assert parse_consolidated_v2(written) == cm


def test_golden_v3_parse_and_write() -> None:
    group = GroupMetadataV3.from_json(GOLDEN_V3)
    cm = group.consolidated_metadata
    assert cm is not None and cm.zarr_format == 3
    assert set(cm.nodes) == {"sub", "sub/x"}
    assert isinstance(cm.nodes["sub"], GroupMetadataV3) and cm.nodes["sub"].consolidated_metadata is None
    assert isinstance(cm.nodes["sub/x"], ArrayMetadataV3)
    assert group.to_documents()["zarr.json"] == json.dumps(GOLDEN_V3, indent=2).encode()
    assert cm.to_json() == GOLDEN_V3["consolidated_metadata"]


def test_v3_nested_inner_metadata_is_flattened() -> None:
    nested = {
        "kind": "inline",
        "metadata": {
            "sub": {
                **GROUP_V3_NESTED,
                "consolidated_metadata": {"kind": "inline", "metadata": {"x": ARRAY_V3}},
            },
        },
    }
    cm = parse_consolidated_v3(nested)
    assert set(cm.nodes) == {"sub", "sub/x"}
    assert cm.to_json() == GOLDEN_V3["consolidated_metadata"]


def test_v3_nested_conflict_is_an_error() -> None:
    other = {**ARRAY_V3, "shape": [6, 7]}
    nested = {
        "kind": "inline",
        "metadata": {
            "sub": {
                **GROUP_V3_NESTED,
                "consolidated_metadata": {"kind": "inline", "metadata": {"x": ARRAY_V3}},
            },
            "sub/x": other,
        },
    }
    with pytest.raises(MetadataError, match="two different metadata documents for 'sub/x'"):
        parse_consolidated_v3(nested)


@pytest.mark.parametrize(
    "key",
    ["..", "../a", "a/../b", "a/./b", "/a", "a/", "a//b", "a\\b", "C:/a", "a\x00b", "\\\\host\\x", ""],
)
def test_unsafe_or_unnormalised_keys_rejected(key: str) -> None:
    with pytest.raises(InvalidPathError):
        parse_consolidated_v3({"kind": "inline", "metadata": {key: ARRAY_V3}})
    v2 = {"zarr_consolidated_format": 1, "metadata": {f"{key}/.zarray": ZARRAY}}
    if key in ("", "/a"):  # "/.zarray" is a root entry; "//a/.zarray" is checked below
        v2 = {"zarr_consolidated_format": 1, "metadata": {f"/{key}/.zarray": ZARRAY}}
    with pytest.raises(InvalidPathError):
        parse_consolidated_v2(v2)


def test_kerchunk_parquet_zmetadata_parses_without_a_format():
    """kerchunk's parquet references keep the documents and their record size, no format field (issue 24)."""
    parsed = parse_consolidated_v2({"metadata": {"a/.zarray": ZARRAY}, "record_size": 1000})
    assert list(parsed.nodes) == ["a"]
    with pytest.raises(MetadataError, match="must be 1, got 2"):
        parse_consolidated_v2({"metadata": {}, "record_size": 1000, "zarr_consolidated_format": 2})


@pytest.mark.parametrize(
    ("doc", "error", "match"),
    [
        ({"metadata": {}}, MetadataError, "'zarr_consolidated_format' must be 1, got None"),
        ({"zarr_consolidated_format": 2, "metadata": {}}, MetadataError, "must be 1, got 2"),
        ({"zarr_consolidated_format": 1}, MetadataError, "field 'metadata' must be a JSON object"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zfoo": {}}}, MetadataError, "does not name a"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/zarr.json": {}}}, MetadataError, "does not name a"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zattrs": {}}}, MetadataError, "neither .zarray nor .zgroup"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zarray": ZARRAY, "a/.zgroup": {"zarr_format": 2}}},
         MetadataError, "both a .zarray and a .zgroup"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zarray": {**ZARRAY, "order": "K"}}},
         MetadataError, "entry 'a': invalid .zarray: field 'order'"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zgroup": {"zarr_format": 2, "x": 1}}},
         MetadataError, "entry 'a': invalid .zgroup: unexpected key"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zarray": ZARRAY, "a/b/.zgroup": {"zarr_format": 2}}},
         MetadataError, "lists 'a/b' below 'a', which is an array"),
        ([], MetadataError, ".zmetadata must be a JSON object"),
    ],
)  # fmt: skip
def test_bad_v2_documents(doc: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_consolidated_v2(doc)


@pytest.mark.parametrize(
    ("doc", "error", "match"),
    [
        ({"kind": "file", "metadata": {}}, UnknownExtensionError, "kind 'file'"),
        ({"metadata": {}}, UnknownExtensionError, "kind None"),
        ({"kind": "inline"}, MetadataError, "consolidated_metadata.metadata must be a JSON object"),
        ({"kind": "inline", "metadata": {}, "extra": 1}, MetadataError, "unexpected key"),
        ({"kind": "inline", "metadata": {}, "must_understand": "no"}, MetadataError, "must be a boolean"),
        (
            {"kind": "inline", "metadata": {"a": [1]}},
            MetadataError,
            "entry 'a': the entry must be a JSON object",
        ),
        ({"kind": "inline", "metadata": {"a": {"zarr_format": 2}}}, MetadataError, "'zarr_format' must be 3"),
        (
            {"kind": "inline", "metadata": {"a": {**ARRAY_V3, "shape": [1]}}},
            MetadataError,
            "entry 'a': invalid array",
        ),
        ({"kind": "inline", "metadata": {"a": {**ARRAY_V3, "x": 1}}}, UnknownExtensionError, "'x'"),
        (
            {"kind": "inline", "metadata": {"a": ARRAY_V3, "a/b": ARRAY_V3}},
            MetadataError,
            "which is an array",
        ),
    ],
)
def test_bad_v3_documents(doc: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_consolidated_v3(doc)


def test_bad_v3_inside_group_document() -> None:
    with pytest.raises(InvalidPathError, match=r"'\.\./evil'"):
        GroupMetadataV3.from_json(
            {**GOLDEN_V3, "consolidated_metadata": {"kind": "inline", "metadata": {"../evil": ARRAY_V3}}}
        )


def test_v2_tolerates_zarr_python_quirk_and_ignores_root_entries() -> None:
    doc = copy.deepcopy(GOLDEN_V2)
    doc["metadata"]["sub/.zgroup"] = {"zarr_format": 2, "consolidated_metadata": ZP_QUIRK}  # type: ignore[index]
    doc["metadata"][".zgroup"] = {"zarr_format": 2, "whatever": 1}  # type: ignore[index]
    assert parse_consolidated_v2(doc) == parse_consolidated_v2(GOLDEN_V2)


def test_from_nodes_normalises_flattens_and_checks() -> None:
    array = ArrayMetadataV3.from_json(ARRAY_V3)
    sub = GroupMetadataV3.from_json(
        {**GROUP_V3_NESTED, "consolidated_metadata": {"kind": "inline", "metadata": {"x": ARRAY_V3}}}
    )
    cm = ConsolidatedMetadata.from_nodes(3, {"/sub/": sub, "b": array})
    assert set(cm.nodes) == {"sub", "sub/x", "b"}
    assert cm == ConsolidatedMetadata.from_nodes(3, {"sub": GroupMetadataV3(), "sub/x": array, "b": array})
    with pytest.raises(InvalidPathError):
        ConsolidatedMetadata.from_nodes(3, {"": GroupMetadataV3()})
    with pytest.raises(InvalidPathError):
        ConsolidatedMetadata.from_nodes(3, {"a/../b": array})
    with pytest.raises(MetadataError, match="two different"):
        ConsolidatedMetadata.from_nodes(3, {"a": array, "/a": GroupMetadataV3()})
    with pytest.raises(MetadataError, match="must be Zarr v2 node metadata"):
        ConsolidatedMetadata.from_nodes(2, {"a": array})
    with pytest.raises(MetadataError, match="nested consolidated metadata"):
        ConsolidatedMetadata(zarr_format=3, nodes={"sub": sub})
    with pytest.raises(InvalidPathError, match="not a normalised"):
        ConsolidatedMetadata(zarr_format=3, nodes={"/b": array})
    with pytest.raises(MetadataError, match="zarr_format must be 2 or 3"):
        ConsolidatedMetadata(zarr_format=4, nodes={})  # type: ignore[arg-type]


def test_subtree_and_children() -> None:
    array = ArrayMetadataV3.from_json(ARRAY_V3)
    g = GroupMetadataV3()
    cm = ConsolidatedMetadata.from_nodes(3, {"a": g, "a/b": g, "a/b/c": array, "a/d": array, "e": array})
    assert set(cm.children()) == {"a", "e"}
    assert set(cm.children("a")) == {"b", "d"}
    sub = cm.subtree("a")
    assert set(sub.nodes) == {"b", "b/c", "d"}
    assert cm.subtree("") is cm
    assert set(cm.subtree("/a/b/").nodes) == {"c"}
    with pytest.raises(MetadataError, match="is an array"):
        cm.subtree("e")


def test_v3_has_no_v2_document() -> None:
    with pytest.raises(MetadataError, match="inside the group's zarr.json"):
        ConsolidatedMetadata(zarr_format=3).to_v2_document()


def test_v3_consolidated_on_a_v2_group_is_refused() -> None:
    with pytest.raises(MetadataError, match="v3 ConsolidatedMetadata"):
        GroupMetadataV3(consolidated_metadata=ConsolidatedMetadata(zarr_format=2))


def test_sorting_matches_zarr_python() -> None:
    g = GroupMetadataV3()
    cm = ConsolidatedMetadata.from_nodes(3, {"b": g, "B/x": g, "a": g, "B": g, "a/y": g, "Ä": g})
    # (depth, NFKC casefold) as zarr-python; exact ties broken by code point for determinism
    assert list(cm.to_json()["metadata"]) == ["a", "B", "b", "Ä", "a/y", "B/x"]


names = st.text(alphabet="abcXY_-.1", min_size=1, max_size=3).filter(lambda s: s.strip(".") != "")


@st.composite
def trees(draw: st.DrawFn) -> dict[str, str]:
    """{relative path: "array" | "group"} with every parent a group."""
    out: dict[str, str] = {}
    for _ in range(draw(st.integers(0, 8))):
        parents = [p for p, kind in out.items() if kind == "group"]
        parent = draw(st.sampled_from(["", *parents]))
        path = f"{parent}/{draw(names)}" if parent else draw(names)
        out.setdefault(path, draw(st.sampled_from(["array", "group"])))
    return out


@settings(max_examples=40, deadline=None)
@given(trees(), st.sampled_from([2, 3]))
def test_round_trip(tree: dict[str, str], fmt: int) -> None:
    nodes: dict[str, Any] = {}
    for path, kind in tree.items():
        if fmt == 2:
            nodes[path] = (
                ArrayMetadataV2.from_json(ZARRAY, {"p": path})
                if kind == "array"
                else GroupMetadataV2(attributes={"p": path})
            )
        else:
            nodes[path] = (
                ArrayMetadataV3.from_json({**ARRAY_V3, "attributes": {"p": path}})
                if kind == "array"
                else GroupMetadataV3()
            )
    cm = ConsolidatedMetadata.from_nodes(fmt, nodes)  # type: ignore[arg-type]
    if fmt == 2:
        root = GroupMetadataV2(attributes={"r": 1})
        data = cm.to_v2_document(root=root)
        again = parse_consolidated_v2(loads(data))
        assert again == cm and again.to_v2_document(root=root) == data
    else:
        group = GroupMetadataV3(attributes={"r": 1}, consolidated_metadata=cm)
        data = group.to_documents()["zarr.json"]
        again_group = parse_group_metadata(3, {"zarr.json": data})
        assert again_group == group and again_group.to_documents()["zarr.json"] == data


# ---------------------------------------------------------------------------------------------- oracle


def _hierarchy(fmt: Any) -> Any:
    def build(store: Any) -> None:
        import zarr

        root = zarr.open_group(
            store, mode="w", zarr_format=fmt, attributes={"title": "t", "nan": float("nan")}
        )
        root.create_array("a", shape=(5, 7), chunks=(2, 3), dtype="<i4", attributes={"u": "K"})
        root.create_array("B", shape=(3,), dtype="<f8", fill_value=float("nan"))
        sub = root.create_group("sub", attributes={"x": [1]})
        sub.create_array("b", shape=(), dtype="<u2")
        sub.create_group("deeper").create_array("c", shape=(4,), dtype=str)
        root.create_group("empty")
        zarr.consolidate_metadata(store)

    return build


def _node_documents(docs: dict[str, bytes], fmt: int) -> dict[str, Any]:
    """Every node's own documents (not the consolidated ones) parsed, keyed by path."""
    nodes: dict[str, Any] = {}
    for key in docs:
        prefix, _, name = key.rpartition("/")
        if name not in ("zarr.json", ".zarray", ".zgroup") or not prefix:
            continue
        p = prefix + "/"
        nodes[prefix] = parse_node_metadata(fmt, {n: docs.get(p + n) for n in (name, ".zattrs")})  # type: ignore[arg-type]
    return nodes


@pytest.mark.oracle
def test_oracle_v2_consolidated_parse_and_build() -> None:
    docs = zarr_documents(_hierarchy(2))
    root = parse_group_metadata(2, {".zgroup": docs[".zgroup"], ".zattrs": docs[".zattrs"]})
    assert isinstance(root, GroupMetadataV2)
    parsed = parse_consolidated_v2(loads(docs[".zmetadata"]))
    assert set(parsed.nodes) == {"a", "B", "sub", "sub/b", "sub/deeper", "sub/deeper/c", "empty"}
    built = ConsolidatedMetadata.from_nodes(2, _node_documents(docs, 2))
    assert built == parsed
    for cm in (parsed, built):
        ours = cm.to_v2_document(root=root)
        if b'"consolidated_metadata"' in docs[".zmetadata"]:  # zarr-python 3.1 (see consolidated.py)
            assert ours == docs[".zmetadata"]
        assert same_json(_strip_quirk(ours), _strip_quirk(docs[".zmetadata"]))


def _strip_quirk(data: bytes) -> bytes:
    doc = json.loads(data)
    for key, value in doc["metadata"].items():
        if key.endswith(".zgroup"):
            value.pop("consolidated_metadata", None)
    return json.dumps(doc).encode()


@pytest.mark.oracle
def test_oracle_v3_consolidated_parse_and_build() -> None:
    docs = zarr_documents(_hierarchy(3))
    group = parse_group_metadata(3, {"zarr.json": docs["zarr.json"]})
    assert isinstance(group, GroupMetadataV3) and group.consolidated_metadata is not None
    assert group.to_documents()["zarr.json"] == docs["zarr.json"]
    built = ConsolidatedMetadata.from_nodes(3, _node_documents(docs, 3))
    assert built == group.consolidated_metadata
    again = GroupMetadataV3(attributes=group.attributes, consolidated_metadata=built)
    assert again.to_documents()["zarr.json"] == docs["zarr.json"]


@pytest.mark.oracle
@pytest.mark.parametrize("fmt", [2, 3])
def test_oracle_zarr_python_opens_our_consolidated_metadata(fmt: int) -> None:
    import asyncio
    import warnings

    zarr = zarr_or_skip()

    docs = zarr_documents(_hierarchy(fmt))
    nodes = _node_documents(docs, fmt)
    cm = ConsolidatedMetadata.from_nodes(fmt, nodes)  # type: ignore[arg-type]
    ours = dict(docs)
    if fmt == 2:
        root = parse_group_metadata(2, {".zgroup": docs[".zgroup"], ".zattrs": docs[".zattrs"]})
        assert isinstance(root, GroupMetadataV2)
        ours[".zmetadata"] = cm.to_v2_document(root=root)
    else:
        plain = GroupMetadataV3(attributes={"title": "t", "nan": float("nan")}, consolidated_metadata=cm)
        ours["zarr.json"] = plain.to_documents()["zarr.json"]
    # drop every per-node document: zarr-python must find the members through the consolidated metadata
    ours = {k: v for k, v in ours.items() if k.count("/") == 0}
    store = zarr.storage.MemoryStore()
    proto = zarr.core.buffer.default_buffer_prototype()

    async def put() -> None:
        for k, v in ours.items():
            await store.set(k, proto.buffer.from_bytes(v))

    asyncio.run(put())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_consolidated(store, zarr_format=fmt)
        members = {path for path, _ in g.members(max_depth=None)}
    assert members == set(nodes)
    assert g["sub"].attrs["x"] == [1]
    assert g["sub/deeper/c"].shape == (4,)
