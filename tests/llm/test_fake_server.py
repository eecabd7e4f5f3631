"""The fake OpenAI server is as strict as the real ones (else it would hide client bugs)."""

from __future__ import annotations

import base64
import json
import math
import struct
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from fakes.openai_server import (
    FakeOpenAIServer,
    error_reply,
    fake_embedding,
    tool_call_reply,
)
from fakes.real_transcripts import load_transcript

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup_knowledge", "arguments": '{"query": "disk"}'},
}
USER = {"role": "user", "content": "disk full?"}


def post(server: FakeOpenAIServer, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        server.base_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def chat(server: FakeOpenAIServer, messages: Any, **extra: Any) -> tuple[int, Any]:
    return post(server, "/chat/completions", {"model": "m", "messages": messages, **extra})


def test_null_content_with_tool_calls_is_rejected(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat("ok")
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "result"},
    ]
    status, body = chat(fake_openai, messages)
    assert status == 422
    assert "null" in body["error"]["message"]
    assert fake_openai.pending_chat_replies == 1  # a rejected request consumes no reply

    messages[1] = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    status, body = chat(fake_openai, messages)
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "ok"


def test_tool_call_id_must_match_an_earlier_call(fake_openai: FakeOpenAIServer) -> None:
    messages = [
        USER,
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_2", "content": "result"},
    ]
    status, body = chat(fake_openai, messages)
    assert status == 422
    assert "call_2" in body["error"]["message"]

    orphan = [USER, {"role": "tool", "tool_call_id": "call_1", "content": "result"}]
    assert chat(fake_openai, orphan)[0] == 422


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [USER]},  # no model
        {"model": "", "messages": [USER]},
        {"model": "m", "messages": {"role": "user", "content": "x"}},  # not a list
        {"model": "m", "messages": []},
        {"model": "m", "messages": [{"role": "robot", "content": "x"}]},  # unknown role
        {"model": "m", "messages": [{"role": "user", "content": None}]},
        {"model": "m", "messages": [USER], "tools": []},  # empty tools list
        {"model": "m", "messages": [USER], "temperature": 3},
        {"model": "m", "messages": [USER], "stream": "yes"},
        {"model": "m", "messages": [{"role": "assistant", "content": "", "tool_calls": [{}]}]},
    ],
)
def test_malformed_chat_requests_are_rejected(fake_openai: FakeOpenAIServer, body: Any) -> None:
    fake_openai.script_chat("never")
    status, payload = post(fake_openai, "/chat/completions", body)
    assert status == 422
    assert payload["error"]["message"]
    assert fake_openai.requests[-1] == body  # recorded even when rejected


def test_invalid_json_body_is_rejected(fake_openai: FakeOpenAIServer) -> None:
    status, payload = post(fake_openai, "/chat/completions", b"{not json")
    assert status == 400
    assert "not valid JSON" in payload["error"]["message"]


def test_unscripted_chat_fails_loudly(fake_openai: FakeOpenAIServer) -> None:
    status, payload = chat(fake_openai, [USER])
    assert status == 500
    assert "no scripted chat reply" in payload["error"]["message"]


def test_tool_call_reply_uses_real_format(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(tool_call_reply(("lookup_knowledge", '{"query": "x"}'), ids=["c9"]))
    status, body = chat(fake_openai, [USER])
    assert status == 200
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "c9",
            "type": "function",
            "function": {"name": "lookup_knowledge", "arguments": '{"query": "x"}'},
        }
    ]


def test_stream_is_real_chunk_format(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script_chat(tool_call_reply(("lookup_knowledge", '{"query": "disk full"}')))
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(model="m", messages=[USER], stream=True)  # type: ignore[list-item]
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    fragments = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert fragments[0].id and fragments[0].function.name == "lookup_knowledge"
    assert all(f.id is None and f.function.name is None for f in fragments[1:])
    assert len(fragments) > 2  # the arguments came in several pieces
    assert "".join(f.function.arguments or "" for f in fragments) == '{"query": "disk full"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_embeddings_deterministic_unit_norm(fake_openai: FakeOpenAIServer) -> None:
    status, body = post(fake_openai, "/embeddings", {"model": "e", "input": ["disk full", "磁盘"]})
    assert status == 200
    vectors = [d["embedding"] for d in body["data"]]
    assert [len(v) for v in vectors] == [64, 64]
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-9)
    assert vectors[0] == fake_embedding("disk full", 64)

    status, body = post(
        fake_openai, "/embeddings", {"model": "e", "input": "disk full", "dimensions": 8}
    )
    assert status == 200 and len(body["data"][0]["embedding"]) == 8


def test_embeddings_through_the_sdk_base64(fake_openai: FakeOpenAIServer) -> None:
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="x", max_retries=0)
    result = client.embeddings.create(model="e", input=["a disk", "disk full"], dimensions=16)
    assert fake_openai.embedding_requests[-1]["encoding_format"] in ("base64", "float", None)
    first = result.data[0].embedding
    assert len(first) == 16
    expected = fake_embedding("a disk", 16)
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(first, expected, strict=True))


def test_embeddings_base64_encoding(fake_openai: FakeOpenAIServer) -> None:
    body = {"model": "e", "input": "x", "encoding_format": "base64", "dimensions": 4}
    status, payload = post(fake_openai, "/embeddings", body)
    assert status == 200
    values = struct.unpack("<4f", base64.b64decode(payload["data"][0]["embedding"]))
    assert all(
        math.isclose(a, b, abs_tol=1e-6)
        for a, b in zip(values, fake_embedding("x", 4), strict=True)
    )


def test_embeddings_related_texts_are_closer(fake_openai: FakeOpenAIServer) -> None:
    def cos(a: str, b: str) -> float:
        return sum(
            x * y for x, y in zip(fake_embedding(a, 256), fake_embedding(b, 256), strict=True)
        )

    assert cos("disk full on node", "node disk full") > cos("disk full on node", "TiDB backup")


def test_embeddings_validation_and_scripted_errors(fake_openai: FakeOpenAIServer) -> None:
    assert post(fake_openai, "/embeddings", {"model": "e", "input": []})[0] == 422
    assert post(fake_openai, "/embeddings", {"model": "e", "input": [""]})[0] == 422
    assert post(fake_openai, "/embeddings", {"input": "x"})[0] == 422
    assert post(fake_openai, "/embeddings", {"model": "e", "input": "x", "dimensions": 0})[0] == 422
    fake_openai.script_embeddings(error_reply(503, "warming up"))
    status, payload = post(fake_openai, "/embeddings", {"model": "e", "input": "x"})
    assert status == 503 and payload["error"]["message"] == "warming up"
    assert post(fake_openai, "/embeddings", {"model": "e", "input": "x"})[0] == 200


def test_api_key_is_enforced_when_set() -> None:
    with FakeOpenAIServer(api_key="sk-right") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="m", messages=[USER])  # type: ignore[list-item]


Q1 = "支付回调超时，是不是 Redis 连接池的问题？"
TOOLS = [{"type": "function", "function": {"name": "lookup_knowledge", "parameters": {}}}]


def test_replay_matches_loosely_in_order_then_repeats(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.replay(load_transcript())
    planner = [
        {"role": "system", "content": "A rewritten planner prompt."},
        {"role": "user", "content": f"  {Q1} "},
    ]

    first = chat(fake_openai, planner)[1]["choices"][0]["message"]["content"]
    second = chat(fake_openai, planner)[1]
    third = chat(fake_openai, planner)[1]

    assert first.startswith("{&#34;need_retrieval&#34;")  # recording 0, as the model sent it
    assert second["choices"][0]["message"]["content"].startswith("```json")  # recording 1
    assert third["choices"][0]["message"] == second["choices"][0]["message"]  # used up: repeat
    assert second["usage"] == {"prompt_tokens": 2071, "completion_tokens": 59, "total_tokens": 2130}


def test_replay_prefers_the_recording_with_tools_and_falls_back_to_the_user_message(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.replay(load_transcript())
    executor = [{"role": "system", "content": "executor"}, {"role": "user", "content": Q1}]
    answer = chat(fake_openai, executor, tools=TOOLS)[1]["choices"][0]["message"]["content"]
    assert answer.startswith("基于已有信息")  # recording 2, the executor's

    after_lookup = [
        *executor,
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"found": true}'},
    ]
    status, body = chat(fake_openai, after_lookup, tools=TOOLS)
    assert status == 200 and body["choices"][0]["message"]["content"] == answer


def test_replay_is_strict_and_loud(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.replay(load_transcript())
    null_content = [
        {"role": "user", "content": Q1},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "result"},
    ]
    assert chat(fake_openai, null_content, tools=TOOLS)[0] == 422
    assert chat(fake_openai, [{"role": "user", "content": "an unrecorded question"}])[0] == 500


def test_replay_streams_and_scripts_come_first(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.replay(load_transcript())
    fake_openai.script_chat("scripted")
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="x", max_retries=0)
    messages: Any = [
        {"role": "user", "content": "Pod keeps restarting with exit code 137, what should I check?"}
    ]

    scripted = client.chat.completions.create(model="m", messages=messages)
    chunks = list(client.chat.completions.create(model="m", messages=messages, stream=True))

    assert scripted.choices[0].message.content == "scripted"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("```json") and '"infrastructure"' in text
