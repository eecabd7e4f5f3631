"""Filter expressions for Milvus searches and queries: a template with its values kept apart.

A Milvus server takes the values as ``filter_params``; Milvus Lite 3.x has no templates,
so they are written as literals with every escape its lexer knows. Plain strings: no
client is needed to build one, so this stays apart from the store that sends them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from superbiz.exceptions import IndexMismatchError
from superbiz.retrieval.visibility import Visibility

# What Milvus Lite's filter lexer understands inside a double-quoted string literal.
_LITERAL_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def literal(value: str) -> str:
    """``value`` as a filter string literal (Milvus Lite has no templated filters).

    >>> print(literal('a"b\\nc'))
    "a\\"b\\nc"
    """
    return f'"{value.translate(_LITERAL_ESCAPES)}"'


@dataclass(frozen=True, slots=True)
class Filter:
    """A filter template (``doc_path in {paths}``) with its values kept apart.

    A Milvus server gets the values as ``filter_params``, never parsed as expression
    text; Milvus Lite 3.x has no templates, so ``rendered`` writes them as literals
    with every escape its lexer knows (quotes, backslash, newline, CR, tab).
    """

    template: str
    params: dict[str, str | list[str]]

    def rendered(self) -> str:
        values = {
            name: f"[{', '.join(map(literal, value))}]"
            if isinstance(value, list)
            else literal(value)
            for name, value in self.params.items()
        }
        return self.template.format(**values)

    def client_args(self, templates: bool) -> dict[str, Any]:
        """The client's keyword arguments for this filter: its values as parameters
        where the server parses ``templates``, else written in as escaped literals.

        >>> Filter("domain == {d}", {"d": "ops"}).client_args(templates=True)
        {'filter': 'domain == {d}', 'filter_params': {'d': 'ops'}}
        >>> Filter("domain == {d}", {"d": "ops"}).client_args(templates=False)
        {'filter': 'domain == "ops"'}
        """
        if not self.params or not templates:
            return {"filter": self.rendered()}
        return {"filter": self.template, "filter_params": self.params}


def domain_filter(domain: str | None) -> Filter | None:
    return Filter("domain == {domain}", {"domain": domain}) if domain else None


def search_filter(
    domain: str | None, visibility: Visibility | None, *, has_access: bool
) -> Filter | None:
    """The filter of one search: its domain, and what ``visibility`` admits
    (``Visibility.admits_chunk``). An index whose chunks have no list field (built
    before superbiz stored it) filters by domain alone, which is exact only while no
    document has a list of its own.

    >>> v = Visibility(frozenset(), frozenset({"hr"}), frozenset({'["sre"]'}), True)
    >>> print(search_filter("ops", v, has_access=True).rendered())
    domain == "ops" and ((access == "" and domain not in ["hr"]) or access in ["[\\"sre\\"]"])
    """
    found = domain_filter(domain)
    if visibility is None:
        return found
    params: dict[str, str | list[str]] = dict(found.params) if found else {}
    denied = sorted(visibility.denied_domains)
    if denied:
        params["denied"] = denied
    if has_access:
        unlisted = 'access == ""' + (" and domain not in {denied}" if denied else "")
        clause = f"({unlisted})"
        if visibility.admitted_lists:
            params["admitted"] = sorted(visibility.admitted_lists)
            clause = f"({clause} or access in {{admitted}})"
    elif visibility.lists_in_use:
        raise IndexMismatchError(
            "documents carry access lists (frontmatter 'access:') but the vector index was "
            "built before superbiz stored them with its chunks, so it cannot filter by "
            "them; re-ingest with `superbiz ingest PATH --rebuild`"
        )
    elif denied:
        clause = "domain not in {denied}"
    else:
        return found
    template = f"{found.template} and {clause}" if found else clause
    return Filter(template, params)
