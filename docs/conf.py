"""Sphinx configuration of kiln's documentation (built by ``nox -s docs``)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import kiln  # noqa: E402

project = "kiln"
author = "the kiln developers"
release = version = kiln.__version__
copyright = "the kiln developers"  # noqa: A001

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "kiln_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_scripts", "_ext", "_generated/*.txt", "README.md"]
templates_path: list[str] = []

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"kiln {release}"
html_static_path = ["_static"]
html_css_files = ["kiln.css"]
html_theme_options = {
    "description": "probabilistic programming: model -> graph -> rewrites -> backend -> sampler",
    "page_width": "1180px",
    "sidebar_width": "230px",
    "fixed_sidebar": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
