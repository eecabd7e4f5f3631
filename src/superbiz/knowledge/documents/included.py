"""A page read with the fragments it includes from the knowledge base's folder.

reStructuredText (``.. include::``), AsciiDoc (``include::``) and MkDocs' Markdown
(``--8<-- "file"``) pages pull shared text from other files (``formats.rst_includes``,
``formats.adoc_includes``, ``formats.md_snippets``); the page's text, and
with it the hash it is stored under, then holds them, so a changed fragment reads its pages
again. An Antora site's pages also read the attributes their component sets
(``site_attributes``), written above the page the same way. Other formats include nothing
and are returned as they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from os.path import relpath
from pathlib import Path, PurePosixPath

import yaml

from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.domains import may_write_in
from superbiz.knowledge.documents.site_titles import CONFIG_NAMES, SITE_FILES, docs_dir_of
from superbiz.knowledge.formats import (
    ASCIIDOC_EXTENSIONS,
    adoc_includes,
    md_includes,
    md_snippets,
    rst_includes,
)
from superbiz.knowledge.formats.decode import decode
from superbiz.knowledge.formats.rst_includes import inside_folder

#: pages that include other files when they are read
_INCLUDING = (".rst", *ASCIIDOC_EXTENSIONS)


def includes_others(page: PurePosixPath) -> bool:
    """Whether the file at ``page`` is a page that may include others as it is read
    (Markdown may too, in a MkDocs site: ``tree_includes_others``).

    >>> includes_others(PurePosixPath("modules/ROOT/pages/backup.adoc"))
    True
    >>> includes_others(PurePosixPath("runbooks/disk.md"))
    False
    """
    return page.suffix.lower() in _INCLUDING


def tree_includes_others(paths: Iterable[PurePosixPath]) -> bool:
    """Whether a tree of files at ``paths`` holds a page that may include others, or be
    read otherwise by what another file says: a reStructuredText or AsciiDoc page, a
    MkDocs site (its Markdown's snippets, its ``nav``'s titles) or a site that titles its
    pages in a navigation file (``SUMMARY.md``, ``_sidebar.md``).

    >>> tree_includes_others([PurePosixPath("mkdocs.yaml"), PurePosixPath("docs/a.md")])
    True
    >>> tree_includes_others([PurePosixPath("runbooks/disk.md")])
    False
    """
    return any(includes_others(path) or path.name in SITE_FILES for path in paths)


def with_fragments(
    data: bytes,
    page: PurePosixPath,
    base: Path,
    encodings: Sequence[str],
    max_bytes: int,
    domain_access: Mapping[str, Sequence[str]] | None = None,
) -> bytes:
    """``data``, the page at ``page`` under the folder ``base``, with the fragments it
    includes from that folder written in, as UTF-8. A fragment outside ``base`` (through a
    symlink too), missing, larger than ``max_bytes`` or unreadable is left out, as docutils,
    Asciidoctor and MkDocs leave it, and so is one in a domain that some reader of the page may
    not read (``domains.may_write_in`` by ``domain_access``, the configured
    ``access.domains``); a page that does not decode is returned as it is, for its own
    reading to say why."""
    suffix = page.suffix.lower()
    if suffix == ".rst":
        expand = rst_includes.with_includes
    elif suffix in ASCIIDOC_EXTENSIONS:
        expand = adoc_includes.with_includes
    elif suffix in md_snippets.PAGES and (b"8<-" in data or b"{%" in data):
        bases = snippet_bases(page, base)
        docs_dir = site_docs_dir(page, base) if b"{%" in data else None
        expand = partial(_with_snippets, bases=bases, docs_dir=docs_dir)
    else:
        return data
    try:
        text = decode(data, str(page), encodings)
    except DocumentError:
        return data
    attributes = site_attributes(page, base) if suffix in ASCIIDOC_EXTENSIONS else ""

    @functools.cache  # a page may name one fragment many times: read once
    def read(path: PurePosixPath) -> str | None:
        try:
            real = (base / path).resolve(strict=True)
            if not real.is_relative_to(base) or not real.is_file():
                return None
            where = PurePosixPath(real.relative_to(base).as_posix())
            if domain_access and not may_write_in(where, page, domain_access):
                return None
            if real.stat().st_size > max_bytes:
                return None
            return decode(real.read_bytes(), str(path), encodings)
        except (OSError, RuntimeError, DocumentError):
            return None

    expanded = expand(attributes + text, page, read, max_bytes)
    return data if expanded == text else expanded.encode()


def _with_snippets(
    text: str,
    page: PurePosixPath,
    read: Callable[[PurePosixPath], str | None],
    limit: int,
    *,
    bases: Sequence[str],
    docs_dir: PurePosixPath | None,
) -> str:
    """A MkDocs page with its snippets (``--8<--``) and its ``include-markdown``
    plugin's directives written in."""
    if "8<-" in text:
        text = md_snippets.with_snippets(text, bases, read, limit, (page,))
    if "{%" not in text:
        return text
    return md_includes.with_includes(text, page, read, limit, docs_dir)


def snippet_bases(page: PurePosixPath, base: Path) -> list[str]:
    """Where a MkDocs page's snippets are looked for, relative to the knowledge base's
    folder ``base``: the folder of the nearest ``mkdocs.yml`` above the page (where
    ``mkdocs`` runs, the extension's base path), then the knowledge base's folder.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> (root / "site" / "docs").mkdir(parents=True)
    >>> _ = (root / "site" / "mkdocs.yml").write_text("")
    >>> snippet_bases(PurePosixPath("site/docs/ops/disk.md"), root)
    ['site', '']
    """
    bases = [
        folder.as_posix()
        for folder in page.parents
        if folder != PurePosixPath(".")
        and any((base / folder / name).is_file() for name in CONFIG_NAMES)
    ][:1]
    return [*bases, ""]


def site_docs_dir(page: PurePosixPath, base: Path) -> PurePosixPath | None:
    """The folder a MkDocs page's site keeps its pages in (``docs_dir``), relative to the
    knowledge base's folder ``base``: that of the nearest ``mkdocs.yml`` above the page;
    None without one, or with one that cannot be read (``site_titles`` says why).

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> (root / "proxy" / "content").mkdir(parents=True)
    >>> _ = (root / "proxy" / "mkdocs.yml").write_text("docs_dir: content\\n")
    >>> site_docs_dir(PurePosixPath("proxy/content/ops/run.md"), root)
    PurePosixPath('proxy/content')
    >>> _ = (root / "mkdocs.yml").write_text("site_name: Ops\\n")  # at the top: docs/
    >>> site_docs_dir(PurePosixPath("docs/run.md"), root)
    PurePosixPath('docs')
    """
    for folder in page.parents:  # the knowledge base's folder itself too
        if any((base / folder / name).is_file() for name in CONFIG_NAMES):
            docs_dir = docs_dir_of(base / folder)
            return None if docs_dir is None else inside_folder(f"{folder}/{docs_dir}")
    return None


#: the largest component descriptor read (Debezium's is 4 KB)
_DESCRIPTOR_BYTES = 1_000_000
_ATTRIBUTE_NAME = re.compile(r"^\w[\w-]*$")


def site_attributes(page: PurePosixPath, base: Path) -> str:
    """The attribute entries an Antora component gives every page of it, as AsciiDoc
    lines to stand above the page: those Antora sets itself, the folders of the page's
    module (``:partialsdir: ../../partials``, which Debezium's guides include from), then
    the ``asciidoc.attributes`` of the ``antora.yml`` beside the component's ``modules/``
    folder, inside ``base`` (``:full-version: 6.0.0``, ``:product!:`` for one it unsets).
    Empty for a page of no such component, or whose descriptor is missing, too large or
    not YAML (the page is read without them).

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> _ = (root / "antora.yml").write_text("name: ops\\n")
    >>> print(site_attributes(PurePosixPath("modules/ROOT/pages/db/backup.adoc"), root), end="")
    :partialsdir: ../../partials
    :examplesdir: ../../examples
    :imagesdir: ../../images
    :attachmentsdir: ../../attachments
    """
    parts = page.parts
    if "modules" not in parts[:-2]:
        return ""
    at = parts.index("modules")
    descriptor = base.joinpath(*parts[:at], "antora.yml")
    try:
        real = descriptor.resolve(strict=True)
        stat = real.stat()
    except (OSError, RuntimeError):
        return ""
    if not real.is_relative_to(base.resolve()) or stat.st_size > _DESCRIPTOR_BYTES:
        return ""
    module = PurePosixPath(*parts[: at + 2])
    folders = "".join(
        f":{family}dir: {relpath(module / family, page.parent)}\n"
        for family in ("partials", "examples", "images", "attachments")
    )
    return folders + _descriptor_entries(str(real), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _descriptor_entries(path: str, mtime_ns: int, size: int) -> str:
    """A descriptor's attributes as entry lines, read once per version of the file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    asciidoc = data.get("asciidoc") if isinstance(data, dict) else None
    attributes = asciidoc.get("attributes") if isinstance(asciidoc, dict) else None
    if not isinstance(attributes, dict):
        return ""
    lines = []
    for name, value in attributes.items():
        if not isinstance(name, str) or not _ATTRIBUTE_NAME.match(name):
            continue
        if value is False or value is None:
            lines.append(f":{name}!:")
        elif value is True:
            lines.append(f":{name}:")
        else:  # a trailing @ lets a page override it, as it may anyway here
            lines.append(f":{name}: {' '.join(str(value).split()).removesuffix('@')}")
    return "".join(f"{line}\n" for line in lines)
