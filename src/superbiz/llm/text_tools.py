"""Tool calls written as text: read them from model output, and the JSON action protocol.

Two uses of one grammar:

* **Tolerance.** A model offered native tools may still write its call as text: Qwen and
  Hermes chat templates served without a tool parser give ``<tool_call>{"name": …,
  "arguments": {…}}</tool_call>``; llama.cpp's ``chatml-function-calling`` template gives
  its own shape, ``functions.NAME:`` and the arguments' JSON on the next line, quotes
  HTML-escaped once (``&#34;``) or twice (``&amp;#34;``, after a repair prompt); Llama 3.2
  and Gemma write Python calls (``[lookup_knowledge(query="…")]``, in a ``tool_code`` block);
  Mistral's, Granite's and Phi-4's templates a list of JSON calls after a marker
  (``[TOOL_CALLS]``, ``<|tool_call|>``); other small models a bare JSON object naming the
  tool. When the endpoint returned no native call, :func:`parse_text_calls` turns that
  text into :class:`~superbiz.llm.messages.ToolCall` values, so the call is governed and
  executed instead of being shown to the user as an answer.
* **``llm.action_mode: json``**, for endpoints without function calling (or small models
  that call tools unreliably): the tools are described in a system message, the model
  answers one JSON action ``{"action": "<tool>", "arguments": {…}}`` or ``{"action":
  "answer", "content": "…"}`` (constrained by :func:`action_schema` where the server
  supports ``response_format``), and past calls and results are sent back as plain text.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superbiz._text import unescape_entities
from superbiz.llm._pythonic_calls import pythonic_calls
from superbiz.llm.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from superbiz.llm.structured import extract_json

__all__ = [
    "ANSWER_ACTION",
    "TOOL_CALL_TAG",
    "TextCalls",
    "action_instructions",
    "action_messages",
    "action_schema",
    "parse_action",
    "parse_text_calls",
]

ANSWER_ACTION = "answer"
TOOL_CALL_TAG = "<tool_call>"
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
#: ``functions.lookup_knowledge:`` then the arguments (the chatml-function-calling shape)
_FUNCTIONS = re.compile(r"^[ \t]*functions\.([A-Za-z_][\w.-]*)[ \t]*:?[ \t]*$", re.MULTILINE)
#: keys that name the tool, in the shapes models write (Hermes, OpenAI-like, action)
_NAME_KEYS = ("name", "action", "tool", "tool_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
#: what chat templates write around a list of calls: Mistral's ``[TOOL_CALLS]``, Granite's
#: and Phi-4's ``<|tool_call|>…<|/tool_call|>``, Llama's ``<|python_tag|>`` and end tokens
_CALL_MARKERS = re.compile(
    r"^\s*(?:\[TOOL_CALLS\]|<\|tool_call\|>|<\|python_tag\|>)"
    r"|(?:<\|/tool_call\|>|<\|eom_id\|>|<\|eot_id\|>)\s*$"
)


@dataclass(frozen=True, slots=True)
class TextCalls:
    """Tool calls found in a model's text, and the text left around them."""

    content: str
    calls: tuple[ToolCall, ...]


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _loads(text: str) -> Any:
    """JSON as small models write it (fenced, HTML-escaped, words around it); a list of
    calls is read whole."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return extract_json(stripped)


def _call_from_object(value: Mapping[str, Any]) -> ToolCall | None:
    """The call an object describes (``{"name", "arguments"}``, ``{"function": {…}}``,
    ``{"action", "arguments"}``); ``None`` when it names no tool."""
    function = value.get("function")
    if isinstance(function, Mapping):
        value = function
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if not name:
        return None
    arguments = next((value[k] for k in _ARGUMENT_KEYS if k in value), None)
    if arguments is None:  # {"action": "lookup_knowledge", "query": "…"}: flat arguments
        rest = {k: v for k, v in value.items() if k not in (*_NAME_KEYS, "id", "type")}
        arguments = rest or None
    return ToolCall.parse(_new_id(), name.strip(), arguments)


def _tagged_calls(content: str) -> TextCalls | None:
    bodies = _TAGGED.findall(content)
    if not bodies:
        return None
    calls = []
    for body in bodies:
        try:
            value = _loads(body)
        except ValueError as exc:
            calls.append(ToolCall(_new_id(), "", None, body, f"the tool call is not JSON: {exc}"))
            continue
        call = _call_from_object(value) if isinstance(value, Mapping) else None
        calls.append(call or ToolCall(_new_id(), "", None, body, "the tool call names no tool"))
    rest = _TAGGED.sub("", content).strip()
    return TextCalls(rest, tuple(calls))


def _function_calls(content: str) -> TextCalls | None:
    """Calls in the ``functions.NAME:`` shape: each header line and the JSON after it
    (entities written out, twice-escaped ones too); text before the first is kept."""
    headers = list(_FUNCTIONS.finditer(content))
    if not headers:
        return None
    calls = []
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        end = following.start() if following else len(content)
        body = unescape_entities(content[header.end() : end]).strip()
        try:
            value = _loads(body)
        except ValueError as exc:
            error = f"the tool call's arguments are not JSON: {exc}"
            calls.append(ToolCall(_new_id(), header[1], None, body, error))
            continue
        calls.append(ToolCall.parse(_new_id(), header[1], value))
    return TextCalls(content[: headers[0].start()].strip(), tuple(calls))


def parse_text_calls(content: str, tool_names: Collection[str]) -> TextCalls | None:
    """Tool calls written as text in ``content``; ``None`` when it holds none.

    ``<tool_call>`` blocks and ``functions.NAME:`` lines are calls whatever tool they
    name (an unknown one is then reported to the model by the tool layer); Python calls
    (``[lookup_knowledge(query="…")]``, ``_pythonic_calls``) and a bare JSON object, or
    a list of them (marked as templates mark them: ``_CALL_MARKERS``), are calls only
    when each names one of ``tool_names``, so an answer with code or JSON stays an answer.
    """
    if not content.strip():
        return None
    if TOOL_CALL_TAG in content:
        return _tagged_calls(content)
    functions = _function_calls(content)
    if functions is not None:
        return functions
    unmarked = _CALL_MARKERS.sub("", content)
    pythonic = pythonic_calls(unmarked, tool_names, _new_id)
    if pythonic is not None:
        return TextCalls(*pythonic)
    stripped = unmarked.strip()
    if not stripped.startswith(("{", "[", "```")):
        return None
    try:
        value = _loads(stripped)
    except ValueError:
        return None
    objects = value if isinstance(value, list) else [value]
    calls = []
    for item in objects:
        call = _call_from_object(item) if isinstance(item, Mapping) else None
        if call is None or call.name not in tool_names:
            return None
        calls.append(call)
    return TextCalls("", tuple(calls)) if calls else None


def parse_action(content: str, tool_names: Collection[str]) -> TextCalls:
    """A reply under the JSON action protocol: a call, or the answer's text.

    Output that is not a valid action is taken as the answer itself: the model said
    something, and showing it beats failing the turn.
    """
    found = parse_text_calls(content, tool_names)
    if found is not None:
        return found
    try:
        value = _loads(content)
    except ValueError:
        return TextCalls(content.strip(), ())
    if isinstance(value, Mapping) and value.get("action") == ANSWER_ACTION:
        answer = value.get("content", value.get("answer", ""))
        return TextCalls(answer if isinstance(answer, str) else json.dumps(answer), ())
    return TextCalls(content.strip(), ())


def action_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """``response_format`` for the action step: one object naming a tool or ``answer``."""
    schema = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": [t.name for t in tools] + [ANSWER_ACTION]},
            "arguments": {"type": "object"},
            "content": {"type": "string"},
        },
        "required": ["action"],
    }
    return {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}


def action_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system message that replaces native tools: each tool's schema and the protocol."""
    described = "\n".join(
        f"- {t.name}: {t.description}\n  arguments (JSON schema): "
        f"{json.dumps(t.parameters, ensure_ascii=False)}"
        for t in tools
    )
    return (
        "You can use these tools:\n"
        f"{described}\n\n"
        "Reply with exactly one JSON object and nothing else:\n"
        '- to use a tool: {"action": "<tool name>", "arguments": {<arguments as the schema '
        "says>}}\n"
        '- to answer the user: {"action": "answer", "content": "<your whole answer>"}\n'
        "A tool's result comes back in the next message; then reply with the next action."
    )


def _action_text(call: ToolCall) -> str:
    arguments = call.arguments if call.arguments is not None else {}
    return json.dumps({"action": call.name, "arguments": arguments}, ensure_ascii=False)


def action_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Message]:
    """The conversation for an endpoint without function calling.

    The protocol goes after the leading system messages; past calls become the JSON the
    model would have written and their results user messages (one per assistant turn,
    since some chat templates reject two user messages in a row).
    """
    leading = 0
    while leading < len(messages) and isinstance(messages[leading], SystemMessage):
        leading += 1
    out: list[Message] = [*messages[:leading], SystemMessage(action_instructions(tools))]
    results: list[str] = []
    for message in messages[leading:]:
        if isinstance(message, ToolMessage):
            results.append(f"Result of {message.name} ({message.tool_call_id}):\n{message.content}")
            continue
        if results:
            out.append(UserMessage("\n\n".join(results)))
            results = []
        if isinstance(message, AssistantMessage) and message.tool_calls:
            text = "\n".join(_action_text(call) for call in message.tool_calls)
            out.append(AssistantMessage(text))
        else:
            out.append(message)
    if results:
        out.append(UserMessage("\n\n".join(results)))
    return out
