"""Build the optional native reader (``zarr_dask._native``); everything else is in pyproject.toml.

The extension is optional: where it cannot be built (no C compiler, Windows) the package installs without
it and reads through the pure-Python path, which gives the same results.
"""

import os
import sys

from setuptools import Extension, setup

ext_modules = []
if os.name == "posix" and os.environ.get("ZARR_DASK_BUILD_NATIVE", "1") != "0":
    ext_modules.append(
        Extension(
            "zarr_dask._native",
            ["zarr_dask/_native.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            libraries=["dl"] if sys.platform.startswith("linux") else [],
            optional=True,
        )
    )

setup(ext_modules=ext_modules)
