"""What AsciiDoc does to a page's lines before its blocks are read, and to the text inside
them: attribute entries and references (``:product: Kafka`` … ``{product}``), conditional
content (``ifdef::`` … ``endif::[]``), and inline markup read as a person reads it
(``link:url[text]`` is its text, ``<<id,text>>`` too, ``*bold*`` bold, ``kbd:[Ctrl+C]`` the
keys). Asciidoctor's own rules, as far as a reader's text needs them; nothing is fetched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from superbiz.knowledge.formats._roles import code_span

#: an attribute entry: ``:name: value``, ``:name!:`` (unset), a value going on after `` \``
_ENTRY = re.compile(r"^:(?P<unset>!)?(?P<name>[\w][\w-]*)(?P<unset2>!)?:(?:[ \t]+(?P<value>.*))?$")
#: a preprocessor conditional: ``ifdef::a,b[]``, ``ifndef::a+b[text]``, ``ifeval::[…]``
_CONDITIONAL = re.compile(
    r"^(?P<kind>ifdef|ifndef|ifeval|endif)::(?P<names>[^\[\s]*)\[(?P<text>.*)\][ \t]*$"
)
#: an ``include::`` directive (its target is another file: not read here)
INCLUDE = re.compile(r"^include::\S*\[.*\][ \t]*$")
#: a comment line (not a comment block's ``////``)
_LINE_COMMENT = re.compile(r"^//(?!//)")
#: where an included region starts or ends (``tag::name[]``, ``end::name[]``)
_TAG_MARKER = re.compile(r"^(?:tag|end)::[\w-]+\[\][ \t]*$")
#: verbatim blocks, inside which nothing is an attribute entry
_VERBATIM = re.compile(r"^(-{4,}|\.{4,}|\+{4,}|/{4,}|`{3})")
_REFERENCE = re.compile(r"(?<!\\)\{(?P<name>[\w][\w-]*)\}")
#: the attributes every document has (Asciidoctor's character replacements)
BUILT_IN: dict[str, str] = {
    "nbsp": " ", "sp": " ", "empty": "", "zwsp": "", "blank": "", "amp": "&", "lt": "<",
    "gt": ">", "plus": "+", "startsb": "[", "endsb": "]", "vbar": "|", "caret": "^",
    "asterisk": "*", "tilde": "~", "apostrophe": "'", "backslash": "\\", "backtick": "`",
    "two-colons": "::", "two-semicolons": ";;", "cpp": "C++", "pp": "++", "deg": "°",
    "quot": '"', "ldquo": "\u201c", "rdquo": "\u201d", "lsquo": "\u2018", "rsquo": "\u2019",
    "brvbar": "\u00a6", "wj": "",
}  # fmt: skip


def preprocessed(lines: list[str], attributes: dict[str, str]) -> list[str]:
    """``lines`` with conditional content decided, attribute entries taken into
    ``attributes`` (and out of the text), comment lines, ``include::`` lines and include
    tag markers left out; a verbatim block's lines are kept as written but for its conditionals, as
    Asciidoctor keeps them. A condition on an attribute the page neither sets nor unsets
    (``ifdef::community[]``, set by a site's build) keeps its content: which build reads
    the page is not known here, and a knowledge base loses less by holding both variants
    than by holding neither.

    >>> attributes: dict[str, str] = {}
    >>> preprocessed([":tool: kubectl", "ifdef::tool[Use {tool}.]", "ifndef::tool[]", "No.",
    ...               "endif::[]", "ifdef::product[]", "Call support.", "endif::[]"], attributes)
    ['Use {tool}.', 'Call support.']
    """
    out: list[str] = []
    shown: list[bool] = []  # one per open conditional
    unset: set[str] = set()  # attributes the page unsets: known, as a set one is
    verbatim: str | None = None
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        conditional = _CONDITIONAL.match(line)
        if conditional:
            kind, text = conditional["kind"], conditional["text"]
            if kind == "endif":
                if shown:
                    shown.pop()
                continue
            holds = kind == "ifeval" or _holds(kind, conditional["names"], attributes, unset)
            if kind != "ifeval" and text:  # the one-line form: its text, or nothing
                if holds and all(shown):
                    out.append(text)
                continue
            shown.append(holds)
            continue
        if not all(shown) or INCLUDE.match(line):  # an include not written in: no text
            continue
        if verbatim is None:
            entry = _ENTRY.match(line)
            if entry:
                value = entry["value"] or ""
                while value.endswith((" \\", " +")) and number < len(lines):
                    value = value[:-2].rstrip() + " " + lines[number].strip()
                    number += 1
                name = entry["name"].lower()
                if entry["unset"] or entry["unset2"]:
                    attributes.pop(name, None)
                    unset.add(name)
                else:
                    attributes[name] = substituted(value, attributes)
                    unset.discard(name)
                continue
            if _TAG_MARKER.match(line) or _LINE_COMMENT.match(line):
                continue
            opening = _VERBATIM.match(line)
            verbatim = line.rstrip() if opening else None
        elif line.rstrip() == verbatim or (verbatim == "```" and line.rstrip() == "```"):
            verbatim = None
        out.append(line)
    return out


def _holds(kind: str, names: str, attributes: Mapping[str, str], unset: set[str]) -> bool:
    """Whether ``ifdef``/``ifndef`` of ``names`` shows its content: ``a,b`` any of them
    set, ``a+b`` all of them; content on names the page never sets or unsets is shown."""
    if not any(
        name.lower() in attributes or name.lower() in unset for name in re.split(r"[+,]", names)
    ):
        return True
    if "+" in names:
        defined = all(name.lower() in attributes for name in names.split("+"))
    else:
        defined = any(name.lower() in attributes for name in names.split(","))
    return defined if kind == "ifdef" else not defined


def substituted(text: str, attributes: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` of a set attribute replaced by its value; one that is
    not set stays as written, as Asciidoctor leaves it.

    >>> substituted("Run {cli} on {host}{nbsp}now", {"cli": "oc"})
    'Run oc on {host} now'
    """

    def value(match: re.Match[str]) -> str:
        name = match["name"].lower()
        return attributes.get(name, BUILT_IN.get(name, match[0]))

    return _REFERENCE.sub(value, text)


#: what a macro's brackets hold: up to the closing one, as Asciidoctor reads it, and at
#: most 500 characters, so that a line of unclosed openers (``link:x[link:x[…``) costs a
#: bounded scan per opener instead of one to the line's end
_IN = r"[^\]]{0,500}"
_IN_ALT = r"[^\],]{0,500}"
#: inline code as written (``+…+`` inside backticks), and inline code
_LITERAL = re.compile(r"(?<![\w`\\])`\+(?P<code>.+?)\+`")
_CODE = re.compile(r"(?<![\w`\\])`(?P<code>[^`\n]+?)`(?![\w`])")
#: text passed through as written: ``pass:[…]``, ``+++…+++`` and ``++…++`` anywhere (pandoc
#: writes ``user++_++1``), ``+…+`` around words
_PASS = re.compile(
    rf"pass:[a-z,]*\[(?P<text>{_IN})\]|\+\+\+(?P<triple>.+?)\+\+\+|\+\+(?P<double>.+?)\+\+"
    r"|(?<![\w+\\])\+(?=\S)(?P<single>[^+\n]*?[^\s+])\+(?![\w+])"
)
#: curved quotes: ``"`text`"`` and ``'`text`'``
_CURVED = re.compile(r"(?P<mark>[\"'])`(?P<text>[^`\n]+?)`(?P=mark)")
_CURVES = {'"': ("\u201c", "\u201d"), "'": ("\u2018", "\u2019")}
#: inline macros, each as a reader sees it
_MACROS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    # link:url[text], https://url[text], mailto:a@b[text]; a bare URL stays a URL
    (
        re.compile(rf"(?:link:|mailto:)(?P<url>[^\s\[]+)\[(?P<text>{_IN})\]"
                   rf"|(?P<url2>(?:https?|ftp|irc)://[^\s\[]+)\[(?P<text2>{_IN})\]"),
        lambda m: _link_text(m["text"] if m["url"] else m["text2"], m["url"] or m["url2"]),
    ),
    (re.compile(rf"image:(?!:)[^\s\[]*\[(?P<alt>{_IN_ALT})(?:,{_IN})?\]"),
     lambda m: m["alt"].strip()),
    (re.compile(rf"(?:kbd|btn):\[(?P<keys>{_IN})\]"), lambda m: m["keys"].strip()),
    (re.compile(rf"menu:(?P<menu>[^\s\[]+)\[(?P<items>{_IN})\]"),
     lambda m: " > ".join([m["menu"], *(i.strip() for i in m["items"].split(">") if i.strip())])),
    (re.compile(rf"footnote:[\w-]*\[(?P<text>{_IN})\]"),
     lambda m: f" ({m['text'].strip()})" if m["text"].strip() else ""),
    (re.compile(rf"(?:stem|latexmath|asciimath|indexterm2?):\[(?P<text>{_IN})\]"),
     lambda m: m["text"]),
    (re.compile(rf"(?:anchor:[\w-]+\[{_IN}\]|icon:[\w-]+\[{_IN}\]|\[\[\[?[\w:.-]+(?:,{_IN})?\]\]\]?)"),
     lambda m: ""),
    (re.compile(r"\(\(\((?P<terms>[^()]*)\)\)\)"), lambda m: ""),
    (re.compile(r"\(\((?P<term>[^()]+)\)\)"), lambda m: m["term"]),
]  # fmt: skip
#: bold and marked text, after a role if any (``[.red]*stop*``)
_ROLE = r"(?:\[[^\[\]]*\])?"
_BOLD = re.compile(r"(?<![\w*\\])" + _ROLE + r"\*\*?(?=\S)(?P<text>[^*\n]+?)(?<=\S)\*\*?(?![\w*])")
_MARKED = re.compile(r"(?<![\w#\\])" + _ROLE + r"##?(?=\S)(?P<text>[^#\n]+?)(?<=\S)##?(?![\w#])")
_HARD_BREAK = re.compile(r"[ \t]\+$", re.MULTILINE)
_ESCAPED = re.compile(r"\\(?=[*_#`{<\[+])")
_PLACEHOLDER = "\x00{}\x00"
_PLACED = re.compile(r"\x00(\d+)\x00")


#: cross references: ``xref:target[text]`` and ``<<target,text>>``
_XREF = re.compile(rf"xref:(?P<target>[^\s\[]+)\[(?P<text>{_IN})\]")
_ANGLED = re.compile(r"<<(?P<target>[^,<>\s][^,<>\n]*?)(?:,\s*(?P<text>[^<>]+))?>>")


def inline_text(
    text: str, attributes: Mapping[str, str], references: Mapping[str, str] | None = None
) -> str:
    """AsciiDoc's inline markup as a reader sees it, written as Markdown: code as code
    spans, links and cross references as their text (one with none as the title of the
    section it names, ``references``: id → title, else its words), bold as ``**bold**``,
    keys, buttons and menus as their names.

    >>> inline_text("Run `kubectl drain {node}` (see <<drain-nodes,Draining>>).", {"node": "n1"})
    'Run `kubectl drain n1` (see Draining).'
    >>> inline_text("*Important:* press kbd:[Ctrl+C], then https://example.com/x[the docs] +", {})
    '**Important:** press Ctrl+C, then the docs'
    >>> inline_text("'`table-name`' matches user++_++1 and +{x}+", {"x": "y"})
    '‘table-name’ matches user_1 and {x}'
    >>> inline_text("Set link:/vars.md[`wait++_++timeout`].", {})
    'Set `wait_timeout`.'
    >>> inline_text("See also, <<Transaction log settings>>.", {})
    'See also, Transaction log settings.'
    >>> inline_text("Then <<proc-upgrade_{context}>>.", {"context": "ops"},
    ...             {"proc-upgrade_ops": "Upgrading the members"})
    'Then Upgrading the members.'
    """
    kept: list[str] = []

    def keep(written: str) -> str:  # out of reach of the substitutions below
        kept.append(written)
        return _PLACEHOLDER.format(len(kept) - 1)

    def restored(text: str) -> str:  # what was kept, back in (a passthrough in code too)
        return _PLACED.sub(lambda m: kept[int(m[1])], text)

    text = _LITERAL.sub(lambda m: keep(code_span(m["code"])), text)
    text = _PASS.sub(lambda m: keep(next(part for part in m.groups() if part is not None)), text)
    text = _CURVED.sub(lambda m: m["text"].join(_CURVES[m["mark"]]), text)
    text = substituted(text, attributes)  # inside code spans too, as Asciidoctor does
    text = _CODE.sub(lambda m: keep(code_span(restored(m["code"]))), text)
    known = references or {}

    def named(target: str) -> str:  # what a cross reference with no text shows
        return known.get(target.removeprefix("#")) or readable_target(target)

    text = _XREF.sub(lambda m: _link_text(m["text"], named(m["target"])), text)
    text = _ANGLED.sub(lambda m: (m["text"] or named(m["target"])).strip(), text)
    for pattern, written in _MACROS:
        text = pattern.sub(written, text)
    text = _BOLD.sub(lambda m: f"**{m['text']}**", text)
    text = _MARKED.sub(lambda m: m["text"], text)
    text = _HARD_BREAK.sub("", text)
    text = _ESCAPED.sub("", text)
    return restored(text)


def _link_text(text: str, fallback: str) -> str:
    """A link's text (Asciidoctor's ``^``, open in a new window, and its attributes
    dropped), or what it points at when it has none."""
    text = text.split(",", 1)[0] if '"' not in text else text.strip('"')
    return text.rstrip("^").strip() or fallback


def readable_target(target: str) -> str:
    """What a cross reference shows when it names no text: the section or page it names.

    >>> readable_target("_configuring_the_broker"), readable_target("ops:upgrade.adoc#rollback")
    ('configuring the broker', 'rollback')
    >>> readable_target("troubleshooting.adoc")
    'troubleshooting'
    """
    name = target.rsplit("#", 1)[-1] if "#" in target else target.rsplit(":", 1)[-1]
    name = name.rsplit("/", 1)[-1].removesuffix(".adoc")
    return re.sub(r"[_-]+", " ", name).strip() or target
