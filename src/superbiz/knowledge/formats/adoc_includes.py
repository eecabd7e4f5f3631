"""AsciiDoc's ``include::`` directive, resolved before a page is read.

Asciidoctor and Antora sites keep shared text in fragments: Antora's partials
(``include::partial$docker-ip-warning.adoc[]``), a guide's snippets
(``include::{partialsdir}/frag-mbean-name.adoc[tags=snapshot]``), code examples
(``include::example$GroupingClusters.java[tag=groupingclusters]`` inside a listing). Such a
fragment is no page of its own and says nothing alone, so it is written into the page where its
directive stands (a page's text, and the hash it is stored under, then hold it: a changed
fragment reads its pages again), and discovery skips it as part of its pages
(``ingest.parts.include_fragments``). What a directive names is found as Asciidoctor
and Antora find it: relative to the page, after the page's own attributes are substituted
(``{partialsdir}``), or by Antora's resource id (``module:family$path``) inside the page's
component (``…/modules/<module>/<family>s/path``); ``tag``/``tags`` and ``lines`` choose its
lines and ``leveloffset`` moves its sections.

An include of a page with a title of its own (``= Title``: a modular guide's module, which
its assembly includes) is left alone: that page is a document of its own, and written into
its assembly too it would be found twice. So is a fragment that opens with frontmatter-like
access settings, as for reStructuredText (``rst_includes.own_document``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from superbiz.knowledge.formats._asciidoc_text import substituted
from superbiz.knowledge.formats.rst_includes import inside_folder, own_document

#: an ``include::`` directive: its target and attribute list
_DIRECTIVE = re.compile(r"^include::(?P<target>[^\[\s]+)\[(?P<attributes>[^\]]*)\][ \t]*$")
_ENTRY = re.compile(r"^:(?P<name>\w[\w-]*):[ \t]+(?P<value>.*?)[ \t]*$")
#: Antora's resource id: ``[component:]module:family$path`` or ``family$path``
_RESOURCE = re.compile(r"^(?:(?:[\w.@-]+:)?(?P<module>[\w.-]+):)?(?P<family>[a-z]+)\$(?P<path>.+)$")
_FAMILIES = {"partial": "partials", "example": "examples", "page": "pages"}
_TAG = re.compile(r"\b(?P<end>tag|end)::(?P<name>[\w-]+)\[\]")
_SECTION = re.compile(r"^(?P<marks>=+)(?P<rest>[ \t]+\S.*)$")
_OWN_TITLE = re.compile(r"^=[ \t]+\S")
#: fragments included in fragments, at most this deep (a cycle stops at the first repeat)
MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class AdocInclude:
    """One ``include::`` line of a page: where it stands, what it names, its attributes."""

    line: int
    name: str
    attributes: dict[str, str]


def includes(text: str) -> list[AdocInclude]:
    """The ``include::`` directives of a page's ``text``, with its attribute entries
    substituted into their targets as far as they are set above them.

    >>> [(i.name, i.attributes) for i in includes(
    ...     ":partialsdir: ../partials\\ninclude::{partialsdir}/a.adoc[leveloffset=+1,tag=x]")]
    [('../partials/a.adoc', {'leveloffset': '+1', 'tag': 'x'})]
    """
    attributes: dict[str, str] = {}
    found = []
    for number, line in enumerate(text.split("\n")):
        if entry := _ENTRY.match(line):
            attributes[entry["name"].lower()] = substituted(entry["value"], attributes)
        elif directive := _DIRECTIVE.match(line):
            name = substituted(directive["target"], attributes)
            found.append(AdocInclude(number, name, _attributes(directive["attributes"])))
    return found


def _attributes(text: str) -> dict[str, str]:
    pairs = (entry.partition("=") for entry in re.findall(r'(?:[^,"]|"[^"]*")+', text))
    return {key.strip(): value.strip().strip('"') for key, _, value in pairs if key.strip()}


def target(name: str, page: PurePosixPath) -> PurePosixPath | None:
    """The file ``name`` stands for, relative to the knowledge base's folder, for a page at
    ``page`` there; None when it climbs out, names a URL, or an Antora resource outside the
    page's component.

    >>> page = PurePosixPath("docs/modules/clusters/pages/creating.adoc")
    >>> target("partial$warning.adoc", page).as_posix()
    'docs/modules/clusters/partials/warning.adoc'
    >>> target("ROOT:example$Grouping.java", page).as_posix()
    'docs/modules/ROOT/examples/Grouping.java'
    >>> target("../snippets/b.adoc", PurePosixPath("guide/a.adoc")), target("/etc/passwd", page)
    (PurePosixPath('snippets/b.adoc'), None)
    """
    if "{" in name or "://" in name or name.startswith("/"):
        return None
    resource = _RESOURCE.match(name)
    if resource:
        parts = page.parts
        if "modules" not in parts[:-1] or resource["family"] not in _FAMILIES:
            return None
        root = parts.index("modules")
        module = resource["module"] or (parts[root + 1] if len(parts) > root + 2 else "")
        joined = "/".join(
            [*parts[: root + 1], module, _FAMILIES[resource["family"]], resource["path"]]
        )
    else:
        joined = f"{page.parent.as_posix()}/{name}"
    return inside_folder(joined)


def written_in(fragment: str) -> bool:
    """Whether a file a page includes is written into it: not a page of its own (a title
    of its own, or its own access settings).

    >>> written_in("// shared\\nWARNING: public ports."), written_in(":x: y\\n\\n= Install\\n")
    (True, False)
    """
    if own_document(fragment):
        return False
    for line in fragment.split("\n"):
        if line.strip() and not line.startswith(("//", ":", "[")):
            return not _OWN_TITLE.match(line)
    return True


def with_includes(
    text: str,
    page: PurePosixPath,
    read: Callable[[PurePosixPath], str | None],
    limit: int,
    _within: tuple[PurePosixPath, ...] = (),
) -> str:
    """``text`` (the page at ``page``) with each fragment it includes written in where its
    directive stands; ``read`` gives a file's text, or None when there is none to read
    (missing, outside the folder, too large): its directive then stays, and the reader
    drops it. The text grows by at most ``limit`` characters, fragments' own includes
    resolved as deep as ``MAX_DEPTH``.

    >>> files = {"partials/warn.adoc": "tag::w[]\\nNOTE: Ports are public.\\nend::w[]\\nOther."}
    >>> with_includes("= Docker\\n\\ninclude::partials/warn.adoc[tag=w]\\n", PurePosixPath(
    ...     "docker.adoc"), lambda p: files.get(str(p)), 99)
    '= Docker\\n\\nNOTE: Ports are public.\\n'
    """
    found = includes(text)
    if not found or len(_within) >= MAX_DEPTH:
        return text
    lines = text.split("\n")
    room = limit
    for include in reversed(found):  # from the end: the lines above keep their numbers
        path = target(include.name, page)
        if path is None or path in (page, *_within):
            continue  # out of the folder, or a cycle
        fragment = read(path)
        if fragment is None or len(fragment) > room or not written_in(fragment):
            continue
        fragment = _selected(fragment, include.attributes)
        fragment = with_includes(fragment, path, read, room, (*_within, page))
        fragment = _offset(fragment, include.attributes.get("leveloffset", ""))
        room -= len(fragment)
        lines[include.line : include.line + 1] = fragment.split("\n")
    return "\n".join(lines)


def _selected(text: str, attributes: dict[str, str]) -> str:
    """The lines of ``text`` that ``tag``/``tags`` and ``lines`` choose, tag markers left out.

    >>> _selected("// tag::a[]\\none\\n// end::a[]\\ntwo\\nthree", {"tags": "a;b"})
    'one'
    >>> _selected("a\\nb\\nc\\nd", {"lines": "2..3"}), _selected("a\\nb\\nc", {"lines": "2..-1"})
    ('b\\nc', 'b\\nc')
    """
    lines = text.split("\n")
    if spans := attributes.get("lines"):
        chosen: list[str] = []
        for span in re.split(r"[;,]", spans):
            first, _, last = span.partition("..")
            try:
                start, end = int(first), int(last or first)
            except ValueError:
                continue
            chosen += lines[start - 1 : None if end == -1 else end]
        lines = chosen
    tags = {t for t in re.split(r"[;,]", attributes.get("tags", attributes.get("tag", ""))) if t}
    wanted = {t for t in tags if not t.startswith("!") and t not in ("*", "**")}
    if not wanted:
        return "\n".join(line for line in lines if not _TAG.search(line))
    kept: list[str] = []
    open_tags: set[str] = set()
    for line in lines:
        if marker := _TAG.search(line):
            (open_tags.discard if marker["end"] == "end" else open_tags.add)(marker["name"])
        elif open_tags & wanted:
            kept.append(line)
    return "\n".join(kept)


def _offset(text: str, leveloffset: str) -> str:
    """``text`` with its section titles moved by ``leveloffset`` (``+1``, ``-1``, ``2``,
    added to their levels); code blocks are not touched.

    >>> _offset("= Title\\n\\n== Part\\n----\\n= not a title\\n----", "+1")
    '== Title\\n\\n=== Part\\n----\\n= not a title\\n----'
    """
    try:
        shift = int(leveloffset) if leveloffset else 0
    except ValueError:
        return text
    if not shift:
        return text
    out, verbatim = [], None
    for line in text.split("\n"):
        if verbatim is None and (section := _SECTION.match(line)):
            line = "=" * min(max(len(section["marks"]) + shift, 1), 6) + section["rest"]
        elif re.fullmatch(r"-{4,}|\.{4,}|`{3}\S*", line.strip()):
            verbatim = None if verbatim is not None else line.strip()
        out.append(line)
    return "\n".join(out)
