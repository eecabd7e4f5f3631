"""HTML pages (wiki and static-site exports) to Markdown, with lxml.

The page is parsed, never rendered: scripts, styles, forms, embedded frames and event
handlers are dropped before anything is read, links keep only their text (a
``javascript:`` URL is never stored), and markup written as text in the page
(``&lt;script&gt;``) stays text. Page chrome (navigation, banners, footers, side bars,
a wiki's table of contents and edit links) is left out; the article is the page's
``<main>`` or ``<article>``, or a wiki's content element, or else the whole body.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import lxml.etree
import lxml.html

from superbiz.exceptions import DocumentError
from superbiz.knowledge.formats import ConvertedDocument
from superbiz.knowledge.formats._markdown import fence, heading, inline, join_blocks, quoted, table
from superbiz.knowledge.formats._sniff import binary_kind
from superbiz.knowledge.formats.decode import decode

#: elements whose content is never text of the article
_DROPPED = (
    "script style noscript template iframe frame frameset object embed applet svg math "
    "canvas audio video map form button input select textarea option nav aside dialog "
    "header footer link meta base head"
).split()
#: ARIA roles of page chrome
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
#: classes and ids wiki and site generators give their chrome
_CHROME_NAMES = frozenset(
    "toc mw-editsection navbox catlinks printfooter mw-jump-link breadcrumbs breadcrumb "
    "sidebar site-nav skip-link footer-nav page-metadata".split()
)
#: where the article is, most specific first (wiki exports, then HTML5 landmarks)
_ARTICLE = (
    "//*[@id='mw-content-text']",  # MediaWiki
    "//*[@id='main-content']",  # Confluence
    "//main",
    "//*[@role='main']",
    "//article",
    "//*[@id='content']",
)
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset(
    "p div section article main body h1 h2 h3 h4 h5 h6 pre ul ol li table blockquote dl dt dd "
    "hr figure figcaption details summary address center".split()
)
_STRONG = frozenset({"strong", "b"})
_EMPHASIS = frozenset({"em", "i"})
_CODE = frozenset({"code", "kbd", "samp", "tt"})
_LANGUAGE = re.compile(r"(?:language-|lang-|sourceCode\s+)([\w+#.-]+)")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_BREAK = "\u2028"  # a <br> inside inline text, kept through white-space collapsing
#: deeper nesting than this is read as plain text (a page cannot exhaust the stack)
_MAX_DEPTH = 60


def convert_html(data: bytes, label: str, encodings: Sequence[str]) -> ConvertedDocument:
    """Title and Markdown of an HTML page."""
    kind = binary_kind(data)
    if kind:
        raise DocumentError(label, f"the extension lies: its content is {kind}, not HTML")
    # huge_tree: libxml2 otherwise stops reading at 256 levels of nesting and drops the
    # rest of the page; with it, 2,048 (the walk below reads deep content as plain text)
    parser = lxml.html.HTMLParser(
        remove_comments=True, remove_pis=True, no_network=True, huge_tree=True
    )
    try:
        text = _XML_DECLARATION.sub("", decode(data, label, encodings), count=1)
        root = lxml.html.document_fromstring(text, parser=parser)
    except DocumentError:
        # not in the configured encodings: let the page's own <meta charset> decide
        root = _parse_bytes(data, label, parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise DocumentError(label, f"not an HTML page: {exc}") from exc
    title = _title(root)
    _drop_chrome(root)
    article = _article(root)
    title = _own_name(article, title)
    body = join_blocks(_blocks(article, 0))
    return ConvertedDocument(title=title, markdown=body)


def _parse_bytes(data: bytes, label: str, parser: lxml.html.HTMLParser) -> lxml.html.HtmlElement:
    try:
        return lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise DocumentError(label, f"not an HTML page: {exc}") from exc


def _own_name(article: lxml.html.HtmlElement, title: str | None) -> str | None:
    """The page's name: its article's first heading where the ``<title>`` only adds the
    site's name to it, whatever its case or level (mdBook titles a page "What is
    Ownership? - The Rust Programming Language" and heads it with an ``<h2>`` "What Is
    Ownership?") or its first ``<h1>`` likewise; the first ``<h1>`` of a page without a
    title; else the title."""
    h1 = article.find(".//h1")
    if not title:
        return (inline(h1.text_content()) or None) if h1 is not None else None
    for element in (next(article.iter(*_HEADINGS), None), h1):
        name = inline(element.text_content()) if element is not None else ""
        if name and name.casefold() in title.casefold():
            return name
    return title


def _title(root: lxml.html.HtmlElement) -> str | None:
    found = root.find(".//title")
    return inline(found.text_content()) or None if found is not None else None


def _drop_chrome(root: lxml.html.HtmlElement) -> None:
    doomed = [el for el in root.iter(*_DROPPED) if el is not root]
    for el in root.iter(lxml.etree.Element):
        attrib = el.attrib
        if el.tag not in _DROPPED and (
            attrib.get("role", "").lower() in _CHROME_ROLES
            or "hidden" in attrib
            or attrib.get("aria-hidden", "").lower() == "true"
            or attrib.get("id", "") in _CHROME_NAMES
            or not _CHROME_NAMES.isdisjoint(attrib.get("class", "").split())
            or _permalink(el)
        ):
            doomed.append(el)
    for el in doomed:
        parent = el.getparent()
        if parent is None:
            continue
        # the tail (text after the element) belongs to the parent, not to the chrome
        if el.tail:
            previous = el.getprevious()
            if previous is not None:
                previous.tail = (previous.tail or "") + el.tail
            else:
                parent.text = (parent.text or "") + el.tail
        parent.remove(el)


def _permalink(el: lxml.html.HtmlElement) -> bool:
    """A link to a place in the page shown as a mark, not words: a heading's link to itself
    ("#" in Node.js's documentation, "¶" in Sphinx's, which also marks each option it
    describes), a "↑" back to the top. "## C++ addons#" was a heading, a page's title missed
    its heading, and CMake's options read "-j [<jobs>], --parallel¶"."""
    return (
        el.tag == "a"
        and el.attrib.get("href", "").startswith("#")
        and not any(ch.isalnum() for ch in el.text_content())
    )


def _article(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    for path in _ARTICLE:
        found = root.xpath(path)
        if len(found) == 1:
            element: lxml.html.HtmlElement = found[0]
            return element
    body = root.find("body")
    return body if body is not None else root


def _blocks(el: lxml.html.HtmlElement, depth: int) -> list[str]:
    """The Markdown blocks of a block container, in order."""
    if depth > _MAX_DEPTH:
        return [inline(el.text_content())]
    blocks: list[str] = []
    words: list[str] = [el.text or ""]

    def flush() -> None:
        text = _collapse("".join(words))
        if text:
            blocks.append(text)
        words.clear()

    for child in el:
        if not isinstance(child.tag, str):
            words.append(child.tail or "")
            continue
        if child.tag in _BLOCKS:
            flush()
            blocks.extend(_block(child, depth + 1))
        else:
            words.append(_inline(child, depth + 1))
        words.append(child.tail or "")
    flush()
    return blocks


def _block(el: lxml.html.HtmlElement, depth: int) -> list[str]:
    tag = el.tag
    if tag in _HEADINGS:
        return [heading(_HEADINGS[tag], _collapse(_inline_content(el, depth)))]
    if tag == "pre":
        return [fence(_pre_text(el), _language(el))]
    if tag in ("ul", "ol"):
        return [_list(el, depth)]
    if tag == "table":
        return [table(_rows(el))]
    if tag == "blockquote":
        inner = "\n\n".join(_blocks(el, depth))
        return ["\n".join(quoted(inner.split("\n")))] if inner else []
    if tag == "hr":
        return []
    return _blocks(el, depth)


def _list(el: lxml.html.HtmlElement, depth: int) -> str:
    lines: list[str] = []
    ordered = el.tag == "ol"
    number = 0
    for item in el:
        if not isinstance(item.tag, str):
            continue
        if item.tag != "li":  # stray content inside a list
            lines.extend(_blocks(item, depth + 1))
            continue
        number += 1
        marker = f"{number}. " if ordered else "- "
        inner = "\n".join(_blocks(item, depth + 1)).split("\n")
        lines.append(marker + inner[0])
        lines.extend(" " * len(marker) + line if line else "" for line in inner[1:])
    return "\n".join(lines)


def _rows(el: lxml.html.HtmlElement) -> list[list[str]]:
    rows = []
    for row in el.iter("tr"):
        # rows of a table nested in a cell are read as that cell's text
        owner = next(row.iterancestors("table"), None)
        if owner is not el:
            continue
        cells = [c for c in row if isinstance(c.tag, str) and c.tag in ("td", "th")]
        rows.append([inline(_collapse(_inline_content(c, 0))) for c in cells])
    return rows


def _inline_content(el: lxml.html.HtmlElement, depth: int) -> str:
    parts = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str):
            parts.append(_inline(child, depth + 1))
            if child.tag in _BLOCKS:
                parts.append(" ")
        parts.append(child.tail or "")
    return "".join(parts)


def _inline(el: lxml.html.HtmlElement, depth: int) -> str:
    tag = el.tag
    if tag == "br":
        return _BREAK
    if tag == "img":
        return str(el.get("alt", ""))
    if depth > _MAX_DEPTH:
        return str(el.text_content())
    text = _inline_content(el, depth)
    if tag in _CODE:
        return _code_span(el.text_content())
    if tag in _STRONG and text.strip():
        return f"**{text.strip()}**"
    if tag in _EMPHASIS and text.strip():
        return f"*{text.strip()}*"
    return text  # a link is its text: the URL (javascript: or not) is not kept


def _code_span(code: str) -> str:
    code = " ".join(code.split())
    if not code:
        return ""
    ticks = "``" if "`" in code else "`"
    return f"{ticks}{code}{ticks}"


def _pre_text(el: lxml.html.HtmlElement) -> str:
    """A ``<pre>``'s code. Several ``<code>`` in one (Node.js's documentation shows an
    example as ES module and as CommonJS, one over the other) are separate programs: a
    blank line between them, not "processLineByLine();const { createReadStream } …". A
    line break just after ``<pre>`` is not shown (HTML drops it; DocBook's manuals, such
    as Valgrind's, write every listing so), and a quote began with an empty line."""
    codes = [child for child in el if child.tag == "code"]
    if len(codes) < 2 or (el.text or "").strip() or any((c.tail or "").strip() for c in codes):
        text, first = str(el.text_content()), el.text or ""
        return text[2:] if first.startswith("\r\n") else text[first.startswith("\n") :]
    return "\n\n".join(str(code.text_content()).strip("\n") for code in codes)


def _language(el: lxml.html.HtmlElement) -> str:
    classes = " ".join([el.get("class", ""), *(c.get("class", "") for c in el.iter("code"))])
    match = _LANGUAGE.search(classes)
    return match.group(1) if match else ""


def _collapse(text: str) -> str:
    """HTML white space: runs become one space; ``<br>`` stays a line break."""
    lines = (" ".join(part.split()) for part in text.split(_BREAK))
    return "\n".join(lines).strip()
