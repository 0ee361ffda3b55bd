"""Run zarr-python's own array tests (from its sdist, never copied here) against :class:`zarr_dask.Array`.

Loaded with ``-p zarr_route`` by ``make test-zarr`` (``ci/zarr-suite`` downloads the sdist of the installed
zarr-python into a cache outside the repository and runs its ``tests/test_indexing.py``, ``tests/test_array.py``,
``tests/test_properties.py`` and ``tests/test_codecs/test_sharding.py``). Not a module of our ``tests``
package: zarr-python's test files import their own package named ``tests``.

Every synchronous way zarr-python's API hands out an array (``zarr.create_array``, ``zarr.create``,
``zarr.array``, ``zarr.open_array``, ``Group.create_array``...) still creates (or opens) it with zarr-python,
then returns a :class:`zarr_dask.Array` opened on the same store and path: the test's reads, writes, resizes and
attribute checks go to our object. A test passes only if it got one of our arrays; a test that passed without
(it checked zarr-python's internals only) is reported as skipped, not counted. The tests that exercise
zarr-python internals with no zarr_dask equivalent are skipped with a reason category at collection, and the
documented differences are strict xfails (:mod:`expected`). The last line says how many ran on our object.

Two adapters, both over our object: ``_async_array.getitem`` / ``.oindex.getitem`` / ``.vindex.getitem`` await
our synchronous reads (the property and ``TestAsync`` tests compare them with NumPy), and zarr-python's
hypothesis strategies build their arrays unrouted (they assert on zarr-python's own object) and hand ours to
the test. The properties run ``EXAMPLES`` derandomized examples each, to keep the leg short.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import zarr_dask

sys.path.insert(0, str(Path(__file__).parent))
from expected import categories  # noqa: E402  (a sibling module, not ours to import as tests.*)

_ROUTED: dict[str, int] = {}  # test nodeid -> how many zarr_dask arrays it was handed
_CURRENT: list[str] = []
_ORIGINALS: dict[tuple[Any, str], Any] = {}
_SUSPENDED: list[bool] = []  # inside a hypothesis strategy of zarr-python's, which checks its own arrays


class _AsyncView:
    """zarr-python's ``AsyncArray`` reads and writes (``getitem``, ``setitem``, ``oindex`` / ``vindex``
    ``getitem``) as coroutines over our synchronous object: zarr_dask has no async layer, so the tests that
    await them still check our values."""

    def __init__(self, target: Any) -> None:
        self._target = target

    async def getitem(self, selection: Any) -> Any:
        return self._target[selection]

    async def setitem(self, selection: Any, value: Any) -> None:
        self._target[selection] = value

    @property
    def oindex(self) -> _AsyncView:
        return _AsyncView(self._target.oindex)

    @property
    def vindex(self) -> _AsyncView:
        return _AsyncView(self._target.vindex)


class RoutedArray(zarr_dask.Array):
    """Our ``Array``, plus the ``_async_array`` view of :class:`_AsyncView` (nothing else: every other
    attribute, method and value is zarr_dask's)."""

    @property
    def _async_array(self) -> _AsyncView:
        return _AsyncView(self)


def _ours(result: Any) -> Any:
    """zarr-python's array ``result`` re-opened with zarr_dask on the same store (anything else unchanged)."""
    import zarr

    if _SUSPENDED or not isinstance(result, zarr.Array):
        return result
    ours = RoutedArray.open(
        result.store, result.path, zarr_format=result.metadata.zarr_format, read_only=result.read_only,
        order=result.order, write_empty_chunks=result.config.write_empty_chunks,
    )  # fmt: skip
    if _CURRENT:
        _ROUTED[_CURRENT[-1]] = _ROUTED.get(_CURRENT[-1], 0) + 1
    return ours


def _routed(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _ours(fn(*args, **kwargs))

    wrapper.__zarr_dask_routed__ = True  # type: ignore[attr-defined]
    return wrapper


_FUNCTIONS = ("array", "create", "create_array", "empty", "empty_like", "from_array", "full", "full_like", "ones",
              "ones_like", "open", "open_array", "open_like", "zeros", "zeros_like")  # fmt: skip
_GROUP_METHODS = ("create_array", "require_array", "array", "zeros", "ones", "full", "empty", "__getitem__")


def _patch(owner: Any, name: str) -> None:
    fn = getattr(owner, name, None)
    if fn is None or getattr(fn, "__zarr_dask_routed__", False):
        return
    _ORIGINALS[(owner, name)] = fn
    setattr(owner, name, _routed(fn))


def _route_modules() -> None:
    """Patch zarr-python's synchronous API where it is defined and wherever a module (zarr's, the test
    modules', hypothesis strategies') bound the same function object."""
    import zarr
    import zarr.api.synchronous as sync_api

    originals = {getattr(sync_api, n) for n in _FUNCTIONS if hasattr(sync_api, n)}
    for name in _FUNCTIONS:
        _patch(sync_api, name)
    routed = {fn: getattr(sync_api, n) for n in _FUNCTIONS if hasattr(sync_api, n) for fn in [_ORIGINALS.get((sync_api, n))]}
    for module in list(sys.modules.values()):
        mod_name = getattr(module, "__name__", "") or ""
        if not (mod_name.startswith(("zarr", "tests")) or mod_name == "__main__"):
            continue
        for attr, value in list(vars(module).items()):
            try:
                hit = value in originals
            except TypeError:
                continue
            if hit and routed.get(value) is not None:
                setattr(module, attr, routed[value])
    for name in _GROUP_METHODS:
        _patch(zarr.Group, name)


def _route_strategies() -> None:
    """zarr-python's hypothesis strategies build arrays with its API and assert on them: they run unrouted
    and the array they draw is ours. An array with a chunk side of 0 (zarr-python's chunks for a side of 0) is
    not drawn: zarr_dask refuses such chunk grids (docs/index.md, "zarr-python's own tests")."""
    import hypothesis
    import hypothesis.strategies as st
    import zarr.testing.strategies as strategies

    original = strategies.arrays
    if getattr(original, "__zarr_dask_routed__", False):
        return

    def arrays(*args: Any, **kwargs: Any) -> Any:
        inner = original(*args, **kwargs)

        @st.composite
        def routed(draw: Any) -> Any:
            _SUSPENDED.append(True)
            try:
                z = draw(inner)
            finally:
                _SUSPENDED.pop()
            hypothesis.assume(all(c > 0 for c in z.metadata.chunk_grid.chunk_shape) if z.metadata.zarr_format
                              == 3 else all(c > 0 for c in z.metadata.chunks))  # fmt: skip
            return _ours(z)

        return routed()

    arrays.__zarr_dask_routed__ = True  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        if getattr(module, "arrays", None) is original:
            module.arrays = arrays  # type: ignore[attr-defined]


EXAMPLES = 20  # zarr-python's profile runs 300 examples a property; the leg keeps to its time budget


def _fewer_examples(item: pytest.Item) -> None:
    """The property tests run EXAMPLES examples, derandomized (the same ones every run, so the strict xfails
    stay true), quietly; their own ``@settings`` (taken at import, from zarr-python's profile) otherwise win."""
    from hypothesis import HealthCheck, Verbosity, settings

    fn = getattr(getattr(item, "obj", None), "hypothesis", None)
    test = getattr(item, "obj", None)
    if fn is None or test is None:
        return
    current = getattr(test, "_hypothesis_internal_use_settings", None) or settings()
    test._hypothesis_internal_use_settings = settings(
        current, max_examples=EXAMPLES, derandomize=True, deadline=None, verbosity=Verbosity.normal,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )  # fmt: skip


def pytest_collection_finish(session: pytest.Session) -> None:
    _route_modules()
    _route_strategies()
    for item in session.items:
        _fewer_examples(item)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rules = categories()
    for item in items:
        name = item.nodeid.split("tests/", 1)[-1]
        for matcher, (kind, reason) in rules:
            if matcher(name):
                if kind == "skip":
                    item.add_marker(pytest.mark.skip(reason=reason))
                else:
                    item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
                break


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    _CURRENT.append(item.nodeid)
    try:
        return (yield)
    finally:
        _CURRENT.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    _CURRENT.append(item.nodeid)  # fixtures that make arrays count for their test
    try:
        return (yield)
    finally:
        _CURRENT.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when == "call":
        arrays = _ROUTED.get(item.nodeid, 0)
        report.user_properties.append(("zarr_dask_arrays", arrays))  # travels with the report (xdist too)
        if report.passed and not hasattr(report, "wasxfail") and not arrays:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {UNROUTED}")
    return report


UNROUTED = "not on zarr_dask.Array: the test made no array (it checks zarr-python's own code)"


def _arrays(report: Any) -> int:
    return int(dict(report.user_properties).get("zarr_dask_arrays", 0))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    stats = terminalreporter.stats
    ran = sum(1 for r in stats.get("passed", []) if r.when == "call" and _arrays(r))
    xfailed = sum(1 for r in stats.get("xfailed", []) if _arrays(r))
    if os.environ.get("ZD_ZARR_SUITE_LIST"):  # which tests made no array, to keep the skip list current
        names = sorted({r.nodeid.split("[")[0] for r in stats.get("skipped", []) if UNROUTED in str(r.longrepr)})
        terminalreporter.write_line("made no array: " + " ".join(names))
    counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "xfailed", "xpassed", "skipped", "error")}
    terminalreporter.write_line("zarr-python suite: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    _LAST.append(f"{ran + xfailed} ran on zarr_dask.Array ({ran} passed, {xfailed} xfailed)")


_LAST: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The count, after pytest's own last line."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in _LAST:
        if reporter is not None:
            reporter.write_line(line)
