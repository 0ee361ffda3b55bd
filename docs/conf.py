"""Sphinx configuration: the user guides (docs/*.md, through MyST) and the API reference (docs/api.rst, autodoc
over the numpydoc docstrings, read by napoleon). Built by ``make docs`` with warnings as errors."""

from __future__ import annotations

import zarr_dask

project = "zarr_dask"
author = "the zarr_dask developers"
copyright = "the zarr_dask developers"  # noqa: A001 - Sphinx's name
release = version = zarr_dask.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "design/**"]  # design notes are for contributors; they live beside the code

# autodoc: signatures from the code, type hints in the description, members in source order
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_class_signature = "separated"
# napoleon reads the numpydoc sections (Parameters, Returns, Raises, Examples, Attributes, Notes)
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True
napoleon_attr_annotations = True

# the guides link to each other by file name and to sections by their heading
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "alabaster"
html_title = f"zarr_dask {release}"
html_static_path: list[str] = []
