"""OpenAIChatModel reads tool calls written as text, and speaks the JSON action protocol."""

from __future__ import annotations

import json

from fakes.openai_server import FakeOpenAIServer, error_reply, tool_call_reply
from superbiz.config import LLMSettings
from superbiz.governance.tool import LOOKUP_KNOWLEDGE as LOOKUP
from superbiz.llm import (
    OpenAIChatModel,
    ResponseDone,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolMessage,
    UserMessage,
)

QUESTION = [SystemMessage("You answer from the runbooks."), UserMessage("Redis pool exhausted?")]
TAGGED = (
    '<tool_call>\n{"name": "lookup_knowledge", "arguments": {"query": "Redis pool"}}\n</tool_call>'
)


def make_model(server: FakeOpenAIServer, **settings: object) -> OpenAIChatModel:
    llm = LLMSettings(base_url=server.base_url, model="m", max_retries=0, **settings)
    return OpenAIChatModel(llm, sleep=lambda _: None)


def split(events: list[StreamEvent]) -> tuple[str, ResponseDone]:
    done = events[-1]
    assert isinstance(done, ResponseDone)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), done


def test_tagged_call_in_content_becomes_a_call(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(TAGGED)
    message = make_model(fake_openai).complete(QUESTION, [LOOKUP]).message
    assert message.content == ""
    (call,) = message.tool_calls
    assert call.name == "lookup_knowledge" and call.arguments == {"query": "Redis pool"}


def test_a_python_call_in_content_becomes_a_call_and_is_never_streamed(
    fake_openai: FakeOpenAIServer,
) -> None:
    """What Llama 3.2 (1B, 3B) writes when its server has no parser for it."""
    python_call = '[lookup_knowledge(query="Redis pool", domain="infrastructure")]'
    fake_openai.script_chat(python_call, python_call)
    message = make_model(fake_openai).complete(QUESTION, [LOOKUP]).message
    assert message.content == ""
    (call,) = message.tool_calls
    assert call.arguments == {"query": "Redis pool", "domain": "infrastructure"}
    text, done = split(list(make_model(fake_openai).stream(QUESTION, [LOOKUP])))
    assert text == ""
    assert done.response.message.tool_calls[0].arguments == call.arguments


def test_a_marked_json_call_is_never_streamed(fake_openai: FakeOpenAIServer) -> None:
    """Granite's and Phi-4's templates mark a list of calls with ``<|tool_call|>``."""
    fake_openai.script_chat(
        '<|tool_call|>[{"name": "lookup_knowledge", "arguments": {"query": "pool"}}]'
    )
    text, done = split(list(make_model(fake_openai).stream(QUESTION, [LOOKUP])))
    assert text == ""
    assert done.response.message.tool_calls[0].arguments == {"query": "pool"}


def test_text_calls_are_read_only_when_tools_were_offered(fake_openai: FakeOpenAIServer) -> None:
    plan = '{"name": "lookup_knowledge", "arguments": {"query": "x"}}'
    fake_openai.script_chat(plan)
    message = make_model(fake_openai).complete(QUESTION).message
    assert message.content == plan and message.tool_calls == ()


def test_native_calls_win_over_text(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "native"}'), content=TAGGED)
    )
    message = make_model(fake_openai).complete(QUESTION, [LOOKUP]).message
    assert [c.arguments for c in message.tool_calls] == [{"query": "native"}]


def test_stream_never_shows_a_text_call(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat("I will look it up.\n" + TAGGED)
    text, done = split(list(make_model(fake_openai).stream(QUESTION, [LOOKUP])))
    assert "<tool" not in text and "lookup_knowledge" not in text
    assert text.strip() == "I will look it up."
    assert done.response.message.content == "I will look it up."
    assert done.response.message.tool_calls[0].arguments == {"query": "Redis pool"}


def test_stream_bare_json_call_shows_nothing(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat('{"name": "lookup_knowledge", "arguments": {"query": "pool"}}')
    text, done = split(list(make_model(fake_openai).stream(QUESTION, [LOOKUP])))
    assert text == ""
    assert done.response.message.tool_calls[0].arguments == {"query": "pool"}


def test_stream_plain_answer_is_shown_whole(fake_openai: FakeOpenAIServer) -> None:
    answer = "Keep maxTotal < 50; see <tool settings> and {braces} [1]. Ends with <tool_"
    fake_openai.script_chat(answer)
    events = list(make_model(fake_openai).stream(QUESTION, [LOOKUP]))
    text, done = split(events)
    assert text == answer == done.response.message.content
    assert sum(isinstance(e, TextDelta) for e in events) > 3  # still streamed


def test_stream_json_answer_is_shown_at_the_end(fake_openai: FakeOpenAIServer) -> None:
    answer = '{"maxTotal": 50}'
    fake_openai.script_chat(answer)
    text, done = split(list(make_model(fake_openai).stream(QUESTION, [LOOKUP])))
    assert text == answer and done.response.message.tool_calls == ()


def test_json_action_mode_round_trip(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(
        '{"action": "lookup_knowledge", "arguments": {"query": "Redis pool"}}',
        '{"action": "answer", "content": "Raise maxTotal [1]."}',
    )
    model = make_model(fake_openai, action_mode="json")

    first = model.complete(QUESTION, [LOOKUP])
    (call,) = first.message.tool_calls
    history = [*QUESTION, first.message, ToolMessage(call.id, call.name, '{"found": true}')]
    final = model.complete(history, [LOOKUP])

    assert final.message.content == "Raise maxTotal [1]." and final.message.tool_calls == ()
    sent = fake_openai.chat_requests
    assert all("tools" not in body for body in sent)
    assert sent[0]["response_format"]["type"] == "json_schema"
    assert "lookup_knowledge" in sent[0]["messages"][1]["content"]
    roles = [m["role"] for m in sent[1]["messages"]]
    assert roles == ["system", "system", "user", "assistant", "user"]
    assert json.loads(sent[1]["messages"][3]["content"])["action"] == "lookup_knowledge"


def test_json_action_mode_without_tools_is_a_plain_request(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat('{"need_retrieval": false}')
    make_model(fake_openai, action_mode="json").complete(QUESTION)
    assert "response_format" not in fake_openai.chat_requests[-1]
    assert len(fake_openai.chat_requests[-1]["messages"]) == 2


def test_json_action_mode_stream_shows_the_answer_not_the_json(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.script_chat('{"action": "answer", "content": "Raise maxTotal [1]."}')
    events = list(make_model(fake_openai, action_mode="json").stream(QUESTION, [LOOKUP]))
    text, done = split(events)
    assert text == "Raise maxTotal [1]." == done.response.message.content


def test_json_action_mode_when_the_server_refuses_the_schema(
    fake_openai: FakeOpenAIServer,
) -> None:
    refusal = error_reply(400, "response_format json_schema is not supported")
    fake_openai.script_chat(refusal, "Raise maxTotal.", "Again.")
    model = make_model(fake_openai, action_mode="json")

    assert model.complete(QUESTION, [LOOKUP]).message.content == "Raise maxTotal."
    assert model.complete(QUESTION, [LOOKUP]).message.content == "Again."
    sent = fake_openai.chat_requests
    assert "response_format" in sent[0]
    assert "response_format" not in sent[1] and "response_format" not in sent[2]
