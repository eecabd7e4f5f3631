"""Structured output: ask a chat model for one JSON object that a pydantic schema accepts.

Small local models wrap JSON in code fences, add prose around it, HTML-escape its quotes
(``&#34;``, seen in 2 of 3 planner calls of Qwen2.5-Coder-1.5B), return it as a JSON
string or write a JavaScript object literal (``{need_retrieval: true, domains: [{domain:
'api'}]}``: bare keys, single quotes; most first plans of the same model's live run).
:func:`extract_json` tolerates all of these; :func:`ask_structured` validates the
object, makes exactly one repair turn that names the problem and repeats the schema, and
otherwise raises :class:`~superbiz.exceptions.StructuredOutputError`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from superbiz.exceptions import StructuredOutputError
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import Message, SystemMessage

__all__ = ["Structured", "ask_structured", "extract_json", "parse_structured", "schema_hint"]

T = TypeVar("T", bound=BaseModel)

#: validation errors named in a repair turn; a small model cannot act on more
_MAX_ERRORS = 3


@dataclass(frozen=True, slots=True)
class Structured(Generic[T]):
    """A validated reply, and whether it took the repair turn to get it."""

    value: T
    repaired: bool


def extract_json(reply: str) -> dict[str, Any]:
    """The first JSON object in a model's reply; raises ``ValueError`` saying what is wrong.

    >>> extract_json('Plan:\\n```json\\n{"a": [1, {"b": null}]}\\n``` done {x}')
    {'a': [1, {'b': None}]}
    >>> extract_json('{&#34;a&#34;: &quot;x &amp; y&quot;}')
    {'a': 'x & y'}
    >>> extract_json('"{\\\\"a\\\\": 1}"')
    {'a': 1}
    >>> extract_json("{need: true, domains: [{domain: 'api', q: 'it\\\\'s'}], x: null}")
    {'need': True, 'domains': [{'domain': 'api', 'q': "it's"}], 'x': None}
    >>> extract_json("payment, please")
    Traceback (most recent call last):
    ValueError: no JSON object
    >>> extract_json('{"a": 1, }')
    Traceback (most recent call last):
    ValueError: invalid JSON (Expecting property name enclosed in double quotes)
    """
    first_problem: str | None = None
    texts = dict.fromkeys((reply, html.unescape(reply)))
    for text in texts:
        found, problem = _first_object(text)
        if found is not None:
            return found
        first_problem = first_problem or problem
    for text in texts:  # then as a JavaScript object literal: it is no less unambiguous
        literal = _from_object_literal(text)
        if literal is not None:
            found, _ = _first_object(literal)
            if found is not None:
                return found
    raise ValueError(first_problem or "no JSON object")


_BARE_KEY = re.compile(r"[A-Za-z_$][\w$]*")
_PYTHON_WORDS = {"True": "true", "False": "false", "None": "null"}


def _from_object_literal(text: str) -> str | None:
    """``text`` with a JavaScript (or Python) object literal's bare keys quoted and its
    single-quoted strings written as JSON strings; ``None`` when there was nothing to
    rewrite. Double-quoted strings are copied as they are; nothing else changes, so a
    reply that is neither JSON nor such a literal still fails to decode.

    >>> _from_object_literal("{a: 'x', b: [True, None]}")
    '{"a": "x", "b": [true, null]}'
    """
    out: list[str] = []
    changed = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == '"':
            end = _string_end(text, i, '"')
            out.append(text[i:end])
            i = end
        elif char == "'":
            end = _string_end(text, i, "'")
            body = text[i + 1 : end - 1]
            value = re.sub(r"\\(.)", lambda m: _UNESCAPED.get(m[1], m[1]), body, flags=re.S)
            out.append(json.dumps(value, ensure_ascii=False))
            changed = True
            i = end
        elif (word := _BARE_KEY.match(text, i)) and not (i and (text[i - 1].isalnum())):
            name = word.group(0)
            after = text[word.end() :].lstrip()
            if after.startswith(":") and _after_open(out):
                out.append(json.dumps(name))
                changed = True
            elif name in _PYTHON_WORDS:
                out.append(_PYTHON_WORDS[name])
                changed = True
            else:
                out.append(name)
            i = word.end()
        else:
            out.append(char)
            i += 1
    return "".join(out) if changed else None


_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r"}


def _string_end(text: str, start: int, quote: str) -> int:
    """The index after the string opened by ``quote`` at ``start`` (its end if unclosed)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


def _after_open(out: list[str]) -> bool:
    """Whether what was written so far ends where an object key may start (``{`` or ``,``)."""
    for piece in reversed(out):
        if piece.strip():
            return piece.rstrip().endswith(("{", ","))
    return False


def _first_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The first ``{`` that decodes to an object (a JSON string holding one counts too)."""
    decoder = json.JSONDecoder()
    problem = None
    stripped = text.strip()
    if stripped.startswith('"'):
        try:
            inner = json.loads(stripped)
        except json.JSONDecodeError:
            inner = None
        if isinstance(inner, str):
            found, problem = _first_object(inner)
            if found is not None:
                return found, None
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            problem = problem or f"invalid JSON ({exc.msg})"
        else:
            if isinstance(value, dict):
                return value, None
        start = text.find("{", start + 1)
    return None, problem


def parse_structured(reply: str, schema: type[T], context: Mapping[str, Any] | None = None) -> T:
    """``reply``'s object validated by ``schema``; raises ``ValueError`` with a brief reason
    (the wording a repair turn shows the model).

    >>> from pydantic import BaseModel
    >>> class Answer(BaseModel):
    ...     covers: list[str]
    ...     when: str
    >>> parse_structured('```json\\n{"covers": ["a"], "when": "w"}\\n```', Answer)
    Answer(covers=['a'], when='w')
    >>> parse_structured('{"covers": ["a", 3]}', Answer)
    Traceback (most recent call last):
    ValueError: 'covers.1': Input should be a valid string; 'when': Field required
    """
    data = extract_json(reply)
    try:
        return schema.model_validate(data, context=dict(context or {}))
    except ValidationError as exc:
        raise ValueError(_brief(exc)) from None


def _brief(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:_MAX_ERRORS]:
        text = item["msg"].removeprefix("Value error, ")
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"'{where}': {text}" if where else text)
    return "; ".join(parts)


def schema_hint(schema: type[BaseModel]) -> str:
    """The schema as a compact JSON shape, short enough for a small model's repair turn.

    >>> from pydantic import BaseModel
    >>> class Entry(BaseModel):
    ...     domains: list[str]
    ...     note: str | None = None
    >>> schema_hint(Entry)
    '{"domains": [string, ...], "note": string | null}'
    """
    full = schema.model_json_schema()
    return _shape(full, full.get("$defs", {}))


def _shape(node: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    if "$ref" in node:
        return _shape(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        return " | ".join(_shape(option, defs) for option in node["anyOf"])
    kind = node.get("type")
    if kind == "object" and "properties" in node:
        fields = ", ".join(f'"{k}": {_shape(v, defs)}' for k, v in node["properties"].items())
        return "{" + fields + "}"
    if kind == "array":
        return "[" + _shape(node.get("items", {}), defs) + ", ...]"
    return str(kind or "any")


def ask_structured(
    model: ChatModel,
    messages: Sequence[Message],
    schema: type[T],
    *,
    what: str = "answer",
    context: Mapping[str, Any] | None = None,
) -> Structured[T]:
    """Ask ``model`` for an object of ``schema``; one repair turn on a bad reply.

    ``what`` names the object in the repair turn ("plan", "metadata"); ``context`` reaches
    the schema's validators (e.g. the domains a plan may name). Errors of the model itself
    (:class:`~superbiz.exceptions.LLMError`) propagate unchanged.
    """
    conversation = list(messages)
    problem = ""
    for attempt in range(2):
        reply = model.complete(conversation).message.content
        try:
            return Structured(parse_structured(reply, schema, context), repaired=attempt > 0)
        except ValueError as exc:
            problem = str(exc)
        conversation.append(
            SystemMessage(
                f"That answer was not a valid {what}: {problem}. Answer again with only the "
                f"JSON object, shaped {schema_hint(schema)}"
            )
        )
    raise StructuredOutputError(f"no valid {what} after one repair: {problem}")
