"""Tool calls written as text, and the JSON action protocol (pure functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superbiz.governance.tool import LOOKUP_KNOWLEDGE as LOOKUP
from superbiz.llm import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from superbiz.llm.text_tools import (
    action_messages,
    action_schema,
    parse_action,
    parse_text_calls,
)

NAMES = {"lookup_knowledge"}


def test_hermes_tool_call_tag() -> None:
    text = (
        '<tool_call>\n{"name": "lookup_knowledge", "arguments": {"query": "Redis 连接池"}}'
        "\n</tool_call>"
    )
    found = parse_text_calls(text, NAMES)
    assert found is not None and found.content == ""
    (call,) = found.calls
    assert (call.name, call.arguments, call.error) == (
        "lookup_knowledge",
        {"query": "Redis 连接池"},
        None,
    )
    assert call.id.startswith("call_")


def test_several_tags_prose_kept_and_unclosed_tag() -> None:
    text = (
        "Let me check.\n"
        '<tool_call>{"name": "lookup_knowledge", "arguments": {"query": "a"}}</tool_call>\n'
        '<tool_call>{"name": "lookup_knowledge", "arguments": "{\\"query\\": \\"b\\"}"'
    )
    found = parse_text_calls(text + "}", NAMES)
    assert found is not None
    assert found.content == "Let me check."
    assert [c.arguments for c in found.calls] == [{"query": "a"}, {"query": "b"}]


def test_tag_with_broken_json_is_an_erroneous_call() -> None:
    found = parse_text_calls('<tool_call>{"name": "lookup_knowledge", "argu</tool_call>', NAMES)
    assert found is not None
    (call,) = found.calls
    assert call.arguments is None and call.error and "not JSON" in call.error


def test_tag_naming_an_unknown_tool_is_still_a_call() -> None:
    found = parse_text_calls(
        '<tool_call>{"name": "web_search", "arguments": {}}</tool_call>', NAMES
    )
    assert found is not None and found.calls[0].name == "web_search"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "lookup_knowledge", "arguments": {"query": "pool"}}',
        '{"name": "lookup_knowledge", "parameters": {"query": "pool"}}',
        '{"function": {"name": "lookup_knowledge", "arguments": "{\\"query\\": \\"pool\\"}"}}',
        '{"action": "lookup_knowledge", "arguments": {"query": "pool"}}',
        '{"action": "lookup_knowledge", "query": "pool"}',
        '```json\n{"name": "lookup_knowledge", "arguments": {"query": "pool"}}\n```',
        "{&#34;name&#34;: &#34;lookup_knowledge&#34;, &#34;arguments&#34;: "
        "{&#34;query&#34;: &#34;pool&#34;}}",
        '[{"name": "lookup_knowledge", "arguments": {"query": "pool"}}]',
        '[TOOL_CALLS][{"name": "lookup_knowledge", "arguments": {"query": "pool"}}]',  # Mistral
        # Granite 3, Phi-4-mini
        '<|tool_call|>[{"name": "lookup_knowledge", "arguments": {"query": "pool"}}]',
        '<|tool_call|>[{"type": "function", "function": {"name": "lookup_knowledge", '
        '"arguments": {"query": "pool"}}}]<|/tool_call|>',
        '<|python_tag|>{"name": "lookup_knowledge", "parameters": {"query": "pool"}}<|eom_id|>',
    ],
)
def test_bare_json_naming_the_tool(text: str) -> None:
    found = parse_text_calls(text, NAMES)
    assert found is not None and found.content == ""
    assert [(c.name, c.arguments) for c in found.calls] == [("lookup_knowledge", {"query": "pool"})]


@pytest.mark.parametrize(
    "text",
    [
        "Check the pool size [1].",
        '{"name": "Alice", "arguments": {"x": 1}}',  # JSON naming no offered tool
        '{"maxTotal": 50, "maxIdle": 10}',  # a JSON answer
        "",
        'The config is {"name": "lookup_knowledge"} in the docs.',  # prose around JSON
        # code in an answer: no call of an offered tool, or not the whole text or block
        "```python\nprint(len(pool))\n```",
        '[search(query="pool")]',
        'Call lookup_knowledge(query="pool") to see more.',
        '```python\nlookup_knowledge(query="pool")\nprint("done")\n```',
        f'[lookup_knowledge(query="{"x" * 20_000}")]',  # longer than any call a model writes
    ],
)
def test_text_without_calls_stays_text(text: str) -> None:
    assert parse_text_calls(text, NAMES) is None


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ('[lookup_knowledge(query="pool", domain="infra")]', ""),  # Llama 3.2's pythonic list
        ('lookup_knowledge(query="pool", domain="infra")', ""),
        ('[functions.lookup_knowledge(query="pool", domain="infra")]', ""),
        ('<|python_tag|>lookup_knowledge(query="pool", domain="infra")<|eom_id|>', ""),
        (  # Gemma: prose, then the call in a tool_code block
            'I will check the runbook.\n```tool_code\nlookup_knowledge(query="pool", '
            'domain="infra")\n```',
            "I will check the runbook.",
        ),
    ],
)
def test_python_calls_of_an_offered_tool(text: str, rest: str) -> None:
    found = parse_text_calls(text, NAMES)
    assert found is not None and found.content == rest
    (call,) = found.calls
    assert (call.name, call.arguments, call.error) == (
        "lookup_knowledge",
        {"query": "pool", "domain": "infra"},
        None,
    )


def test_several_python_calls_and_erroneous_ones_are_read_never_run(tmp_path: Path) -> None:
    """Each call of the list is one call; an argument that is not a literal, or one not
    named, makes that call erroneous (told to the model), and nothing is evaluated."""
    touched = tmp_path / "touched"
    text = (
        '[lookup_knowledge(query="pool"), '
        f"lookup_knowledge(query=__import__('pathlib').Path({str(touched)!r}).touch()), "
        'lookup_knowledge("pool")]'
    )
    found = parse_text_calls(text, NAMES)
    assert found is not None
    first, evaluated, positional = found.calls
    assert first.arguments == {"query": "pool"} and first.error is None
    assert evaluated.arguments is None and evaluated.error == (
        "argument 'query' is not a literal value"
    )
    assert positional.arguments is None and positional.error == (
        "arguments must be named (query=…)"
    )
    assert "__import__" in evaluated.raw_arguments
    assert not touched.exists()


def test_parse_action_answer_call_and_free_text() -> None:
    answer = parse_action('{"action": "answer", "content": "Raise maxTotal [1]."}', NAMES)
    assert answer.content == "Raise maxTotal [1]." and answer.calls == ()
    call = parse_action('{"action": "lookup_knowledge", "arguments": {"query": "x"}}', NAMES)
    assert call.calls[0].arguments == {"query": "x"}
    free = parse_action("  Raise maxTotal.  ", NAMES)
    assert free.content == "Raise maxTotal." and free.calls == ()


def test_action_schema_names_the_tools_and_answer() -> None:
    schema = action_schema([LOOKUP])
    assert schema["type"] == "json_schema"
    action = schema["json_schema"]["schema"]["properties"]["action"]
    assert action["enum"] == ["lookup_knowledge", "answer"]


def test_action_messages_render_history_as_text() -> None:
    call = ToolCall.of("c1", "lookup_knowledge", {"query": "pool"})
    messages = [
        SystemMessage("You are the executor."),
        SystemMessage("PLAN: infrastructure"),
        UserMessage("pool exhausted?"),
        AssistantMessage("", (call,)),
        ToolMessage("c1", "lookup_knowledge", '{"found": true}'),
        SystemMessage("Closed domains: none"),
    ]
    out = action_messages(messages, [LOOKUP])

    assert [m.role for m in out] == ["system"] * 3 + ["user", "assistant", "user", "system"]
    assert "lookup_knowledge" in out[2].content and '"action": "answer"' in out[2].content
    assert json.loads(out[4].content) == {
        "action": "lookup_knowledge",
        "arguments": {"query": "pool"},
    }
    assert out[5].content.startswith("Result of lookup_knowledge (c1):")
    assert not any(isinstance(m, ToolMessage) for m in out)


# -- the chatml-function-calling shape: ``functions.NAME:`` then the JSON ------------------


def test_the_recorded_functions_shape_is_a_call_escaped_once_or_twice() -> None:
    """Qwen2.5-Coder-1.5B under llama.cpp's chatml-function-calling template wrote its
    second lookup as text (tests/data/llm-transcripts, live-turn4): ``&#34;`` in the
    executor step, ``&amp;#34;`` after the repair prompt."""
    from fakes.real_transcripts import QWEN_LIVE_TURN4, load_transcript

    replies = [e.reply for e in load_transcript(QWEN_LIVE_TURN4)]
    shaped = [r for r in replies if r.startswith("functions.lookup_knowledge:")]
    assert any("&amp;#34;" in r for r in shaped) and any("&#34;query" in r for r in shaped)
    assert len(shaped) == 5
    for reply in shaped:
        found = parse_text_calls(reply, NAMES)
        assert found is not None and found.content == ""
        (call,) = found.calls
        assert call.name == "lookup_knowledge" and call.error is None
        assert call.arguments is not None
        query = call.arguments["query"]
        assert "&" not in query and "\n" in query  # the JSON's \n, entities written out


def test_functions_shape_after_prose_and_several_calls() -> None:
    text = (
        "I will look it up.\nfunctions.lookup_knowledge:\n"
        '{"query": "a"}\nfunctions.lookup_knowledge:\n{"query": "b", "domain": "api"}'
    )
    found = parse_text_calls(text, NAMES)
    assert found is not None and found.content == "I will look it up."
    assert [c.arguments for c in found.calls] == [{"query": "a"}, {"query": "b", "domain": "api"}]


def test_functions_shape_with_broken_json_is_an_erroneous_call() -> None:
    found = parse_text_calls('functions.lookup_knowledge:\n{"query": "a', NAMES)
    assert found is not None
    (call,) = found.calls
    assert call.arguments is None and call.error and "not JSON" in call.error


def test_prose_mentioning_functions_is_no_call() -> None:
    text = "Use functions.lookup_knowledge: it searches the runbooks."
    assert parse_text_calls(text, NAMES) is None
