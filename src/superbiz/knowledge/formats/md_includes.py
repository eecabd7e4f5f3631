"""MkDocs' ``include-markdown`` plugin's directives, resolved before a Markdown page is read.

A site that uses ``mkdocs-include-markdown-plugin`` writes shared text into its pages with
``{% include-markdown "includes/service-by-label.md" %}`` (Traefik's documentation, in 55
pages), or any file with ``{% include "examples/app.yml" %}``. Read as written, a page held
the directive and not the text, and the shared file was a document of its own (one Traefik
writes opening on a ``---`` rule was skipped as broken frontmatter). Each directive whose
file lies inside the knowledge base's folder is written in where it stands, each line at
the directive's indent (the plugin's default), its ``start``/``end`` delimiters choosing
the text between them; a page's text, and its hash, then hold it, and discovery skips the
file as part of its pages (``ingest.parts.include_fragments``), as MkDocs' snippets are
(``md_snippets``).

A name is found as the plugin finds it: from the including page's folder when it begins
``./`` or ``../``, else from the folder the site's pages are under (``docs_dir``, read from
the nearest ``mkdocs.yml`` above the page: ``documents.included``), or, without one, from
each folder above the page. A URL or an absolute path is never
read; a file that opens with frontmatter is a page with its own settings, left alone.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import PurePosixPath

from superbiz.knowledge.formats.md_snippets import read_first
from superbiz.knowledge.formats.rst_includes import inside_folder, own_document

#: a directive: ``{% include-markdown "name" start="<!--a-->" %}`` or ``{% include 'name' %}``,
#: on one line or several
_DIRECTIVE = re.compile(
    r"(?P<indent>^[ \t]*)?\{%-?\s*(?P<kind>include-markdown|include)\s+"
    r"(?P<quote>[\"'])(?P<name>[^\"'\n]+)(?P=quote)(?P<args>[^%]*(?:%(?!\})[^%]*)*?)-?%\}",
    re.MULTILINE,
)
#: a delimiter argument: ``start="<!--intro-start-->"``
_DELIMITER = re.compile(
    r"\b(?P<which>start|end)\s*=\s*(?P<quote>[\"'])(?P<value>.*?)(?<!\\)(?P=quote)"
)
#: includes within included files, at most this deep (a cycle stops at the first repeat)
MAX_DEPTH = 8


def include_names(text: str) -> list[str]:
    """The names ``text``'s directives include, in order.

    >>> page = 'Intro.\\n{% include-markdown "includes/a.md" %}\\n{%\\n  include "b.yml"\\n%}'
    >>> include_names(page)
    ['includes/a.md', 'b.yml']
    """
    return [match["name"].strip() for match in _DIRECTIVE.finditer(text)]


def targets(
    name: str, page: PurePosixPath, docs_dir: PurePosixPath | None = None
) -> list[PurePosixPath]:
    """Where ``name``, included by the page at ``page``, may lie, relative to the knowledge
    base's folder: from the page's folder for ``./`` and ``../``, else from the site's
    ``docs_dir`` (the plugin's rule), or, where the site is not known, from each folder
    above the page, nearest first; none out of the folder.

    >>> [p.as_posix() for p in targets("includes/x.md", PurePosixPath("docs/a/b.md"))]
    ['docs/a/includes/x.md', 'docs/includes/x.md', 'includes/x.md']
    >>> [p.as_posix() for p in targets("includes/x.md", PurePosixPath("docs/a/b.md"),
    ...                                PurePosixPath("docs"))]
    ['docs/includes/x.md']
    >>> [p.as_posix() for p in targets("../x.md", PurePosixPath("docs/a/b.md"))]
    ['docs/x.md']
    >>> targets("https://example.com/x.md", PurePosixPath("a.md"))
    []
    """
    if "://" in name or name.startswith("/"):
        return []
    if name.startswith(("./", "../")):
        folders = [page.parent]
    else:
        folders = [docs_dir] if docs_dir is not None else list(page.parents)
    found = [inside_folder(posixpath.join(folder.as_posix(), name)) for folder in folders]
    return [path for path in found if path is not None]


def with_includes(
    text: str,
    page: PurePosixPath,
    read: Callable[[PurePosixPath], str | None],
    limit: int,
    docs_dir: PurePosixPath | None = None,
    _within: tuple[PurePosixPath, ...] = (),
) -> str:
    """``text`` (the page at ``page``, of a site whose pages are under ``docs_dir``) with
    each directive written in; ``read`` gives a file's text, or None when there is none to
    read (missing, outside the folder, too large): the directive then stays as written.
    The text grows by at most ``limit`` characters, included files' own directives
    resolved as deep as ``MAX_DEPTH``.

    >>> files = {"docs/includes/note.md": "# Note\\n<!--s-->Restart it.\\n<!--e-->Footer"}
    >>> read, page = lambda path: files.get(str(path)), PurePosixPath("docs/ops/run.md")
    >>> print(with_includes('1. Then:\\n\\n    {% include-markdown "includes/note.md"'
    ...                     ' start="<!--s-->" end="<!--e-->" %}', page, read, 99))
    1. Then:
    <BLANKLINE>
        Restart it.
    """
    if len(_within) >= MAX_DEPTH:
        return text
    room = limit
    written: list[str] = []
    at = 0
    for match in _DIRECTIVE.finditer(text):
        names = targets(match["name"].strip(), page, docs_dir)
        found = read_first(names, read, (page, *_within))
        if found is None or len(found[1]) > room or own_document(found[1]):
            continue  # one it cannot write in stays as written
        path, included = found
        if match["kind"] == "include-markdown":
            included = _between(included, match["args"])
            included = with_includes(included, path, read, room, docs_dir, (page, *_within))
        room -= len(included)
        indent = match["indent"] or ""
        lines = included.rstrip("\n").split("\n")
        written += [text[at : match.start()], indent, f"\n{indent}".join(lines)]
        at = match.end()
    return "".join([*written, text[at:]])


def _between(text: str, args: str) -> str:
    r"""``text`` after its first ``start`` delimiter and before the ``end`` after it, as
    the directive's ``args`` name them (``\n`` and ``\t`` in them as newlines and tabs).

    >>> _between("a<!--s-->b<!--e-->c", 'start="<!--s-->" end="<!--e-->"'), _between("a", "")
    ('b', 'a')
    """
    delimiters = {
        m["which"]: m["value"].replace("\\n", "\n").replace("\\t", "\t")
        for m in _DELIMITER.finditer(args)
    }
    if (start := delimiters.get("start")) and start in text:
        text = text.split(start, 1)[1]
    if (end := delimiters.get("end")) and end in text:
        text = text.split(end, 1)[0]
    return text
