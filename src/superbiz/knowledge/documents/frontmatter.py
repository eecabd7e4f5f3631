"""A document's YAML frontmatter, read so that nothing in it can make parsing unbounded:
aliases are sized before they are expanded, and a text field keeps what was written."""

from __future__ import annotations

from typing import Any

import yaml

from superbiz._text import clip
from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats.rst_includes import own_document

#: frontmatter fields that are text, and that are lists of texts
TEXT_KEYS = ("title", "category", "when_to_retrieve")
LIST_KEYS = ("covers", "tags", "aliases")
#: who may read the document (``superbiz.access``): a list of groups, checked on its own
ACCESS_KEY = "access"
#: the frontmatter keys a document may set; any other is kept in ``extra`` with a warning
FRONTMATTER_KEYS = (*TEXT_KEYS, *LIST_KEYS, ACCESS_KEY)
#: keys static-site generators (Hugo, Jekyll, Docusaurus, MkDocs) give a document, read as
#: the field they mean when it is unset and the value is of its type
SYNONYMS = {"description": "when_to_retrieve", "summary": "when_to_retrieve", "keywords": "tags"}
#: keys static-site generators give a page for its place and look on the site (Docusaurus,
#: Hugo and its Book and Relearn themes, Jekyll, MkDocs and Material's blog, Starlight,
#: VitePress): kept in ``extra``, named in no warning, and frontmatter on their own. A
#: Starlight page's ``sidebar:`` had been an "unknown key" on 39 of Nacos's 53 pages, a
#: Docusaurus page whose frontmatter holds only ``id`` and ``sidebar_position`` had been
#: read as text, and Grafana Loki's ``menuTitle`` was named on 36 of 37 pages.
SITE_KEYS = frozenset(
    """
    id slug sidebar sidebar_position sidebar_label sidebar_class_name sidebar_custom_props
    displayed_sidebar hide_title hide_table_of_contents toc_min_heading_level
    toc_max_heading_level pagination_label pagination_next pagination_prev custom_edit_url
    unlisted last_update draft weight type layout url permalink linktitle menu toc
    categories series date lastmod publishdate expirydate nav_order nav_exclude parent
    grand_parent has_children redirect_from hide template search status icon prev next
    outline aside editlink lastupdated pagefind tableofcontents head hero banner image
    author authors lang sidebar_order bookhidden booktoc bookcollapsesection bookflatsection
    bookcomments booksearchexclude bookhref readtime links social pin comments
    cascade headless iscjklanguage menus sitemap translationkey menutitle alwaysopen
    """.split()
)
#: frontmatter may expand through YAML aliases to at most this many characters, or
#: twice its own size when larger: enough for any real document, not for an alias bomb
FRONTMATTER_EXPANSION = 100_000
#: YAML 1.1 reads these plain scalars as non-text (``yes`` → True, ``no`` → False, dates…);
#: a text field keeps what was written instead
_TYPED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "timestamp")
)
_STR_TAG = "tag:yaml.org,2002:str"


def split_frontmatter(text: str, label: str = "<text>") -> tuple[dict[str, Any], str]:
    """``(frontmatter, body)``; a document without frontmatter has ``{}``. A ``---`` that
    no ``---`` closes and no setting follows is a rule opening the body (Traefik's shared
    notice: ``---``, a blank line, an admonition), not frontmatter left open.

    >>> split_frontmatter("---\\ntitle: A\\n---\\n# Body\\n")
    ({'title': 'A'}, '# Body\\n')
    >>> split_frontmatter("---\\n\\n!!! note\\n    Ask first.\\n")
    ({}, '---\\n\\n!!! note\\n    Ask first.\\n')
    """
    if not text.startswith("---\n") and text.strip() != "---":
        return {}, text
    lines = text.split("\n")
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        if text.strip() != "---" and not own_document(text):
            return {}, text
        raise DocumentError(label, "malformed frontmatter: no closing '---' line")
    raw = "\n".join(lines[1:end])
    try:
        front = _load_bounded(raw, label) if raw.strip() else {}
    except yaml.YAMLError as exc:
        raise DocumentError(label, f"malformed frontmatter: {_yaml_problem(exc)}") from exc
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise DocumentError(label, "malformed frontmatter: expected a mapping of keys")
    return {str(k): v for k, v in front.items()}, "\n".join(lines[end + 1 :])


#: libyaml's parser when PyYAML has it (the same nodes, parsed in C: the pure-Python
#: parser was 1.1 s of CPU for the dev corpus's 401 frontmatters)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_bounded(raw: str, label: str) -> Any:
    """``yaml.safe_load`` that sizes the composed node graph before constructing it:
    aliases share nodes, so a 400-byte alias bomb is a small graph that would expand
    to gigabytes; it is refused here, and so is an alias that contains itself."""
    loader = _SAFE_LOADER(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        limit = max(FRONTMATTER_EXPANSION, 2 * len(raw))
        try:
            size = _expanded_size(node, {}, limit, label)
        except RecursionError as exc:
            raise DocumentError(label, "malformed frontmatter: nested too deeply") from exc
        if size > limit:
            raise DocumentError(
                label,
                f"frontmatter refused: its YAML aliases expand it past {limit} characters",
            )
        _keep_text(node)
        try:
            return loader.construct_document(node)
        except (ValueError, OverflowError) as exc:  # 2024-02-30, a 5,000-digit number
            raise DocumentError(label, _unreadable(node, exc)) from exc
    except RecursionError as exc:
        raise DocumentError(label, "malformed frontmatter: nested too deeply") from exc
    finally:
        loader.dispose()


def _unreadable(node: yaml.Node, exc: Exception) -> str:
    """Why a frontmatter whose nodes parsed cannot be built, naming its top-level key and
    the value (YAML reads ``2024-02-30`` as a date, and a date it cannot be)."""
    if not isinstance(node, yaml.MappingNode):
        return "malformed frontmatter: expected a mapping of keys"
    for key, value in node.value:
        for part in (key, value):
            scalar = _first_unreadable(part, set())
            if scalar is not None:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                return (
                    f"frontmatter field {clip(name, 40)!r}: {_what(scalar, exc)}; "
                    "quote it to keep it as text"
                )
    return f"malformed frontmatter: {exc}"  # pragma: no cover - every failure is a scalar's


def _first_unreadable(node: yaml.Node, seen: set[int]) -> yaml.ScalarNode | None:
    """The first scalar under ``node`` that YAML's constructor refuses, if any."""
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        try:
            yaml.constructor.SafeConstructor().construct_object(node)
        except (ValueError, OverflowError):
            return node
        return None
    children = (
        [part for pair in node.value for part in pair]
        if isinstance(node, yaml.MappingNode)
        else node.value
    )
    for child in children:
        if (found := _first_unreadable(child, seen)) is not None:
            return found
    return None


def _what(scalar: yaml.ScalarNode, exc: Exception) -> str:
    if scalar.tag.endswith(":timestamp"):
        return f"{clip(scalar.value, 40)} is not a date ({exc})"
    if scalar.tag.endswith(":int"):
        return f"a number of {len(scalar.value)} characters is too long to read"
    return f"{clip(scalar.value, 40)} cannot be read ({exc})"


def _keep_text(node: yaml.Node) -> None:
    """Text fields (and the items of list fields) keep their scalars as written: YAML 1.1
    would make ``title: yes`` True and ``category: no`` the domain ``false``. A null
    stays null (the field is then unset)."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value.lower() not in FRONTMATTER_KEYS:
            continue
        items = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for item in items:
            if isinstance(item, yaml.ScalarNode) and item.tag in _TYPED_TAGS:
                item.tag = _STR_TAG


def _expanded_size(node: yaml.Node, sizes: dict[int, int], limit: int, label: str) -> int:
    """Characters and values ``node`` expands to, each shared node sized once; stops
    counting past ``limit``. ``sizes`` holds -1 while a node is being sized: meeting
    one again is an alias inside itself."""
    known = sizes.get(id(node))
    if known == -1:
        raise DocumentError(label, "frontmatter refused: a YAML alias refers to itself")
    if known is not None:
        return known
    sizes[id(node)] = -1
    if isinstance(node, yaml.ScalarNode):
        total = 1 + len(node.value)
    else:
        children = (
            [part for pair in node.value for part in pair]
            if isinstance(node, yaml.MappingNode)
            else node.value
        )
        total = 1
        for child in children:
            total += _expanded_size(child, sizes, limit, label)
            if total > limit:
                break
    sizes[id(node)] = total
    return total


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    return f"{problem} (line {mark.line + 2})" if mark is not None else str(problem)
