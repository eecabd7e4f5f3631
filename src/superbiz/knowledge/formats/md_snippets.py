"""MkDocs' snippets (``pymdownx.snippets``), resolved before a Markdown page is read.

A MkDocs site writes shared text and whole scripts into its pages with a snippet line:
``--8<-- "includes/warning.md"``, or inside a code fence ``--8<-- "scripts/backup.sh"``, the
runbook's commands kept in the script they are run from. Read as written, the page held the
line and not the text: a runbook without its commands. A snippet inside the knowledge
base's folder is written in where its line stands, at its indent, as the extension writes
it (in a code block too); a page's text, and the hash it is stored under, then hold it, so
a changed snippet reads its pages again, and discovery skips a snippet that is no page as
part of its pages (``ingest.parts.include_fragments``).

A name is found as the extension finds it, under its base path: the folder of the site's
``mkdocs.yml`` (where ``mkdocs`` runs), then the knowledge base's folder (``bases``, from
``documents.included``). ``file.md:3:6`` chooses lines, ``file.py:setup`` the lines between
``--8<-- [start:setup]`` and ``--8<-- [end:setup]``; a block of names between two bare
``--8<--`` lines writes in each; ``;--8<--`` is the line as written, without its ``;``. A
snippet that opens with frontmatter is a page with its own settings (an access list): left
alone, as a reStructuredText include of one is (``rst_includes.own_document``). A URL is
never fetched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from superbiz.knowledge.formats.rst_includes import inside_folder, own_document

#: the pages that may hold snippet lines: Markdown's
PAGES = (".md", ".markdown", ".mdx")
#: a snippet line: ``--8<-- "name"`` (any run of dashes each side), ``;`` escaping it
_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<escape>;)?-+8<-+"
    r"(?:[ \t]+(?P<quote>[\"'])(?P<name>[^\"'\n]+)(?P=quote))?[ \t]*$"
)
#: a section marker in a snippet: ``# --8<-- [start:setup]``, ``<!-- --8<-- [end:setup] -->``
_MARKER = re.compile(r"-+8<-+[ \t]+\[(?P<end>start|end):(?P<name>[\w-]+)\]")
#: what a name selects after it: ``:3:6`` (lines), ``:3``, ``:setup`` (a section)
_SELECTION = re.compile(
    r"^(?P<file>.+?)(?::(?P<start>\d*)(?::(?P<stop>\d*))?|:(?P<section>[\w-]+))$"
)
#: snippets within snippets, at most this deep (a cycle stops at the first repeat)
MAX_DEPTH = 8


def snippet_names(text: str) -> list[str]:
    """The names ``text``'s snippet lines write in, in order, selections apart.

    >>> snippet_names('Run:\\n```sh\\n--8<-- "scripts/backup.sh:10:20"\\n```\\n;--8<-- "no.md"')
    ['scripts/backup.sh']
    >>> snippet_names("--8<--\\nincludes/a.md\\n; not this\\nincludes/b.md\\n--8<--")
    ['includes/a.md', 'includes/b.md']
    """
    return [_split(name)[0] for _, _, names in _snippets(text.split("\n")) for name in names]


def target(name: str, bases: Sequence[str]) -> list[PurePosixPath]:
    """Where ``name`` may lie, relative to the knowledge base's folder: under each of
    ``bases`` in turn; none that climbs out of the folder, nor a URL or an absolute path.

    >>> [p.as_posix() for p in target("includes/warn.md", ["site", ""])]
    ['site/includes/warn.md', 'includes/warn.md']
    >>> target("https://example.com/a.md", [""]), target("../../etc/passwd", ["site"])
    ([], [])
    """
    if "://" in name or name.startswith("/"):
        return []
    found = [inside_folder(f"{base}/{name}" if base else name) for base in bases]
    return [path for path in found if path is not None]


def with_snippets(
    text: str,
    bases: Sequence[str],
    read: Callable[[PurePosixPath], str | None],
    limit: int,
    _within: tuple[PurePosixPath, ...] = (),
) -> str:
    """``text`` with each snippet it names written in where its line stands, at the
    line's indent; ``read`` gives a file's text, or None when there is none to read
    (missing, outside the folder, too large): the line then stays as written. The text
    grows by at most ``limit`` characters, snippets' own snippets resolved as deep as
    ``MAX_DEPTH``.

    >>> files = {"scripts/ok.sh": "#!/bin/sh\\n# --8<-- [start:run]\\nsystemctl restart x\\n"
    ...          "# --8<-- [end:run]\\nexit 0"}
    >>> print(with_snippets('1. Restart:\\n\\n    ```sh\\n    --8<-- "scripts/ok.sh:run"\\n    ```',
    ...                     [""], lambda p: files.get(str(p)), 99))
    1. Restart:
    <BLANKLINE>
        ```sh
        systemctl restart x
        ```
    """
    lines = text.split("\n")
    found = _snippets(lines) if len(_within) < MAX_DEPTH else []
    room = limit
    for start, end, names in reversed(found):  # from the end: the lines above keep their numbers
        written: list[str] = []
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip(" \t"))]
        for name in names:
            file, selection = _split(name)
            fragment = read_first(target(file, bases), read, _within)
            if fragment is None or len(fragment[1]) > room or own_document(fragment[1]):
                written = []
                break  # one it cannot write in: the lines stay as written
            path, snippet = fragment
            snippet = with_snippets(
                _selected(snippet, selection), bases, read, room, (*_within, path)
            )
            room -= len(snippet)
            written += [f"{indent}{line}" if line else line for line in snippet.split("\n")]
        if written or not names:
            lines[start : end + 1] = written
    return "\n".join(_unescaped(line) for line in lines)


def _snippets(lines: Sequence[str]) -> list[tuple[int, int, list[str]]]:
    """Each snippet line or block of ``lines``: its first and last line and the names."""
    found: list[tuple[int, int, list[str]]] = []
    at = 0
    while at < len(lines):
        line = _LINE.match(lines[at])
        if line is None or line["escape"]:
            at += 1
            continue
        if line["name"]:
            found.append((at, at, [line["name"]]))
            at += 1
            continue
        end = next(
            (i for i in range(at + 1, len(lines)) if (closing := _LINE.match(lines[i]))
             and not closing["name"] and not closing["escape"]),
            None,
        )  # fmt: skip
        if end is None:
            break
        names = [
            n.strip() for n in lines[at + 1 : end] if n.strip() and not n.lstrip().startswith(";")
        ]
        found.append((at, end, names))
        at = end + 1
    return found


def _unescaped(line: str) -> str:
    """A snippet line escaped with ``;`` as the page shows it, without the ``;``."""
    match = _LINE.match(line)
    if match is None or not match["escape"]:
        return line
    return match["indent"] + line[len(match["indent"]) + 1 :]


def _split(name: str) -> tuple[str, str]:
    """A name and what it selects: ``("a.py", ":3:6")``, ``("a.py", ":setup")``."""
    match = _SELECTION.match(name)
    if match is None or not (match["start"] or match["stop"] or match["section"]):
        return name, ""
    return match["file"], name[len(match["file"]) :]


def read_first(
    paths: Sequence[PurePosixPath],
    read: Callable[[PurePosixPath], str | None],
    within: tuple[PurePosixPath, ...],
) -> tuple[PurePosixPath, str] | None:
    """The first of ``paths`` there is text to read at, and its text; never one of those
    being written in already, ``within`` (a cycle)."""
    for path in paths:
        if path not in within and (text := read(path)) is not None:
            return path, text
    return None


def _selected(text: str, selection: str) -> str:
    """The lines of ``text`` that ``selection`` chooses, section markers left out.

    >>> _selected("a\\nb\\nc\\nd", ":2:3"), _selected("a\\nb\\nc", ":2"), _selected("a\\nb", "")
    ('b\\nc', 'b\\nc', 'a\\nb')
    >>> _selected("x\\n// --8<-- [start:s]\\ny\\n// --8<-- [end:s]\\nz", ":s")
    'y'
    """
    lines = text.rstrip("\n").split("\n")
    selected = _SELECTION.match(f"-{selection}") if selection else None
    if selected and selected["section"]:
        kept: list[str] = []
        inside = False
        for line in lines:
            if (marker := _MARKER.search(line)) and marker["name"] == selected["section"]:
                inside = marker["end"] == "start"
            elif inside:
                kept.append(line)
        lines = kept
    elif selected:
        start = int(selected["start"] or 1)
        stop = int(selected["stop"]) if selected["stop"] else len(lines)
        lines = lines[max(start, 1) - 1 : stop]
    return "\n".join(line for line in lines if not _MARKER.search(line))
