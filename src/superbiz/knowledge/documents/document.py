"""Knowledge documents: a Markdown file with optional YAML frontmatter.

A file that cannot become a document raises ``DocumentError`` with the reason; the
caller reports it and goes on with the rest. Nothing in a file can make parsing
unbounded: YAML aliases are sized before they are expanded, and text that no store
can keep (NUL, control characters in fields) is refused with its reason.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from superbiz._markdown import ATX_HEADING, fenced
from superbiz._text import CONTROL_CHARACTERS, clip
from superbiz.access import AccessListError, parse_access
from superbiz.config import IngestSettings
from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.chunking import chunking_of
from superbiz.knowledge.documents.domains import folder_domain, normalize_domain, written_name
from superbiz.knowledge.documents.frontmatter import (
    ACCESS_KEY,
    FRONTMATTER_KEYS,
    LIST_KEYS,
    SITE_KEYS,
    SYNONYMS,
    TEXT_KEYS,
    split_frontmatter,
)
from superbiz.knowledge.documents.included import with_fragments
from superbiz.knowledge.documents.site_titles import SiteTitles
from superbiz.knowledge.formats import convert, reader_of
from superbiz.knowledge.formats._admonitions import (
    colon_admonitions_as_quotes,
    github_alerts_as_quotes,
    mkdocs_admonitions_as_quotes,
)
from superbiz.knowledge.formats._headings import headings_as_shown
from superbiz.knowledge.formats._html_blocks import html_headings_as_markdown
from superbiz.knowledge.formats._invisible import invisible_html_dropped
from superbiz.knowledge.formats._isolated import DEFAULT_LIMITS, ConversionLimits
from superbiz.knowledge.formats._mdx import mdx_scripts_dropped
from superbiz.knowledge.formats._myst import myst_directives_as_markdown
from superbiz.knowledge.formats._roles import myst_roles_as_text
from superbiz.knowledge.formats._shortcodes import code_shortcodes_as_fences
from superbiz.knowledge.formats.decode import DEFAULT_ENCODINGS, decode
from superbiz.storage.models import DOMAIN_MAX, PATH_MAX, TITLE_MAX

#: a page of headings alone has nothing to answer from, and its title matched questions
#: exactly: 42 of 83 pages of a Sphinx project were autodoc's, which Sphinx fills at build
#: time, and their sibling titles raised the KB's measured reference threshold to 0.69
_ONLY_HEADINGS = (
    "nothing but headings: no text to answer from (a page a site's build fills, such as "
    "Sphinx's autodoc pages or a page that includes other pages whole, reads empty here)"
)


#: the most of a description that heads each chunk (``SourceDocument.headline``), as much
#: as the map keeps of a derived one: a page-long one would crowd out the chunk's own text
HEADLINE_DESCRIPTION_CHARS = 300


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One parsed knowledge document; ``path`` (relative, POSIX) is its identity."""

    path: str
    title: str
    domain: str
    body: str
    #: the SHA-256 of the file's bytes; an ingest stores it as ``indexed_hash``
    content_hash: str
    size_bytes: int
    covers: tuple[str, ...] = ()
    when_to_retrieve: str | None = None
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    #: where ``covers`` and ``when_to_retrieve`` came from: frontmatter, llm or derived
    origin: dict[str, str] = field(default_factory=dict)
    #: what the frontmatter says that is not used (unknown keys), for the ingest report
    warnings: tuple[str, ...] = ()
    #: the groups that may read it (frontmatter ``access``); None: its domain's rule
    access: tuple[str, ...] | None = None
    #: how an ingest read it (``read_with``); empty until one stores it
    read_with: str = ""

    @property
    def headline(self) -> str:
        """What heads each of its chunks for the embedder and BM25: the title, and under it
        the description its author wrote (frontmatter ``description``, ``summary`` or
        ``when_to_retrieve``), so that every passage of a page carries what the page is for
        in the words a question uses. One the ingest derived or a model wrote is left out:
        it is the page's own opening, or a guess.

        >>> SourceDocument("a.md", "npm-deprecate", "commands", "", "", 0,
        ...                when_to_retrieve="Deprecate a version of a package").headline
        'npm-deprecate\\nDeprecate a version of a package'
        """
        authored = self.origin.get("when_to_retrieve", "frontmatter") == "frontmatter"
        if authored and self.when_to_retrieve and self.when_to_retrieve != self.title:
            return f"{self.title}\n{clip(self.when_to_retrieve, HEADLINE_DESCRIPTION_CHARS)}"
        return self.title

    def metadata(self) -> dict[str, Any]:
        """What the relational store keeps besides the columns."""
        return {
            "covers": list(self.covers),
            "when_to_retrieve": self.when_to_retrieve,
            "tags": list(self.tags),
            "aliases": list(self.aliases),
            "extra": self.extra,
            "origin": self.origin,
            **({"read_with": self.read_with} if self.read_with else {}),
        }


def conversion_limits(settings: IngestSettings) -> ConversionLimits:
    """The bounds ``settings`` put on a conversion (``ingest.convert-*``)."""
    return ConversionLimits(
        memory_bytes=settings.convert_memory_mb * 1024 * 1024,
        seconds=settings.convert_timeout_s,
    )


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_with(path: str, settings: IngestSettings) -> str:
    """How the file of a document at ``path`` becomes text and chunks today: its format's
    reader and the chunking, with their versions and sizes, e.g. ``markdown 3; chunks 3
    800/100``. A stored document records it (``metadata["read_with"]``)."""
    chunking = chunking_of(settings.chunk_size, settings.chunk_overlap)
    return f"{reader_of(PurePosixPath(path).suffix)}; {chunking}"


def indexed_hash(digest: str, path: str, settings: IngestSettings) -> str:
    """The hash a stored document goes by: ``digest``, its file's bytes' hash, with how
    they were read (``read_with``).

    A new reader or chunker, or another ``ingest.chunk-size``, changes it: the next
    ingest reads the file again instead of keeping the text and chunks made before.
    """
    return content_hash(f"{read_with(path, settings)}\n{digest}".encode())


def load_document(
    file: Path,
    root: Path,
    max_bytes: int,
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
    limits: ConversionLimits = DEFAULT_LIMITS,
    domain_access: Mapping[str, Sequence[str]] | None = None,
    sites: SiteTitles | None = None,
) -> SourceDocument:
    """Read and parse ``file``; ``root`` decides its relative path and default domain.

    A symlink is followed only to a file inside ``root``; its identity is then the
    target's path, so a link beside its target is reported as a duplicate. A page that
    includes others is read with them (``included.with_fragments``), those of a domain
    its own domain's readers may not all read (``domain_access``) left out; a page of a
    documentation site (``sites``) that gives itself no title is titled by the site.
    """
    label = file.relative_to(root).as_posix() if file.is_relative_to(root) else str(file)
    try:
        real = file.resolve(strict=True)
    except RuntimeError as exc:  # Python 3.11 reports a symlink loop this way
        raise DocumentError(label, "symlink loop") from exc
    except OSError as exc:
        reason = "symlink loop" if exc.errno == errno.ELOOP else None
        raise DocumentError(label, reason or _missing(file)) from exc
    base = root.resolve()
    if not real.is_relative_to(base):
        raise DocumentError(label, f"symlink to {real}, outside the KB folder {base}")
    relative = PurePosixPath(real.relative_to(base).as_posix())
    label = str(relative)
    if not real.is_file():  # a FIFO would block the read forever
        raise DocumentError(label, "not a regular file")
    size = real.stat().st_size
    if size > max_bytes:
        raise DocumentError(label, f"too large: {size} bytes exceeds the {max_bytes}-byte limit")
    data = real.read_bytes()
    data = with_fragments(data, relative, base, encodings, max_bytes, domain_access)
    site_title = sites.title(real, base) if sites is not None else None
    return parse_document(data, relative, encodings, limits, site_title)


def _missing(file: Path) -> str:
    if file.is_symlink():
        return f"broken symlink (its target {file.readlink()} does not exist)"
    return "file disappeared while reading"


def parse_document(
    data: bytes,
    relative: PurePosixPath,
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
    limits: ConversionLimits = DEFAULT_LIMITS,
    site_title: str | None = None,
) -> SourceDocument:
    """Parse raw bytes of a document whose path relative to the KB root is ``relative``;
    ``encodings`` are tried in order when the file has no byte-order mark; ``limits``
    bound a converted format's conversion. ``site_title``, what its documentation site
    calls the page, titles a page that gives itself none (no frontmatter title, no ``#``
    heading of its own; a ``##`` heading alone is its first section, "## Responsibilities");
    the document's hash then covers it, so that a site renaming the page reads it again."""
    label = str(relative)
    if len(label) > PATH_MAX:
        raise DocumentError(label, f"path longer than {PATH_MAX} characters")
    if not data.strip():
        raise DocumentError(label, "empty file")
    # the one place a file's extension decides how it is read (knowledge.formats)
    converted = convert(data, relative.suffix, label, encodings, limits)
    front: dict[str, Any]
    warnings: tuple[str, ...]
    if converted is not None:
        front, body, warnings = {}, converted.markdown.replace("\x00", ""), ()
        if not body.strip():
            raise DocumentError(label, "no text in the file")
    else:
        front, body, warnings = _read_markdown(data, label, encodings)
    if not any(line.strip() and not ATX_HEADING.match(line) for line in body.split("\n")):
        raise DocumentError(label, _ONLY_HEADINGS)

    stem = written_name(relative.stem)
    # the title a page gives itself: its frontmatter's, its format's, or its one top heading
    heading = page_heading(body)
    own = (
        _str_field(front, "title", label)
        or (converted and converted.title)
        or (heading.text if heading and heading.level == 1 else None)
    )
    title = own or site_title or (heading and heading.text) or stem
    digest = content_hash(data)
    if site_title and not own:
        digest = content_hash(f"{digest}\ntitled by its site: {site_title}".encode())
    category = _str_field(front, "category", label)
    domain = normalize_domain(category) if category else folder_domain(relative)
    if len(domain) > DOMAIN_MAX:
        raise DocumentError(label, f"category longer than {DOMAIN_MAX} characters")
    aliases = _list_field(front, "aliases", label)
    return SourceDocument(
        path=label,
        title=clip(" ".join(CONTROL_CHARACTERS.sub(" ", title).split()), TITLE_MAX),
        domain=domain,
        body=body,
        content_hash=digest,
        size_bytes=len(data),
        covers=_list_field(front, "covers", label),
        when_to_retrieve=_str_field(front, "when_to_retrieve", label),
        tags=_list_field(front, "tags", label),
        aliases=(*aliases, stem)
        if (stem := written_name(relative.stem)) not in aliases
        else aliases,
        extra=_json_safe({k: v for k, v in front.items() if k not in FRONTMATTER_KEYS}),
        warnings=warnings,
        access=_access_field(front, label),
    )


def _read_markdown(
    data: bytes, label: str, encodings: Sequence[str]
) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """``(frontmatter, body, warnings)`` of a Markdown or plain-text file."""
    text = decode(data, label, encodings)
    if "\x00" in text:
        raise DocumentError(label, "contains NUL characters (U+0000): binary or corrupted text")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    front, body = split_frontmatter(text, label)
    front, body, warnings = _check_keys(front, body, text)
    # a licence header in a comment is not the text, nor a Docusaurus page's imports; a
    # Hugo block of code (Istio's ``{{< text bash >}}``) is code before anything reads it
    body = mdx_scripts_dropped(invisible_html_dropped(code_shortcodes_as_fences(body)))
    if not body.strip():
        raise DocumentError(label, "no content after the frontmatter")
    # MkDocs' ``!!! note``, Docusaurus' ``:::tip``, GitHub's ``> [!NOTE]``, Sphinx's {note}
    # fences and {ref}`…` roles read as their text
    body = mkdocs_admonitions_as_quotes(colon_admonitions_as_quotes(body))
    body = github_alerts_as_quotes(body)
    body = html_headings_as_markdown(body)  # a FAQ's <h4> questions are its sections
    body = headings_as_shown(body)  # "## 相关配置 {#basic-configuration}" shows 相关配置
    body = myst_roles_as_text(myst_directives_as_markdown(body))
    _refuse_unstorable(front, label)
    return front, body, warnings


def _known_key(key: Any) -> Any:
    """``key`` as the known frontmatter key it spells in another case, else as written."""
    lower = key.lower() if isinstance(key, str) else key
    return lower if lower in FRONTMATTER_KEYS or lower in SYNONYMS else key


def _check_keys(
    front: dict[str, Any], body: str, text: str
) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """``(frontmatter, body, warnings)``: a block with no known key whose values are all
    text is a horizontal rule and text (``---`` / ``Warning: never restart X`` / ``---``),
    so it stays in the body instead of vanishing into ``extra``; a value YAML reads as
    something else (``bookHidden: true``, ``order: 3``, a list) is no line of prose, so
    its block is frontmatter. Unknown keys are kept in ``extra`` and named, since they
    do nothing (``domain:`` for ``category:``)."""
    # ``Title:`` is ``title:``: a capital letter must not turn a title into text
    front = {_known_key(key): value for key, value in front.items()}
    for key, field_name in SYNONYMS.items():
        if key in front and field_name not in front and _fits(field_name, front[key]):
            front[field_name] = front.pop(key)
    unknown = [key for key in front if key not in FRONTMATTER_KEYS and not _site_key(key)]
    if not unknown:
        return front, body, ()
    # a generator's key whose field is set, or of another type, is no unknown key
    unused = [_unused_synonym(key, front) for key in unknown if key in SYNONYMS]
    unknown = [key for key in unknown if key not in SYNONYMS]
    if not unknown:
        return front, body, tuple(unused)
    known = ", ".join(FRONTMATTER_KEYS)
    names = ", ".join(repr(clip(key, 40)) for key in unknown)
    hint = "; the domain is set by 'category'" if "domain" in unknown else ""
    if len(unknown) == len(front) and all(isinstance(value, str) for value in front.values()):
        return (
            {},
            text,
            (
                f"the opening '---' block has no frontmatter key ({names}): "
                f"kept as text, not frontmatter (known keys: {known}){hint}",
            ),
        )
    return (
        front,
        body,
        (
            f"unknown frontmatter key{'s' if len(unknown) > 1 else ''} {names}: not used, "
            f"kept in extra (known keys: {known}){hint}",
            *unused,
        ),
    )


def _site_key(key: Any) -> bool:
    """Whether ``key`` is a static-site generator's (``SITE_KEYS``), in any case."""
    return isinstance(key, str) and key.lower() in SITE_KEYS


def _unused_synonym(key: str, front: dict[str, Any]) -> str:
    """Why a static-site generator's ``key`` (``SYNONYMS``) was not read as its field."""
    field_name = SYNONYMS[key]
    if field_name in front:
        why = f"{field_name!r} is set"
    else:
        kind = "text" if field_name in TEXT_KEYS else "text or a list of texts"
        value = front[key]
        what = (
            "a list of other values than texts"
            if isinstance(value, list) and field_name in LIST_KEYS
            else _kind(value)
        )
        why = f"it is read as {field_name!r} when it is {kind}, not {what}"
    return f"frontmatter key {key!r} not used: {why} (kept in extra)"


def _kind(value: Any) -> str:
    """What a frontmatter value is, in a warning's words."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    return "empty" if value is None else type(value).__name__


def _fits(field_name: str, value: Any) -> bool:
    """Whether ``value`` is of the type ``field_name`` takes: text, or a list of texts."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return True
    return (
        field_name in LIST_KEYS
        and isinstance(value, list)
        and all(isinstance(item, (str, int, float)) for item in value)
    )


def _refuse_unstorable(front: dict[str, Any], label: str) -> None:
    """Frontmatter keys or values that no store keeps as written are refused, named by
    the top-level field they are in: control characters (only YAML escapes such as
    ``"\\0"`` make them: PostgreSQL cannot store NUL, and none belongs in a field), and
    ``.nan`` / ``.inf``, which JSON has no number for (PostgreSQL refused them, SQLite
    kept them)."""
    pending: list[tuple[str, Any]] = [(key, key) for key in front]
    pending += list(front.items())
    while pending:
        key, value = pending.pop()
        if isinstance(value, dict):
            pending.extend((key, v) for item in value.items() for v in item)
        elif isinstance(value, list):
            pending.extend((key, v) for v in value)
        elif isinstance(value, str) and (match := CONTROL_CHARACTERS.search(value)):
            raise DocumentError(
                label,
                f"frontmatter field {clip(key, 40)!r} contains the control character "
                f"U+{ord(match.group()):04X}",
            )
        elif isinstance(value, float) and not math.isfinite(value):
            raise DocumentError(
                label,
                f"frontmatter field {clip(str(key), 40)!r} is {value}, which no store keeps "
                "as a number; quote it to keep it as text",
            )


class PageHeading(NamedTuple):
    """A heading that titles its page: how many ``#`` it has, and its words."""

    level: int
    text: str


def page_heading(body: str) -> PageHeading | None:
    """The heading that titles a page with no title of its own: its first, unless another
    of the same level or above, saying something else, follows it. Then the page is a list
    of sections (a FAQ of ``### 1. …`` questions, a guide of ``# 一、…`` chapters, a wiki
    page, whose title is its file's name) and its first section no title for all of them;
    the same heading again is the title written twice (RocketMQ's connector quick start:
    ``# 快速开始``, a badge, ``# 快速开始``). Only a ``#`` heading is the page's own title
    before its site's (``site_titles``): a lone ``##`` is often its first section.

    >>> page_heading("### 如何重启节点？\\n\\n先停写入。")
    PageHeading(level=3, text='如何重启节点？')
    >>> page_heading("## Q1\\n\\nA\\n\\n## Q2\\n\\nB") is None
    True
    >>> page_heading("# 快速开始\\n\\n![License](l.svg)\\n\\n# 快速开始\\n\\n## 1.准备")
    PageHeading(level=1, text='快速开始')
    """
    lines = body.split("\n")
    levels = [
        PageHeading(len(match.group("marks")), match.group("text"))
        for line, in_fence in zip(lines, fenced(lines), strict=True)
        if not in_fence and (match := ATX_HEADING.match(line))
    ]
    first = levels[0] if levels else None
    if first is None or any(
        heading.level <= first.level and heading.text != first.text for heading in levels[1:]
    ):
        return None
    return first


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """YAML gives dates and other non-JSON values; the store keeps their text form."""
    safe: dict[str, Any] = json.loads(json.dumps(value, ensure_ascii=False, default=str))
    return safe


def _str_field(front: dict[str, Any], key: str, label: str) -> str | None:
    value = front.get(key)
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value).strip() or None
    raise DocumentError(
        label, f"frontmatter field {key!r} must be text, got {type(value).__name__}"
    )


def _access_field(front: dict[str, Any], label: str) -> tuple[str, ...] | None:
    """The groups ``access`` names; a value that names none, or not as a list of group
    names, refuses the document (its earlier version, if any, stays as it was): read as
    "no list", a typo would open it to everyone."""
    if ACCESS_KEY not in front:
        return None
    try:
        return parse_access(front[ACCESS_KEY])
    except AccessListError as exc:
        raise DocumentError(label, f"frontmatter field 'access' {exc}") from None


def _list_field(front: dict[str, Any], key: str, label: str) -> tuple[str, ...]:
    value = front.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        items = [part for part in re.split(r"[,，;；]", value)]
    elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        items = [str(v) for v in value]
    else:
        raise DocumentError(label, f"frontmatter field {key!r} must be a list of texts")
    return tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
