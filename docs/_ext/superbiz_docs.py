"""The site's build-time parts: reference pages filled from the code and benchmark plots
drawn from the committed JSON, so neither can drift from what they describe.

* A page line ``<!-- reference: NAME -->`` is replaced by ``superbiz.reference``'s
  Markdown for NAME (settings, settings-advanced, settings-yaml, commands, http, mcp).
* Every ``docs/plots/*.py`` script's ``render(data_dir, out_dir)`` draws its figures from
  ``docs/data/`` into ``docs/_generated/plots/``, where the pages find them.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

DOCS = Path(__file__).resolve().parent.parent
PLOTS = DOCS / "plots"
DATA = DOCS / "data"
GENERATED = DOCS / "_generated" / "plots"
MARKER = re.compile(r"^<!-- reference: ([a-z-]+) -->$", re.MULTILINE)

_generated: dict[str, str] = {}


def fill_references(app: Sphinx, docname: str, source: list[str]) -> None:
    """Put the generated Markdown where the page asks for it."""
    if not MARKER.search(source[0]):
        return
    from superbiz.reference import GENERATORS

    def generated(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in GENERATORS:
            raise ExtensionError(f"{docname}: no generated reference named {name!r}")
        if name not in _generated:
            _generated[name] = GENERATORS[name]()
        return _generated[name]

    source[0] = MARKER.sub(generated, source[0])


def draw_plots(app: Sphinx) -> None:
    """Run every plot script over the committed benchmark JSON."""
    GENERATED.mkdir(parents=True, exist_ok=True)
    if str(PLOTS) not in sys.path:
        sys.path.insert(0, str(PLOTS))  # the scripts import their helpers (_common) as siblings
    for script in sorted(PLOTS.glob("[!_]*.py")):
        spec = importlib.util.spec_from_file_location(f"_plots_{script.stem}", script)
        if spec is None or spec.loader is None:
            raise ExtensionError(f"cannot load {script}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.render(DATA, GENERATED)


#: what a page would load from elsewhere: a script, a style sheet, an image, a font, a frame
REMOTE = re.compile(
    r"<(?:script|img|iframe|source)\b[^>]*\bsrc=[\"']?(?:https?:)?//"
    r"|<link\b[^>]*\bhref=[\"']?(?:https?:)?//[^>]*>"
    r"|url\([\"']?(?:https?:)?//",
    re.IGNORECASE,
)


def check_offline(app: Sphinx, error: Exception | None) -> None:
    """Fail the build when a page or style sheet would load anything from the network:
    the site is read where there is none."""
    if error is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    found = []
    for path in [*out.rglob("*.html"), *out.rglob("*.css")]:
        for match in REMOTE.finditer(path.read_text(encoding="utf-8", errors="replace")):
            if "<link" in match.group(0).lower() and 'rel="stylesheet"' not in match.group(0):
                continue  # a plain hyperlink's <link rel=…> names, it loads nothing
            found.append(f"{path.relative_to(out)}: {match.group(0)[:80]}")
    if found:
        raise ExtensionError("the site would load from the network: " + "; ".join(found[:10]))


def setup(app: Sphinx) -> dict[str, Any]:
    # The theme's accessible-pygments sets the root logger to INFO when it is imported, and
    # the stores' libraries log there while the references are generated: warnings only.
    for noisy in ("alembic", "faiss", "pymilvus", "milvus_lite"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    app.connect("builder-inited", draw_plots)
    app.connect("source-read", fill_references)
    app.connect("build-finished", check_offline)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
