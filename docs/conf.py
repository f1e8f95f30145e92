"""Sphinx configuration of the mrec-warp documentation (`make docs` builds it into docs/_build)."""
from __future__ import annotations

import mrec_warp

project = "mrec-warp"
author = "the mrec-warp authors"
copyright = "the mrec-warp authors, BSD-3-Clause"
release = mrec_warp.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",  # the package's docstrings are numpy style
    "sphinx_click",  # the CLI reference, generated from the click commands
]

exclude_patterns = ["_build"]
templates_path = ["_templates"]
autosummary_generate = True
autodoc_typehints = "none"  # numpydoc puts the types in the parameter lists
autodoc_member_order = "bysource"
# Methods are listed by autosummary tables in reference/api.rst, not by numpydoc as well
# (its class-member tables would name every inherited method a second time).
numpydoc_show_class_members = False
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"mrec-warp {release}"
html_theme_options = {"description": "Recommendations from implicit feedback", "fixed_sidebar": True}
html_static_path: list[str] = []


def _literal_stars(app, ctx, lines: list[str]) -> None:
    """Click's help texts are plain text, which sphinx-click passes on as reST: a ``*`` in
    them (``1 + alpha*value``, ``*.npy``) would open an emphasis. Escape every star outside
    directive lines."""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(".. "):
            lines[i] = line.replace("*", r"\*")


def setup(app):
    for part in ("description", "usage", "options", "arguments", "epilog"):
        app.connect(f"sphinx-click-process-{part}", _literal_stars)
