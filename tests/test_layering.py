"""House rules that a test can check: dependency direction, where third-party libraries may be imported, and
that `import zarr_dask` stays cheap."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "zarr_dask"

# package -> zarr_dask packages it must not import
FORBIDDEN_INTERNAL = {
    "config": {"errors", "spec", "codecs", "store", "core", "graph", "zom", "xarray_backend", "cli", "_convert", "native"},
    "errors": {"spec", "codecs", "store", "core", "graph", "zom", "xarray_backend", "cli"},
    "spec": {"codecs", "store", "core", "graph", "zom", "xarray_backend", "cli"},
    "codecs": {"store", "core", "graph", "zom", "xarray_backend", "cli"},
    "store": {"spec", "codecs", "core", "graph", "zom", "xarray_backend", "cli"},
    "core": {"graph", "zom", "xarray_backend", "cli"},
    "graph": {"zom", "xarray_backend", "cli", "_convert", "demo"},
    "zom": {"graph", "xarray_backend", "cli", "_convert", "demo"},
    "xarray_backend": {"zom", "cli", "_convert", "demo"},
    "_convert": {"cli", "demo"},
    "native": {"spec", "store", "core", "graph", "zom", "xarray_backend", "cli", "_convert", "demo"},
}
# third-party module -> the only zarr_dask packages allowed to import it
ALLOWED_THIRD_PARTY = {
    "numcodecs": {"codecs"},
    "fsspec": {"store", "testing"},
    "xarray": {"xarray_backend", "demo"},
    "dask": {"graph", "xarray_backend", "zom", "_convert", "demo"},
    "distributed": {"graph", "xarray_backend", "cli"},
}


def _imports(path: Path, *, names: bool = False) -> set[str]:
    """Every absolute module ``path`` imports (in functions and under ``TYPE_CHECKING`` too); with ``names``
    also ``module.name`` for each name of a ``from module import name``."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            if names:
                out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _package_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


FILES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_dependency_direction(path: Path) -> None:
    package = _package_of(path)
    for module in _imports(path):
        parts = module.split(".")
        if parts[0] == "zarr_dask" and len(parts) > 1:
            assert parts[1] not in FORBIDDEN_INTERNAL.get(package, set()), f"{path.name}: {package} imports {module}"
        allowed = ALLOWED_THIRD_PARTY.get(parts[0])
        if allowed is not None:
            assert package in allowed, f"{path.relative_to(PKG)} imports {module}; only {sorted(allowed)} may"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_runtime_modules_never_import_the_testing_package(path: Path) -> None:
    """``zarr_dask.testing`` (test filesystems...) is for tests and benchmarks: no runtime module imports it,
    not even inside a function (fsspec finds the ``latency`` protocol through its entry point)."""
    if _package_of(path) == "testing":
        return
    for module in _imports(path):
        assert not module.startswith("zarr_dask.testing"), f"{path.relative_to(PKG)} imports {module}"
    assert "zarr_dask.testing" not in path.read_text(), f"{path.relative_to(PKG)} names zarr_dask.testing"


GATEWAY = PKG / "graph" / "gateway"  # the package: tasks.py (tasks, graphs) and reads.py (read collections)


def _private_dask(module: str) -> bool:
    """dask's private modules (``dask._task_spec``, ``dask.array._array_expr...``) or the dask-array package."""
    parts = module.split(".")
    return parts[0] == "dask_array" or (parts[0] == "dask" and any(p.startswith("_") for p in parts[1:]))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_only_the_gateway_imports_dask_internals_or_dask_array(path: Path) -> None:
    if path.parent == GATEWAY:
        if path.name != "__init__.py":
            assert any(_private_dask(m) for m in _imports(path))  # (so the check below checks something)
        return
    found = sorted(m for m in _imports(path) if _private_dask(m))
    assert not found, f"{path.relative_to(PKG)} imports {found}: only zarr_dask/graph/gateway/ may"


def test_import_is_cheap() -> None:
    code = (
        "import sys, zarr_dask; "
        "heavy = [m for m in ('xarray', 'distributed', 'dask', 'fsspec', 'numcodecs', 'zarr') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import zarr_dask imported {out}"


ARCHITECTURE = PKG.parent / "docs" / "design" / "architecture.md"
_BASE = {"errors", "config", "logging"}


def _architecture_table() -> dict[str, set[str]]:
    """``package -> packages it may import`` from the table of docs/design/architecture.md."""
    text = ARCHITECTURE.read_text()
    table = text[text.index("<!-- layers: package | may import -->") : text.index("<!-- /layers -->")]
    rows: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = {c.strip().strip("`") for c in cells[1].split(",") if c.strip()}
    return rows


def test_architecture_page_matches_the_imports() -> None:
    """The layer table of the architecture page is what the code does, and agrees with FORBIDDEN_INTERNAL."""
    rows = _architecture_table()
    packages = {_package_of(p) for p in FILES} - {"__init__"} - _BASE
    assert set(rows) == packages, f"packages missing from / unknown to the table: {set(rows) ^ packages}"
    for path in FILES:
        package = _package_of(path)
        if package not in rows:
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] == "zarr_dask" and len(parts) > 1 and parts[1] not in _BASE | {package}:
                assert parts[1] in rows[package], f"{path.relative_to(PKG)} imports {module}: not in the page's table"
    for package, forbidden in FORBIDDEN_INTERNAL.items():
        assert not (rows.get(package, set()) & forbidden), f"the page lets {package} import {rows[package] & forbidden}"


def test_zom_modules_import_each_other_without_a_cycle() -> None:
    """The model (``zom/model.py``, ``zom/array.py``) sits below the modules that read, write and check it; they
    reach the store through ``zom/tree.py``'s port, never by importing back (not even inside a function)."""
    zom = {p.stem: p for p in (PKG / "zom").glob("*.py") if p.stem != "__init__"}
    edges = {
        name: {m.split(".")[2] for m in _imports(path, names=True) if m.startswith("zarr_dask.zom.") and m.split(".")[2] in zom}
        - {name}
        for name, path in zom.items()
    }
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        assert name not in stack, f"import cycle in zom/: {' -> '.join([*stack[stack.index(name):], name])}"
        if name in done:
            return
        for dep in sorted(edges[name]):
            visit(dep, [*stack, name])
        done.add(name)

    for name in sorted(zom):
        visit(name, [])
    assert not edges["model"] & {"io", "write", "conventions"} and not edges["array"] & {"io", "write", "model"}


#: The modules that keep per-thread state, and why it never crosses a layer: each thread-local is private to its
#: module and set and read by that module's own functions only (a cache, or reentrancy within one call).
THREAD_LOCALS = {
    "store/arena.py": "the calling thread's read arena, reused across its reads",
    "store/requests.py": "request slots this thread holds already, so a nested batched call reuses them",
    "core/consolidated.py": "the consolidated locks this thread holds already (reentrancy)",
    "core/chunk_io.py": "the calling thread's scratch buffers",
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_thread_local_state_crosses_layers(path: Path) -> None:
    """Only the modules of THREAD_LOCALS keep thread-local state, none of them exposes it, and no other module
    reads or sets it: what one layer decides for another (write-behind, say) is passed down as an object."""
    rel = str(path.relative_to(PKG))
    tree = ast.parse(path.read_text(), str(path))
    locals_made = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "local"
        and isinstance(n.func.value, ast.Name) and n.func.value.id == "threading"
    ]  # fmt: skip
    if rel.startswith("testing/"):
        return
    assert bool(locals_made) == (rel in THREAD_LOCALS), f"{rel}: thread-local state outside THREAD_LOCALS (or gone from it)"
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) for t in node.targets) and node.value in locals_made:
            for target in node.targets:
                assert isinstance(target, ast.Name) and target.id.startswith("_"), f"{rel}: {target} is public"
