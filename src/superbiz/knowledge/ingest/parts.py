"""Files found that are part of something else, and so no document of their own.

A fragment another page includes (written into it as it is read), the material of a
Sphinx site's HTML build, a site's navigation file: each is turned into a skip with the
reason, so that a run neither stores it nor reports it unread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from superbiz.knowledge.documents.domains import read_alike
from superbiz.knowledge.documents.included import site_attributes, site_docs_dir, snippet_bases
from superbiz.knowledge.formats import ASCIIDOC_EXTENSIONS, adoc_includes, md_includes, md_snippets
from superbiz.knowledge.formats.rst_includes import includes, own_document, target
from superbiz.knowledge.ingest.discovery import Candidate, Found
from superbiz.retrieval.passages import is_navigation

#: the most of a page read for its includes (they come first in a Sphinx page)
_INCLUDE_SCAN = 200_000


def without_fragments(
    found: Sequence[Found], domain_access: Mapping[str, Sequence[str]]
) -> tuple[list[Found], dict[Path, str]]:
    """``found`` with each file that is part of something else — included by another
    page (``include_fragments``, by ``domain_access``), the material of a Sphinx site's HTML build
    (``sphinx_build_material``), or a site's navigation (``site_navigation``) — turned
    into a skip with its reason, and those files with the label each is skipped under."""
    fragments = {
        **include_fragments(found, domain_access),
        **sphinx_build_material(found),
        **site_navigation(found),
    }
    labels = {
        item.file: item.file.relative_to(item.root).as_posix()
        for item in found
        if isinstance(item, Candidate) and item.file in fragments
    }
    kept: list[Found] = [
        (labels[item.file], fragments[item.file])
        if isinstance(item, Candidate) and item.file in labels
        else item
        for item in found
    ]
    return kept, labels


def include_fragments(
    found: Iterable[Found], domain_access: Mapping[str, Sequence[str]]
) -> dict[Path, str]:
    """Files that a reStructuredText or AsciiDoc page among ``found`` includes and that
    are no page themselves, each with the reason to skip it: Sphinx manuals keep shared
    text in ``.txt`` files (CMake's ``envvar/ENV_VAR.txt``, included by 53 pages) that
    Sphinx never builds alone, and read as a document of its own such a fragment was
    quoted first for every question about an environment variable; Antora sites keep it
    in partials. Each page is read with its fragments written in
    (``formats.rst_includes``, ``formats.adoc_includes``). An include of a ``.rst`` file is
    left alone: Sphinx builds those as pages too, unless told not to; so is a fragment
    included with options that are not written in (``:literal:``), and an AsciiDoc page
    with a title of its own (a modular guide's module): each stays a document. So does a
    file whose domain's readers (``domain_access``, the configured ``access.domains``) are
    not those of a page including it (``domains.read_alike``): a page never carries text to
    a reader who may not read it (it is left out), and a fragment skipped is one its every
    reader reads in its page.

    Paths absolute in a reStructuredText directive (``/include.txt``) are relative to the
    walked folder, as Sphinx reads them against its source folder; ``<isonum.txt>`` names
    a file of docutils' own."""
    candidates = [item for item in found if isinstance(item, Candidate)]
    files = {item.file for item in candidates}
    pages: dict[Path, list[str]] = {}
    for item in candidates:
        suffix = item.file.suffix.lower()
        markdown = suffix in md_snippets.PAGES
        if suffix != ".rst" and suffix not in ASCIIDOC_EXTENSIONS and not markdown:
            continue
        text = _head(item.file)
        if text is None or (markdown and "8<-" not in text and "{%" not in text):
            continue  # unread: its own read reports it
        page = PurePosixPath(item.file.relative_to(item.root).as_posix())
        if suffix == ".rst":
            named = [target(i.name, page) for i in includes(text) if i.inlined]
            is_fragment = _no_frontmatter
        elif markdown:  # the first place a snippet is found, as it is read
            bases = snippet_bases(page, item.root)
            docs_dir = site_docs_dir(page, item.root) if "{%" in text else None
            named = [
                *(
                    _first_file(md_snippets.target(n, bases), item.root)
                    for n in md_snippets.snippet_names(text)
                ),
                *(
                    _first_file(md_includes.targets(n, page, docs_dir), item.root)
                    for n in md_includes.include_names(text)
                ),
            ]
            is_fragment = _no_frontmatter
        else:  # read as it is ingested: under its site's attributes (``{partialsdir}``)
            text = site_attributes(page, item.root) + text
            named = [adoc_includes.target(i.name, page) for i in adoc_includes.includes(text)]
            is_fragment = _adoc_fragment
        for path in named:
            if path is None or not read_alike(path, page, domain_access):
                continue
            fragment = item.root / path
            # a fragment read once for its head, however many pages include it
            if fragment in files and (fragment in pages or is_fragment(fragment)):
                pages.setdefault(fragment, []).append(page.as_posix())
    return {fragment: _included_by(by) for fragment, by in pages.items()}


def _first_file(paths: Sequence[PurePosixPath], root: Path) -> PurePosixPath | None:
    """The first of ``paths`` (under ``root``) that is a file."""
    return next((path for path in paths if (root / path).is_file()), None)


def _head(file: Path, characters: int = _INCLUDE_SCAN) -> str | None:
    """The first ``characters`` of ``file``, or None when it cannot be read (or is no
    regular file: a FIFO would block the read forever)."""
    try:
        if not file.is_file():
            return None
        with file.open(encoding="utf-8", errors="replace") as handle:
            return handle.read(characters)
    except OSError:
        return None


def _no_frontmatter(file: Path) -> bool:
    """Whether ``file`` opens without frontmatter (``rst_includes.own_document``): with
    it, no fragment but a document of its own with its own access list."""
    head = _head(file)
    return head is None or not own_document(head)  # unread: its own read reports it


def _adoc_fragment(file: Path) -> bool:
    """Whether ``file``, which an AsciiDoc page includes, is written into it
    (``adoc_includes.written_in``): no title of its own, no access list."""
    head = _head(file)
    return head is None or adoc_includes.written_in(head)  # unread: its own read reports it


#: what Sphinx's HTML builder writes at its output's root (the cross-reference inventory)
SPHINX_INVENTORY = "objects.inv"
#: folders of a Sphinx HTML build that hold no page: each page's source, copied beside
#: the page built from it, and the theme's scripts, styles and their licences
_SPHINX_MATERIAL = {
    "_sources": "the source of a page Sphinx built, copied beside it: the page is ingested",
    "_static": "a file of the Sphinx theme (scripts, styles, licences), not a page",
}
#: pages at a Sphinx build's root that Sphinx generates rather than reads from a source:
#: the search page (empty until its script runs) and the indexes of terms and modules
_SPHINX_GENERATED = frozenset({"search.html", "genindex.html", "py-modindex.html"})
_GENERATED_REASON = "a page Sphinx generates (search, or an index of links), not one of its pages"


def sphinx_build_material(found: Iterable[Found]) -> dict[Path, str]:
    """Files in the ``_sources`` and ``_static`` folders of a Sphinx HTML build (a folder
    holding ``objects.inv``), and the search and index pages at its root, each with the
    reason to skip it. Ingested as they are, a site downloaded from Read the Docs held
    every page twice, its HTML and its source (``_sources/how-to/sso.md.txt``, in a
    domain of its own), a theme's licence, and an empty ``search.html`` that ``eval``
    refused as an unreadable file."""
    builds: dict[Path, bool] = {}

    def is_build(folder: Path) -> bool:
        return builds.setdefault(folder, (folder / SPHINX_INVENTORY).is_file())

    material: dict[Path, str] = {}
    for item in found:
        if not isinstance(item, Candidate):
            continue
        parts = item.file.relative_to(item.root).parts[:-1]
        if item.file.name in _SPHINX_GENERATED and is_build(item.file.parent):
            material[item.file] = _GENERATED_REASON
        for depth, name in enumerate(parts):
            if name in _SPHINX_MATERIAL and is_build(item.root.joinpath(*parts[:depth])):
                material[item.file] = _SPHINX_MATERIAL[name]
                break
    return material


#: the files a documentation site keeps its navigation in, by the tool that reads them
_NAVIGATION_FILES = {
    "SUMMARY.md": "GitBook's or mdBook's table of contents",
    "_sidebar.md": "Docsify's sidebar",
    "_navbar.md": "Docsify's navigation bar",
}


def site_navigation(found: Iterable[Found]) -> dict[Path, str]:
    """A documentation site's navigation files (GitBook's ``SUMMARY.md``, Docsify's
    ``_sidebar.md`` and ``_navbar.md``) that hold nothing but links to its pages, each with
    the reason to skip it: every page title in one file, it matched any question's words
    and answered none (Apollo's sidebar names each of its 37 guides). A file of that name
    with text of its own (an incident's summary) stays a document."""
    skipped: dict[Path, str] = {}
    for item in found:
        if not isinstance(item, Candidate) or item.file.name not in _NAVIGATION_FILES:
            continue
        text = _head(item.file)
        if text is not None and is_navigation(text):  # unread: its own read reports it
            skipped[item.file] = (
                f"{_NAVIGATION_FILES[item.file.name]}: links to the site's pages, which are "
                "ingested themselves, not a page"
            )
    return skipped


#: how a page of each format includes a fragment
_HOW = {
    ".rst": "reStructuredText `include`",
    **{suffix: "AsciiDoc `include::`" for suffix in ASCIIDOC_EXTENSIONS},
}


def _included_by(pages: Sequence[str]) -> str:
    """Why a fragment is skipped.

    >>> _included_by(["CC.rst"])
    'included by CC.rst (reStructuredText `include`): part of that page, not a document'
    >>> _included_by(["pages/docker.adoc", "pages/k8s.adoc"]).split(": ")[0]
    'included by pages/docker.adoc and 1 more pages (AsciiDoc `include::`)'
    """
    more = f" and {len(pages) - 1} more pages" if len(pages) > 1 else ""
    which = "those pages" if more else "that page"
    how = _HOW.get(PurePosixPath(pages[0]).suffix.lower(), "MkDocs snippet or include")
    return f"included by {pages[0]}{more} ({how}): part of {which}, not a document"
