"""xarray zarr-backend tests that fail on purpose with zarr_dask: the deliberate differences documented in
docs/xarray.md ("Differences from engine='zarr'"). Keys are test ids below the module (``Class::test[param]``);
a trailing ``*`` matches every parametrization. Each entry says why.
"""

from __future__ import annotations

# every route
_COMMON: dict[str, str] = {}

# zarr_dask writes (route "both" and "write")
_WRITE: dict[str, str] = {}

# zarr_dask reads (route "both" and "read")
_READ: dict[str, str] = {}


def expected_failures(route: str) -> dict[str, str]:
    """The expected failures of ``route`` ("both", "write" or "read")."""
    out = dict(_COMMON)
    if route in ("both", "write"):
        out.update(_WRITE)
    if route in ("both", "read"):
        out.update(_READ)
    return out
