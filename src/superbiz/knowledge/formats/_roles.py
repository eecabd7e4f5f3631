"""Sphinx's roles and directives as a reader sees them, one rule for reStructuredText
(``:ref:`…```, which docutils does not know) and for MyST Markdown (``{ref}`…```, which no
Markdown reader knows): a reference's title, an option, a command, a file or a Python
object as code; the directives' kinds (``formats._directives``, ``formats._myst``)."""

from __future__ import annotations

import re

from superbiz._markdown import fenced

#: the roles Sphinx and MyST documentation uses; a Markdown ``{name}`…``` of another name
#: is left as written (``${cmd}`…``` inside a shell line is no role)
SPHINX_ROLES = frozenset(
    "abbr any attr class code command const data dfn doc download envvar exc file func "
    "guilabel kbd keyword manpage menuselection meth mod numref obj option pep program ref "
    "regexp rfc samp term token".split()
)
#: the roles whose text is code
_CODE_ROLES = frozenset(
    "attr class code command const data envvar exc file func kbd meth mod obj option "
    "program samp".split()
)
#: directives that steer Sphinx and hold nothing a reader reads
STEERING_DIRECTIVES = frozenset(
    "toctree index program currentmodule module highlight tabularcolumns sectionauthor "
    "moduleauthor codeauthor default-domain cmake-module autosummary".split()
)
#: what a version directive's line says before its argument
VERSION_NOTES = {
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "versionremoved": "Removed in version",
    "deprecated": "Deprecated since version",
}
#: directives that describe a named thing: their argument is a signature, read as code
DESCRIPTION_DIRECTIVES = frozenset(
    "option cmdoption envvar describe object function class method attribute data "
    "exception decorator confval setting command variable signature".split()
)
#: directives whose content is code or a diagram's source, kept verbatim
CODE_DIRECTIVES = frozenset(
    "testcode testsetup testcleanup testoutput doctest code-cell ipython jupyter-execute "
    "prompt productionlist mermaid graphviz digraph graph plantuml uml".split()
)
#: directives whose argument is no text (``only html``: a builder expression)
CONTENT_ONLY_DIRECTIVES = frozenset("only tab-set".split())
#: a MyST role: ``{ref}`text <target>``` or ``{py:func}`name``` (one line)
_MYST_ROLE = re.compile(r"\{(?P<role>[a-z][\w.+-]*(?::[\w.+-]+)?)\}`(?P<body>[^`\n]+)`")


def role_text(role: str, body: str) -> str:
    """What a reader sees of ``role`` (``py:func`` is ``func``) around ``body``.

    >>> role_text("ref", "-v, --verbose <--verbose>"), role_text("py:func", "~os.path.join")
    ('-v, --verbose', '`join`')
    >>> role_text("doc", "../topics/configuration")
    'configuration'
    """
    body = " ".join(body.split())
    titled = re.fullmatch(r"(?P<title>.*\S)\s*<[^<>]+>", body)
    if titled is not None:
        body = titled["title"]
    role = role.rsplit(":", 1)[-1]
    if titled is None and body.startswith("~"):
        body = body[1:].rsplit(".", 1)[-1]
    elif titled is None and role == "doc":
        body = body.rstrip("/").rsplit("/", 1)[-1]
    body = body.lstrip("!")
    return code_span(body) if role in _CODE_ROLES else body


def code_span(text: str) -> str:
    """``text`` as a Markdown code span."""
    code = " ".join(text.split())
    return f"``{code}``" if "`" in code else f"`{code}`"


def myst_roles_as_text(markdown: str) -> str:
    """``markdown`` with each MyST role of Sphinx's written as its text, outside code blocks.

    >>> myst_roles_as_text("Use {ref}`--no-deps <install_--no-deps>` or {option}`--user`.")
    'Use --no-deps or `--user`.'
    >>> myst_roles_as_text("```sh\\necho {ref}`x`\\n```\\nrun ${cmd}`date`")
    '```sh\\necho {ref}`x`\\n```\\nrun ${cmd}`date`'
    """
    if "}`" not in markdown:
        return markdown
    lines = markdown.split("\n")
    for number, in_fence in enumerate(fenced(lines)):
        if not in_fence and "}`" in lines[number]:
            lines[number] = _MYST_ROLE.sub(_written, lines[number])
    return "\n".join(lines)


def _written(match: re.Match[str]) -> str:
    role = match["role"]
    if role.rsplit(":", 1)[-1] not in SPHINX_ROLES:
        return match.group()
    return role_text(role, match["body"])
