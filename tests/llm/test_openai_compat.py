"""OpenAIChatModel against the strict fake server: parsing, streaming, retries, failures."""

from __future__ import annotations

import json
import random
import socket
import time

import pytest

from fakes.openai_server import (
    FakeOpenAIServer,
    drop_connection,
    early_end_reply,
    error_reply,
    length_reply,
    malformed_arguments_reply,
    no_choices_reply,
    sse_reply,
    text_reply,
    tool_call_reply,
)
from superbiz.config import LLMSettings
from superbiz.exceptions import ConfigError, LLMResponseError, LLMUnavailableError
from superbiz.llm import (
    AssistantMessage,
    ChatModel,
    ChatResponse,
    OpenAIChatModel,
    ResponseDone,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    backoff_delay,
)

LOOKUP = ToolSpec(
    name="lookup_knowledge",
    description="Search the knowledge base.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "domain": {"type": "string"}},
        "required": ["query"],
    },
)
QUESTION = [SystemMessage("You answer from the runbooks."), UserMessage("Disk is full, what now?")]


class Sleeps(list[float]):
    """An injected sleep that records the delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_model(
    base_url: str, *, max_retries: int = 3, sleeps: Sleeps | None = None, **settings: object
) -> OpenAIChatModel:
    llm = LLMSettings(base_url=base_url, model="fake-model", max_retries=max_retries, **settings)
    return OpenAIChatModel(llm, sleep=sleeps if sleeps is not None else Sleeps())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_plain_text_reply(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat("Free space with `du -sh`.")
    model = make_model(fake_openai.base_url, temperature=0.3)

    response = model.complete(QUESTION)

    assert isinstance(model, ChatModel)
    assert model.name == "fake-model"
    assert response.message == AssistantMessage("Free space with `du -sh`.")
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.completion_tokens > 0
    sent = fake_openai.chat_requests[-1]
    assert sent["model"] == "fake-model"
    assert sent["temperature"] == 0.3
    assert "tools" not in sent  # no tools offered: the key is absent, not []
    assert sent["messages"] == [
        {"role": "system", "content": "You answer from the runbooks."},
        {"role": "user", "content": "Disk is full, what now?"},
    ]
    auth = fake_openai.recorded[-1].headers.get("authorization")
    assert auth == "Bearer not-needed"


def test_api_key_is_sent() -> None:
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.script_chat("ok")
        model = make_model(server.base_url, api_key="sk-test")
        assert model.complete(QUESTION).message.content == "ok"


def test_tool_call_parsed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(
        tool_call_reply(
            ("lookup_knowledge", '{"query": "disk full", "domain": "ops"}'),
            ("lookup_knowledge", '{"query": "磁盘满"}'),
        )
    )
    response = make_model(fake_openai.base_url).complete(QUESTION, [LOOKUP])

    assert response.finish_reason == "tool_calls"
    assert response.message.content == ""  # null from the server becomes ""
    first, second = response.message.tool_calls
    assert first.name == "lookup_knowledge"
    assert first.arguments == {"query": "disk full", "domain": "ops"}
    assert first.error is None and first.id
    assert second.arguments == {"query": "磁盘满"}
    assert first.id != second.id
    sent = fake_openai.chat_requests[-1]
    assert sent["tools"] == [LOOKUP.to_openai()]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"query": "disk full', "not valid JSON"),
        ('["disk full"]', "must be a JSON object, got array"),
        ('"disk full"', "must be a JSON object, got string"),
    ],
)
def test_malformed_tool_arguments_give_an_error_not_an_exception(
    fake_openai: FakeOpenAIServer, raw: str, reason: str
) -> None:
    fake_openai.script_chat(malformed_arguments_reply("lookup_knowledge", raw))
    response = make_model(fake_openai.base_url).complete(QUESTION, [LOOKUP])

    (call,) = response.message.tool_calls
    assert call.name == "lookup_knowledge"
    assert call.arguments is None
    assert call.raw_arguments == raw
    assert call.error is not None and reason in call.error


def test_empty_arguments_mean_no_arguments() -> None:
    call = ToolCall.parse("c1", "list_domains", "")
    assert call.arguments == {} and call.error is None


def test_tool_call_round_trip_sends_empty_string_content(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(
        tool_call_reply(("lookup_knowledge", '{"query": "disk full"}')),
        malformed_arguments_reply(),
        "Run `du -sh /var/log` and rotate the logs.",
    )
    model = make_model(fake_openai.base_url)
    history = list(QUESTION)

    first = model.complete(history, [LOOKUP])
    (call,) = first.message.tool_calls
    history += [first.message, ToolMessage(call.id, call.name, "Runbook: disk-full.md ...")]
    second = model.complete(history, [LOOKUP])
    (bad,) = second.message.tool_calls
    assert bad.error is not None
    history += [second.message, ToolMessage(bad.id, bad.name, f"error: {bad.error}")]
    final = model.complete(history, [LOOKUP])

    assert final.message.content.startswith("Run `du -sh")
    sent = fake_openai.chat_requests[-1]["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": "",  # never null: llama.cpp answers 422 to null next to tool_calls
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": "lookup_knowledge", "arguments": '{"query": "disk full"}'},
            }
        ],
    }
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": call.id,
        "name": "lookup_knowledge",
        "content": "Runbook: disk-full.md ...",
    }
    # malformed arguments are not echoed back (servers that parse them would refuse)
    assert sent[4]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent[5]["tool_call_id"] == bad.id


def test_stream_text_deltas_and_final_response(fake_openai: FakeOpenAIServer) -> None:
    answer = "Free some space: rotate the logs, then check the volume."
    fake_openai.script_chat(answer)
    events = list(make_model(fake_openai.base_url).stream(QUESTION))

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3
    assert "".join(deltas) == answer
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.message == AssistantMessage(answer)
    assert done.response.finish_reason == "stop"
    assert done.response.usage is not None  # asked for with stream_options.include_usage
    sent = fake_openai.chat_requests[-1]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


def test_stream_tool_call_fragments_assembled(fake_openai: FakeOpenAIServer) -> None:
    args_a = '{"query": "disk full on /var", "domain": "ops"}'
    args_b = '{"query": "日志轮转"}'
    fake_openai.script_chat(
        tool_call_reply(("lookup_knowledge", args_a), ("lookup_knowledge", args_b), content="Hm.")
    )
    events = list(make_model(fake_openai.base_url).stream(QUESTION, [LOOKUP]))

    done = events[-1]
    assert isinstance(done, ResponseDone)
    message = done.response.message
    assert message.content == "Hm."
    assert [(c.name, c.raw_arguments) for c in message.tool_calls] == [
        ("lookup_knowledge", args_a),
        ("lookup_knowledge", args_b),
    ]
    assert message.tool_calls[0].arguments == json.loads(args_a)
    assert message.tool_calls[1].arguments == {"query": "日志轮转"}
    assert all(c.id.startswith("call_") for c in message.tool_calls)
    assert done.response.finish_reason == "tool_calls"


def test_stream_malformed_fragments_give_an_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(malformed_arguments_reply())
    events = list(make_model(fake_openai.base_url).stream(QUESTION, [LOOKUP]))
    done = events[-1]
    assert isinstance(done, ResponseDone)
    (call,) = done.response.message.tool_calls
    assert call.arguments is None and call.error


def test_stream_without_stream_options_support(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(400, "Unrecognized request argument: stream_options"), "hi")
    model = make_model(fake_openai.base_url, max_retries=0)

    events = list(model.stream(QUESTION))

    assert isinstance(events[-1], ResponseDone)
    assert events[-1].response.message.content == "hi"
    assert "stream_options" not in fake_openai.chat_requests[-1]


def test_500_then_200_succeeds_after_a_retry(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(500, "model is loading"), "ok")
    sleeps = Sleeps()

    response = make_model(fake_openai.base_url, sleeps=sleeps).complete(QUESTION)

    assert response.message.content == "ok"
    assert len(fake_openai.chat_requests) == 2
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5


def test_persistent_500_gives_unavailable_after_all_attempts(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.script_chat(*[error_reply(503, "overloaded")] * 5)
    sleeps = Sleeps()

    with pytest.raises(LLMUnavailableError) as info:
        make_model(fake_openai.base_url, max_retries=2, sleeps=sleeps).complete(QUESTION)

    assert len(fake_openai.chat_requests) == 3  # max_retries + 1
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] * 0.99
    message = str(info.value)
    assert fake_openai.base_url in message
    assert "3 attempts" in message and "503" in message and "overloaded" in message


def test_429_is_retried_and_retry_after_honoured(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(429, "rate limited", retry_after=2), "ok")
    sleeps = Sleeps()

    response = make_model(fake_openai.base_url, sleeps=sleeps).complete(QUESTION)

    assert response.message.content == "ok"
    assert len(fake_openai.chat_requests) == 2
    assert sleeps == [2.0]


def test_dropped_connection_is_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(drop_connection(), "ok")
    assert make_model(fake_openai.base_url).complete(QUESTION).message.content == "ok"


def test_timeout_is_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(text_reply("too late", delay_s=1.0), "in time")
    sleeps = Sleeps()
    model = make_model(fake_openai.base_url, sleeps=sleeps, timeout_s=0.2)

    assert model.complete(QUESTION).message.content == "in time"
    assert len(fake_openai.chat_requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(fake_openai: FakeOpenAIServer, status: int) -> None:
    fake_openai.script_chat(error_reply(status, "context length exceeded"), "never sent")
    sleeps = Sleeps()

    with pytest.raises(LLMResponseError) as info:
        make_model(fake_openai.base_url, sleeps=sleeps).complete(QUESTION)

    assert len(fake_openai.chat_requests) == 1
    assert sleeps == []
    assert f"HTTP {status}" in str(info.value)
    assert "context length exceeded" in str(info.value)


def test_plain_text_error_body_is_reported(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(400, body="model 'x' not found, try pulling it first"))
    with pytest.raises(LLMResponseError, match="try pulling it first"):
        make_model(fake_openai.base_url).complete(QUESTION)


def test_dead_endpoint_gives_a_clear_error_quickly() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    sleeps = Sleeps()
    started = time.monotonic()

    with pytest.raises(LLMUnavailableError) as info:
        make_model(base_url, max_retries=2, sleeps=sleeps).complete(QUESTION)

    assert time.monotonic() - started < 5
    assert len(sleeps) == 2
    message = str(info.value)
    assert base_url in message
    assert "refused" in message.lower()
    assert info.value.__cause__ is None  # the message says it all; no httpx trace chained


def test_dead_endpoint_while_streaming() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(LLMUnavailableError, match=r"127\.0\.0\.1"):
        list(make_model(base_url, max_retries=1).stream(QUESTION))


def test_stream_error_before_any_text_is_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(error_reply(502, "bad gateway"), text_reply("hello there"))
    events = list(make_model(fake_openai.base_url).stream(QUESTION))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    assert len(fake_openai.chat_requests) == 2


def test_stream_cut_after_text_is_not_replayed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(text_reply("a long answer that breaks", drop_after_chunks=3), "again")
    received: list[str] = []

    with pytest.raises(LLMUnavailableError, match="broke off"):
        for event in make_model(fake_openai.base_url).stream(QUESTION):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert received  # some text was shown ...
    assert len(fake_openai.chat_requests) == 1  # ... so it was not requested again


# -- replies that are not whole ------------------------------------------------------------


def test_an_answer_cut_by_the_token_limit_says_so(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(length_reply("Free some space: first rotate the"))
    response = make_model(fake_openai.base_url).complete(QUESTION)
    assert response.finish_reason == "length"
    assert response.message.content == "Free some space: first rotate the"


def test_a_streamed_answer_cut_by_the_token_limit_says_so(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(length_reply("Free some space: first rotate the"))
    done = list(make_model(fake_openai.base_url).stream(QUESTION))[-1]
    assert isinstance(done, ResponseDone) and done.response.finish_reason == "length"


def test_a_stream_ending_without_a_finish_reason_after_text_is_an_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    """The text was shown, so it is not asked again (that would repeat it): the caller
    gets the same error as for a connection that broke off, not a half answer."""
    fake_openai.script_chat(early_end_reply("Free some space: first rotate the"), "again")
    received: list[str] = []

    with pytest.raises(LLMUnavailableError) as info:
        for event in make_model(fake_openai.base_url).stream(QUESTION):
            assert not isinstance(event, ResponseDone)
            received.append(event.text)

    assert "".join(received) == "Free some space: first rotate the"
    message = str(info.value)
    assert "broke off the stream" in message and "finish reason" in message
    assert "\n" not in message
    assert len(fake_openai.chat_requests) == 1


def test_a_stream_ending_without_a_finish_reason_before_any_text_is_retried(
    fake_openai: FakeOpenAIServer,
) -> None:
    sleeps = Sleeps()
    fake_openai.script_chat(early_end_reply(""), "Rotate the logs.")
    events = list(make_model(fake_openai.base_url, sleeps=sleeps).stream(QUESTION))
    done = events[-1]
    assert isinstance(done, ResponseDone) and done.response.message.content == "Rotate the logs."
    assert len(fake_openai.chat_requests) == 2 and len(sleeps) == 1


def test_a_stream_ending_without_a_finish_reason_every_time_is_unavailable(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.script_chat(early_end_reply(""), early_end_reply(""))
    with pytest.raises(LLMUnavailableError, match=r"after 2 attempts.*finish reason"):
        list(make_model(fake_openai.base_url, max_retries=1).stream(QUESTION))


def test_no_choices_is_one_clear_line(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(no_choices_reply())
    model = make_model(fake_openai.base_url)
    with pytest.raises(LLMResponseError) as info:
        model.complete(QUESTION)
    assert str(info.value) == f"LLM endpoint {model.base_url} returned no choices"
    assert len(fake_openai.chat_requests) == 1  # an answer, not an outage: not retried


@pytest.mark.parametrize(
    "reply",
    [no_choices_reply(), sse_reply("[DONE]")],
    ids=["chunk-without-choices", "only-done"],
)
def test_a_stream_without_choices_is_the_same_error(
    fake_openai: FakeOpenAIServer, reply: object
) -> None:
    fake_openai.script_chat(reply)  # type: ignore[arg-type]
    model = make_model(fake_openai.base_url)
    with pytest.raises(LLMResponseError) as info:
        list(model.stream(QUESTION))
    assert str(info.value) == f"LLM endpoint {model.base_url} returned no choices"
    assert len(fake_openai.chat_requests) == 1


def test_response_format_is_passed(fake_openai: FakeOpenAIServer) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "action", "schema": {}}}
    fake_openai.script_chat('{"action": "answer"}')
    response = make_model(fake_openai.base_url).complete(QUESTION, response_format=schema)
    assert json.loads(response.message.content) == {"action": "answer"}
    assert fake_openai.chat_requests[-1]["response_format"] == schema


def test_missing_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        OpenAIChatModel(LLMSettings(base_url="http://127.0.0.1:1/v1"))


def test_backoff_is_exponential_capped_and_jittered() -> None:
    rng = random.Random(7)
    delays = [backoff_delay(a, rng=rng) for a in range(10)]
    for attempt, delay in enumerate(delays):
        step = min(8.0, 0.5 * 2**attempt)
        assert step / 2 <= delay <= step
    assert max(delays) <= 8.0
    assert len({round(d, 6) for d in delays}) == len(delays)  # jittered


def test_chat_response_is_a_value() -> None:
    response = ChatResponse(AssistantMessage("x"))
    assert response.usage is None and response.finish_reason is None
