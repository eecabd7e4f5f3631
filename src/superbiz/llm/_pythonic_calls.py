"""Tool calls written as Python calls: ``[lookup_knowledge(query="…", domain="api")]``.

Llama 3.2's small models (1B, 3B) call tools in this "pythonic" shape, a list of calls
with keyword arguments, and Gemma writes the same call in a ```` ```tool_code ```` block;
served without a parser for it, the call arrives as the answer's text. The text is
parsed, never run: ``ast`` reads its syntax and each argument must be a literal
(``ast.literal_eval``), so ``lookup_knowledge(query=open("x").read())`` is an erroneous
call, not an evaluation.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Collection

from superbiz.llm.messages import ToolCall

#: longer text is no call a model wrote, and parsing it would only cost time
MAX_CALL_CHARS = 20_000
#: a fenced block that may hold calls, and what stands around it
_FENCED = re.compile(
    r"^[ \t]*```[ \t]*(?:tool_code|tool_call|python|py)[ \t]*\n(.*?)\n[ \t]*```[ \t]*$",
    re.DOTALL | re.MULTILINE,
)


def pythonic_calls(
    content: str, tool_names: Collection[str], new_id: Callable[[], str]
) -> tuple[str, tuple[ToolCall, ...]] | None:
    """The calls ``content`` writes in Python's syntax, and the text left around them;
    None when it writes none. The whole text, or one fenced ``tool_code`` (or
    ``python``) block, must be one call or a list of calls, each naming one of
    ``tool_names``: other code in an answer stays the answer.

    >>> ids, tools = iter(["c1", "c2"]).__next__, {"lookup_knowledge"}
    >>> rest, calls = pythonic_calls('[lookup_knowledge(query="Redis 连接池")]', tools, ids)
    >>> rest, [(c.id, c.name, c.arguments) for c in calls]
    ('', [('c1', 'lookup_knowledge', {'query': 'Redis 连接池'})])
    >>> pythonic_calls('print("hi")', tools, ids) is None
    True
    """
    stripped = content.strip()
    found = _calls(stripped, tool_names, new_id)
    if found is not None:
        return "", found
    for block in _FENCED.finditer(content):
        found = _calls(block[1].strip(), tool_names, new_id)
        if found is not None:
            rest = content[: block.start()] + content[block.end() :]
            return rest.strip(), found
    return None


def _calls(
    text: str, tool_names: Collection[str], new_id: Callable[[], str]
) -> tuple[ToolCall, ...] | None:
    if not text or len(text) > MAX_CALL_CHARS or "(" not in text:
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
    calls = [n for n in nodes if isinstance(n, ast.Call) and _name(n.func) in tool_names]
    if not calls or len(calls) != len(nodes):
        return None
    return tuple(_call(node, new_id()) for node in calls)


def _name(func: ast.expr) -> str | None:
    """``lookup_knowledge`` and ``functions.lookup_knowledge`` name the same tool."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _call(node: ast.Call, call_id: str) -> ToolCall:
    name = _name(node.func) or ""
    raw = ast.unparse(node)
    if node.args:
        return ToolCall(call_id, name, None, raw, "arguments must be named (query=…)")
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return ToolCall(call_id, name, None, raw, "arguments must be named (query=…)")
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            error = f"argument {keyword.arg!r} is not a literal value"
            return ToolCall(call_id, name, None, raw, error)
    return ToolCall.parse(call_id, name, json.dumps(arguments, ensure_ascii=False, default=str))
