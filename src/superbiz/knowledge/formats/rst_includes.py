"""reStructuredText's ``include`` directive, resolved before docutils reads a page.

Sphinx manuals keep shared text in fragments (``includes/installation.txt``) that a page
pulls in with ``.. include::``; Sphinx never builds a fragment alone, so discovery skips it
as part of its page (``ingest.parts.include_fragments``). docutils reads a page with
file insertion off (nothing in a file reaches outside it), so the fragment's text was in
neither: Celery's installation guide and its list of resources were in no document. A
fragment inside the knowledge base's folder is written into the page here, where its
directive stands and at its indent, as docutils would insert it; a page's text (and with
it the hash it is stored under) then holds its fragments, so a changed fragment re-reads
its pages. An include of a ``.rst`` file is left alone (Sphinx builds that one as a page
of its own, and so does superbiz), as is one whose options ask for what this does not do
(``:literal:``, ``:code:``, ``:parser:``): it reads as before; and so is a fragment that
opens with frontmatter (``own_document``): it may name who may read it, which the page
including it would not keep.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from posixpath import normpath

#: an ``include`` directive and the file it names
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\.[ \t]+include::[ \t]*(?P<name>\S+)[ \t]*$")
#: one of a directive's option lines, below it and further in
_OPTION = re.compile(r"^(?P<indent>[ \t]+):(?P<key>[\w-]+):(?:[ \t]+(?P<value>.*?))?[ \t]*$")
#: the options that choose which of a fragment's lines are included
_SELECTING = frozenset({"start-line", "end-line", "start-after", "end-before"})
#: fragments included in fragments, at most this deep (a cycle stops at the first repeat)
MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class Include:
    """One ``include`` directive of a page: its first line, the line past its options,
    its indent, the file it names and its options."""

    line: int
    end: int
    indent: str
    name: str
    options: dict[str, str]

    @property
    def inlined(self) -> bool:
        """Whether it is written into its page: a fragment (no ``.rst`` page, none of
        docutils' own ``<isonum.txt>``) with no option but those choosing its lines."""
        return (
            not self.name.startswith("<")
            and not self.name.lower().endswith(".rst")
            and set(self.options) <= _SELECTING
        )


def own_document(text: str) -> bool:
    """Whether a fragment opens with frontmatter, and so stays a document of its own: its
    ``access`` list (or any setting) would be lost in the page that includes it, and a
    fragment only a group may read would be read by everyone who may read the page. A
    ``---`` that no ``---`` line closes and that no setting follows is a rule, not
    frontmatter (Traefik's shared notice opens with one); one that a setting follows is
    frontmatter still, however broken.

    >>> own_document("---\\naccess: [finance]\\n---\\nRates."), own_document("Rates.")
    (True, False)
    >>> own_document("---\\n\\n!!! question"), own_document("---\\naccess: [hr]\\n")
    (False, True)
    """
    text = text.lstrip("\ufeff")
    if not text.startswith(("---\n", "---\r\n")):
        return False
    rest = text.split("\n", 1)[1]
    if _CLOSING.search(rest):
        return True
    first = next((line for line in rest.split("\n") if line.strip()), "")
    return _SETTING.match(first) is not None


#: the line that closes frontmatter, and a setting's first line (``key:``)
_CLOSING = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)
_SETTING = re.compile(r"^[\w-]+[ \t]*:")


def includes(text: str) -> list[Include]:
    """The ``include`` directives of a page's ``text``, in order.

    >>> [(i.name, i.options, i.inlined) for i in includes(
    ...     ".. include:: ../includes/install.txt\\n   :start-after: .. begin\\n\\nText.")]
    [('../includes/install.txt', {'start-after': '.. begin'}, True)]
    >>> [i.inlined for i in includes(".. include:: a.rst\\n.. include:: <isonum.txt>")]
    [False, False]
    """
    lines = text.split("\n")
    found = []
    for number, line in enumerate(lines):
        match = _DIRECTIVE.match(line)
        if match is None:
            continue
        indent, options, end = match["indent"], {}, number + 1
        while end < len(lines) and (option := _OPTION.match(lines[end])):
            if len(option["indent"]) <= len(indent):
                break
            options[option["key"]] = option["value"] or ""
            end += 1
        found.append(Include(number, end, indent, match["name"], options))
    return found


def target(name: str, page: PurePosixPath) -> PurePosixPath | None:
    """The file ``name`` (an include's) stands for, relative to the knowledge base's
    folder, for a page at ``page`` there; a name absolute in the directive is relative
    to that folder, as Sphinx reads it against its source folder. None when it climbs out.

    >>> target("../includes/install.txt", PurePosixPath("guide/intro.rst"))
    PurePosixPath('includes/install.txt')
    >>> target("/shared/a.txt", PurePosixPath("guide/intro.rst"))
    PurePosixPath('shared/a.txt')
    >>> target("../../etc/passwd", PurePosixPath("guide/intro.rst")) is None
    True
    """
    joined = name.lstrip("/") if name.startswith("/") else f"{page.parent.as_posix()}/{name}"
    return inside_folder(joined)


def inside_folder(joined: str) -> PurePosixPath | None:
    """``joined``, a path relative to the knowledge base's folder, normalised; None when
    it climbs out of it.

    >>> inside_folder("guide/../includes/a.txt"), inside_folder("guide/../../etc/passwd")
    (PurePosixPath('includes/a.txt'), None)
    """
    path = normpath(joined)
    if path.startswith(("../", "/")) or path in ("..", "."):
        return None
    return PurePosixPath(path)


def with_includes(
    text: str,
    page: PurePosixPath,
    read: Callable[[PurePosixPath], str | None],
    limit: int,
    _within: tuple[PurePosixPath, ...] = (),
) -> str:
    """``text`` (the page at ``page``) with each fragment it includes written in where
    its directive stands, indented as the directive is; ``read`` gives a fragment's
    text, or None when there is none to read (missing, outside the folder, too large):
    its directive then stays, as docutils skips it. The text grows by at most ``limit``
    characters, each fragment's own includes resolved as deep as ``MAX_DEPTH``.

    >>> fragments = {"includes/install.txt": "Install\\n=======\\n\\n.. begin\\n\\npip install it"}
    >>> page = "Intro\\n\\n.. include:: ../includes/install.txt\\n   :start-after: .. begin\\n"
    >>> with_includes(page, PurePosixPath("guide/intro.rst"), lambda p: fragments.get(str(p)), 99)
    'Intro\\n\\n\\n\\npip install it\\n'
    """
    found = [i for i in includes(text) if i.inlined]
    if not found or len(_within) >= MAX_DEPTH:
        return text
    lines = text.split("\n")
    written: list[str] = []
    done, room = 0, limit
    for include in found:
        path = target(include.name, page)
        if path is None or path in (page, *_within):
            continue  # out of the folder, or a cycle
        fragment = read(path)
        if fragment is None or len(fragment) > room or own_document(fragment):
            continue
        fragment = _selected(fragment, include.options)
        fragment = with_includes(fragment, path, read, room, (*_within, page))
        room -= len(fragment)
        written += lines[done : include.line]
        written += [
            include.indent + line if line.strip() else line for line in fragment.split("\n")
        ]
        done = include.end
    return "\n".join([*written, *lines[done:]])


def _selected(text: str, options: dict[str, str]) -> str:
    """The lines of ``text`` that ``options`` (``start-line``, ``end-line``,
    ``start-after``, ``end-before``) choose, as docutils chooses them.

    >>> _selected("a\\nb\\nc\\n-- cut --\\nd", {"start-line": "1", "end-before": "-- cut --"})
    'b\\nc\\n'
    """
    lines = text.split("\n")
    try:
        start = int(options.get("start-line", 0))
        end = int(options["end-line"]) if "end-line" in options else None
    except ValueError:
        start, end = 0, None
    text = "\n".join(lines[start:end])
    after, before = options.get("start-after"), options.get("end-before")
    if after and after in text:
        text = text[text.index(after) + len(after) :]
    if before and before in text:
        text = text[: text.index(before)]
    return text
