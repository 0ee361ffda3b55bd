"""Run xarray's own zarr backend tests (from the installed xarray package) against zarr_dask.

Loaded with ``-p tests.xarray_suite.plugin`` by ``make test-xarray`` (never collected by the main suite).
``ZD_XARRAY_ROUTE`` chooses who does what:

* ``both`` (default): every ``to_zarr`` (Dataset, DataArray, DataTree) goes through
  :func:`zarr_dask.to_zarr_dataset` / :func:`zarr_dask.to_zarr_datatree`, and every ``engine="zarr"`` open
  (``open_dataset``, ``open_zarr``, ``open_datatree``, ``open_groups``) through ``engine="zarr_dask"``;
* ``write``: zarr_dask writes, xarray's own engine reads;
* ``read``: xarray's own engine writes, zarr_dask reads.

Tests that poke at xarray's own ``ZarrStore`` or zarr-python directly still do so (they check our stores
from the outside). The known, documented differences are marked ``xfail(strict=True)`` from
:mod:`tests.xarray_suite.expected`: a test on the list that starts passing fails the run, so the list
stays true.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from tests.xarray_suite.expected import expected_failures, fixed_upstream_xfails

ROUTE = os.environ.get("ZD_XARRAY_ROUTE", "both")
if ROUTE not in ("both", "write", "read"):
    raise pytest.UsageError(f"ZD_XARRAY_ROUTE must be both, write or read, not {ROUTE!r}")


def _default_format(kw: dict[str, Any], mode: Any) -> None:
    """xarray's engine takes the format of new data from zarr-python's config (the suite sets it per test);
    ``zarr_format=None`` means 3 to zarr_dask, which never reads zarr-python's config. Both use the stored
    format when adding to existing data."""
    import zarr

    adding = mode in ("a", "a-", "r+") or kw.get("append_dim") is not None or kw.get("region") is not None
    if kw.get("zarr_format") is None and not adding:
        kw["zarr_format"] = zarr.config.get("default_zarr_format")
    kw.pop("chunkmanager_store_kwargs", None)  # dask.array.store options: we build our own graph


def _to_zarr(dataset: Any, store: Any = None, mode: Any = None, group: Any = None, encoding: Any = None, **kw: Any) -> Any:
    import zarr_dask

    _default_format(kw, mode)
    return zarr_dask.to_zarr_dataset(dataset, store, mode=mode, group=group, encoding=encoding, **kw)


def _datatree_to_zarr(dt: Any, store: Any, mode: Any = "w-", encoding: Any = None, group: Any = None,
                      write_inherited_coords: bool = False, **kw: Any) -> Any:  # fmt: skip
    import zarr_dask

    _default_format(kw, mode)
    return zarr_dask.to_zarr_datatree(
        dt, store, mode=mode, encoding=encoding, group=group, write_inherited_coords=write_inherited_coords, **kw
    )


def _route(monkeypatch: pytest.MonkeyPatch) -> None:
    from xarray.backends import plugins, writers

    if ROUTE in ("both", "write"):
        monkeypatch.setattr(writers, "to_zarr", _to_zarr)
        monkeypatch.setattr(writers, "_datatree_to_zarr", _datatree_to_zarr)
    if ROUTE in ("both", "read"):
        original = plugins.get_backend

        def get_backend(engine: Any) -> Any:
            return original("zarr_dask" if engine == "zarr" else engine)

        monkeypatch.setattr(plugins, "get_backend", get_backend)


@pytest.fixture(autouse=True)
def _zarr_dask_route(monkeypatch: pytest.MonkeyPatch) -> None:
    _route(monkeypatch)


def pytest_configure(config: pytest.Config) -> None:
    # markers of xarray's own root conftest.py, which its wheel does not ship
    for line in ("skip_if_param(**params, reason, condition=True): skip the matching parametrizations",
                 "skip_with_dask_array: (xarray)", "flaky: (xarray)", "network: (xarray)", "slow: (xarray)"):  # fmt: skip
        config.addinivalue_line("markers", line)


def _skip_if_param(item: pytest.Item) -> None:
    """xarray's ``skip_if_param`` marker (its root conftest.py implements it): skip the parametrizations that
    match every given parameter (``default_zarr_format=3``...)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for mark in item.iter_markers("skip_if_param"):
        kw = dict(mark.kwargs)
        reason, condition = kw.pop("reason", "skip_if_param"), kw.pop("condition", True)
        if condition and kw and all(k in params and params[k] == v for k, v in kw.items()):
            item.add_marker(pytest.mark.skip(reason=reason))


def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + "$")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expected = [(_matcher(pattern), reason) for pattern, reason in expected_failures(ROUTE).items()]
    fixed = [_matcher(pattern) for pattern in fixed_upstream_xfails(ROUTE)]
    for item in items:
        _skip_if_param(item)
        name = item.nodeid.split("::", 1)[-1]  # Class::test[params] (or test[params])
        if any(m.match(name) for m in fixed):
            item.own_markers[:] = [m for m in item.own_markers if m.name != "xfail"]
        for matcher, reason in expected:
            if matcher.match(name):
                item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
                break


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts = {k: len(terminalreporter.stats.get(k, [])) for k in ("passed", "failed", "xfailed", "xpassed", "skipped", "error")}
    terminalreporter.write_line(f"xarray zarr suite, route={ROUTE}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
