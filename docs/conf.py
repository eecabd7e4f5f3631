"""Sphinx configuration of the superbiz documentation site (docs/about.md says why Sphinx).

Build it with warnings as errors, offline: ``sphinx-build -W --keep-going -b html docs
docs/_build/html`` (``.ci/run`` does). The reference pages are filled from the code and
the benchmark plots drawn from ``docs/data/`` by ``_ext/superbiz_docs.py`` at build time.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "superbiz"
author = "the superbiz authors"
copyright = "the superbiz authors, Apache-2.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "superbiz_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/*.md", "plots", "data", "screenshots/README.md"]

myst_enable_extensions = ["deflist", "colon_fence"]
myst_heading_anchors = 3

# Offline at build and at view time: no intersphinx, no math (MathJax comes from a CDN),
# no web fonts (Furo uses the system's), the search index built in.
html_theme = "furo"
html_title = "superbiz"
html_static_path = ["_static"]
html_css_files = ["superbiz.css"]
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}

# every warning is an error (-W); a link to a missing page or anchor is one
nitpicky = True
