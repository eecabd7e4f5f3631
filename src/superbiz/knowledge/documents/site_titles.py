"""The titles a documentation site gives its pages outside them: MkDocs' ``nav``, and
the links of GitBook's and mdBook's ``SUMMARY.md`` and Docsify's ``_sidebar.md``.

An MkDocs site may keep each page's title only in ``mkdocs.yml`` (PagerDuty's
incident-response docs: 37 pages, not one with a title or a first heading of its own),
so read alone every page was titled by its file name ("call_etiquette"), which the
answer showed as its source and the title signal read ("call" in "on call"). A page
inside a site's ``docs_dir`` that gives itself no title (no ``title:`` in its
frontmatter, no ``#`` heading) takes its ``nav`` entry's, before a lone lower heading
(its first section, "## Responsibilities"). A page's own title wins: a nav's entries are
often short ("Overview") where the page says what it is.

The configuration is composed, never constructed: MkDocs files carry tags no safe loader
knows (``!ENV``, ``!!python/name:…``), and only ``docs_dir`` and ``nav`` are read, each
node once. The other generators list their pages as Markdown links, titled by the link's
text: ``* [值班手册](oncall/handbook.md)``; only a file that is a list of links
(``is_navigation``, the test that skips it as a document) is read so. A file that cannot be
read or parsed gives no titles, never an error: the pages are read as before.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from urllib.parse import unquote

import yaml

from superbiz.retrieval.passages import is_navigation

#: the names MkDocs looks for, in its order
CONFIG_NAMES = ("mkdocs.yml", "mkdocs.yaml")
#: the files that list a site's pages as links: GitBook's and mdBook's table of contents,
#: Docsify's sidebar (its ``_navbar.md`` links sections, not pages)
NAVIGATION_NAMES = ("SUMMARY.md", "_sidebar.md")
#: every file whose change may retitle a site's pages
SITE_FILES = (*CONFIG_NAMES, *NAVIGATION_NAMES)
#: a site's configuration or navigation larger than this is none (it is read whole)
CONFIG_MAX_BYTES = 1_000_000
#: the most ``nav`` entries read: far beyond any site, and a bound on a hostile file
NAV_ENTRIES_MAX = 100_000
#: how far above the ingested folder a site's configuration is looked for (``docs/``
#: ingested alone has it one level up)
LEVELS_ABOVE_ROOT = 2
#: how far above a navigation file the page a link names is looked for: Docsify reads a
#: nested sidebar's links (``zh/_sidebar.md``: ``[指南](zh/guide.md)``) from the site's root
LINK_LEVELS_UP = 3
#: libyaml's composer when PyYAML has it
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: a navigation file's link, alone on its line or as a list item (mdBook's prefix
#: chapters have no marker): its text, and its target up to a title in quotes; possessive,
#: so that a line of a megabyte of spaces is read once, not tried at every split
_LINK_LINE = re.compile(
    r"^[ \t]*+(?:(?:[-*+]|\d++[.)])[ \t]++)?\[(?P<title>[^\]]++)\]"
    r"\(\s*+(?:<(?P<angled>[^>\n]*+)>|(?P<target>[^\s)>]*+))(?:\s[^)]*+)?\)"
)
#: a link text's inline marks: emphasis, code
_MARKS = re.compile(r"\*\*|__|[*`]")


def nav_titles(config: str) -> tuple[str, dict[str, str]]:
    """``(docs_dir, titles)`` of an ``mkdocs.yml``'s text: each page's path in ``nav``
    (relative to ``docs_dir``) and the title ``nav`` gives it; a page listed without a
    title, or a link out of the site, has none. Text that is no YAML raises ``ValueError``
    saying where.

    >>> docs_dir, titles = nav_titles('''
    ... site_name: Ops
    ... markdown_extensions:
    ...   - pymdownx.emoji:
    ...       emoji_index: !!python/name:material.extensions.emoji.twemoji
    ... extra: {analytics: !ENV GOOGLE_ANALYTICS_KEY}
    ... nav:
    ...   - Home: index.md
    ...   - On-Call:
    ...     - Being On-Call: 'oncall/being_oncall.md'
    ...     - oncall/untitled.md
    ...     - Status page: https://status.example.com
    ... ''')
    >>> docs_dir, titles
    ('docs', {'index.md': 'Home', 'oncall/being_oncall.md': 'Being On-Call'})
    """
    docs_dir, nav = "docs", None
    try:
        root = yaml.compose(config, Loader=_SAFE_LOADER)
        if isinstance(root, yaml.MappingNode):
            for key, value in root.value:
                if not isinstance(key, yaml.ScalarNode):
                    continue
                if key.value == "docs_dir" and isinstance(value, yaml.ScalarNode):
                    docs_dir = value.value.strip() or docs_dir
                elif key.value == "nav":
                    nav = value
        entries = list(islice(_entries(nav, set()), NAV_ENTRIES_MAX))
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise ValueError(f"not YAML: {exc.problem or exc.context}{where}") from exc
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValueError(
            "not YAML" if isinstance(exc, yaml.YAMLError) else "nested too deeply"
        ) from exc
    titles: dict[str, str] = {}
    for title, page in entries:
        page = page.strip()
        if "://" in page or not page.lower().endswith((".md", ".markdown")):
            continue
        path = posixpath.normpath(page.lstrip("/"))
        if path != ".." and not path.startswith("../"):
            titles.setdefault(path, " ".join(title.split()))
    return docs_dir, titles


def _entries(node: yaml.Node | None, seen: set[int]) -> Iterator[tuple[str, str]]:
    """``(title, page)`` of each titled page under a ``nav`` node, each node read once
    (aliases share nodes: a nav of aliases is no larger than its text)."""
    if node is None or id(node) in seen or len(seen) > NAV_ENTRIES_MAX:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _entries(item, seen)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if isinstance(value, yaml.ScalarNode):
                if key.value.strip() and value.value:
                    yield key.value, value.value
            else:
                yield from _entries(value, seen)


def link_titles(text: str) -> dict[str, str]:
    """Each page a navigation file's ``text`` links, as its link names it (``/`` first: from
    the site's root), with the link's text: a link to a folder names its ``README.md``, one
    without a suffix its ``.md`` (Docsify's), an anchor or a query is dropped; a link out
    of the site, to no page (mdBook's draft chapter) or to no Markdown names none.

    >>> link_titles('''# Summary
    ... [Introduction](README.md)
    ... - [**On-call**](<oncall/hand book.md> "the handbook")
    ...   - [升级流程](/zh/escalation?id=steps)
    ...   - [Alerts](alerts/)
    ... - [Draft]()
    ... * [Status](https://status.example.com)
    ... ''')  # doctest: +NORMALIZE_WHITESPACE
    {'README.md': 'Introduction', 'oncall/hand book.md': 'On-call',
     '/zh/escalation.md': '升级流程', 'alerts/README.md': 'Alerts'}
    """
    titles: dict[str, str] = {}
    for line in islice(text.splitlines(), NAV_ENTRIES_MAX):
        match = _LINK_LINE.match(line)
        if match is None or (page := _page(match["angled"] or match["target"])) is None:
            continue
        title = " ".join(_MARKS.sub("", match.group("title")).split())
        if title:
            titles.setdefault(page, title)
    return titles


def _page(target: str) -> str | None:
    """The Markdown page a navigation link's ``target`` names, normalised, if any."""
    target = unquote(target.split("#", 1)[0].split("?", 1)[0]).strip()
    if not target or "://" in target or target.startswith(("mailto:", "//")):
        return None
    if target.endswith("/"):
        target += "README.md"
    suffix = posixpath.splitext(target)[1].lower()
    if not suffix:
        target += ".md"
    elif suffix not in (".md", ".markdown"):
        return None
    rooted = target.startswith("/")
    path = posixpath.normpath(target.lstrip("/"))
    return f"/{path}" if rooted else path


@dataclass(frozen=True, slots=True)
class Site:
    """One documentation site's titles: each page's resolved path, and its title."""

    titles: dict[Path, str]

    def title(self, file: Path) -> str | None:
        """The title the site gives ``file`` (a resolved path), if it lists it."""
        return self.titles.get(file)


@dataclass(slots=True)
class SiteTitles:
    """The sites found above the files of one ingest, each folder asked once: a file's
    title is that of the nearest site whose ``docs_dir`` holds it. A configuration that
    cannot be read is said once in ``problems`` (the ingest's notes).

    >>> SiteTitles().title(Path("/nowhere/docs/a.md"), Path("/nowhere")) is None
    True
    """

    _sites: dict[Path, Site | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def title(self, file: Path, root: Path) -> str | None:
        """The title a site gives ``file`` under ``root`` (both resolved: the caller has
        resolved them, and a resolve per file is a walk of its path), if any."""
        for folder in _folders(file, root):
            site = self._site(folder)
            if site is not None and (title := site.title(file)):
                return title
        return None

    def _site(self, folder: Path) -> Site | None:
        if folder not in self._sites:
            try:
                self._sites[folder] = _read_site(folder) or _read_navigation(folder)
            except _Unread as exc:
                self._sites[folder] = None
                self.problems.append(unread(str(exc.config), exc.reason))
        return self._sites[folder]


def unread(config: str, reason: str) -> str:
    """What an ingest's notes say of a site's file (``config``, its path) it could not read.

    >>> unread("/repo/mkdocs.yml", "not UTF-8 text").split("; ")[0]
    '/repo/mkdocs.yml: not read as a MkDocs site (not UTF-8 text)'
    """
    what = "a MkDocs site" if posixpath.basename(config) in CONFIG_NAMES else "a site's pages"
    return f"{config}: not read as {what} ({reason}); its pages are titled as if it were not there"


class _Unread(Exception):
    """A site's configuration or navigation that is there and cannot be read, and why."""

    def __init__(self, config: Path, reason: str) -> None:
        super().__init__(f"{config}: {reason}")
        self.config, self.reason = config, reason


def _folders(file: Path, root: Path) -> Iterator[Path]:
    """The folders from ``file``'s own up to ``root``, then ``LEVELS_ABOVE_ROOT`` more."""
    folder = file.parent
    while folder.is_relative_to(root) and folder != root:
        yield folder
        folder = folder.parent
    yield root
    yield from list(root.parents)[:LEVELS_ABOVE_ROOT]


def docs_dir_of(folder: Path) -> str | None:
    """The ``docs_dir`` of the MkDocs site configured in ``folder``, as written; None
    without a configuration there, or with one that cannot be read.

    >>> import tempfile; folder = Path(tempfile.mkdtemp())
    >>> docs_dir_of(folder) is None
    True
    >>> _ = (folder / "mkdocs.yml").write_text("docs_dir: content\\n")
    >>> docs_dir_of(folder)
    'content'
    """
    try:
        return next((docs_dir for _, docs_dir, _ in _configs(folder)), None)
    except _Unread:
        return None


def _configs(folder: Path) -> Iterator[tuple[Path, str, dict[str, str]]]:
    """Each MkDocs configuration in ``folder``, in MkDocs' order, with its ``docs_dir`` and
    ``nav`` titles; one that is there and cannot be read (too large, unreadable, not text
    or not YAML) raises ``_Unread``."""
    for name in CONFIG_NAMES:
        config = folder / name
        if (text := _text(config)) is None:
            continue
        try:
            docs_dir, titles = nav_titles(text)
        except ValueError as exc:
            raise _Unread(config, str(exc)) from exc
        yield config, docs_dir, titles


def _read_site(folder: Path) -> Site | None:
    """The site configured in ``folder``, if it holds an MkDocs configuration with titles
    in its ``nav``; one that is there and cannot be read (``_configs``, or a ``docs_dir``
    no path can be) raises ``_Unread``."""
    for config, docs_dir, titles in _configs(folder):
        try:
            where = (folder / docs_dir).resolve()
        except OSError as exc:
            raise _Unread(config, exc.strerror or str(exc)) from exc
        except (ValueError, RuntimeError) as exc:  # a NUL in docs_dir, a loop
            raise _Unread(config, str(exc)) from exc
        if titles:
            return Site({where.joinpath(page): title for page, title in titles.items()})
    return None


def _read_navigation(folder: Path) -> Site | None:
    """The site whose navigation file ``folder`` holds, if it is a list of links naming
    pages that are there; each page looked for from ``folder`` up (``LINK_LEVELS_UP``)."""
    for name in NAVIGATION_NAMES:
        navigation = folder / name
        if (text := _text(navigation)) is None or not is_navigation(text):
            continue
        bases = [folder, *list(folder.parents)[:LINK_LEVELS_UP]]
        titles: dict[Path, str] = {}
        for page, title in link_titles(text).items():
            found = (Path(os.path.normpath(base / page.lstrip("/"))) for base in bases)
            if (file := next((file for file in found if file.is_file()), None)) is not None:
                titles.setdefault(file, title)
        if titles:
            return Site(titles)
    return None


def _text(file: Path) -> str | None:
    """The text of a site's file in a folder, None where there is none; one that is there
    and cannot be read (too large, unreadable, not UTF-8) raises ``_Unread``."""
    try:
        if not file.is_file():
            return None
        if (size := file.stat().st_size) > CONFIG_MAX_BYTES:
            raise _Unread(file, f"{size} bytes, over {CONFIG_MAX_BYTES}")
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _Unread(file, "not UTF-8 text") from exc
    except OSError as exc:
        raise _Unread(file, exc.strerror or str(exc)) from exc
