"""A scripted, strict, OpenAI-compatible HTTP server for tests (stdlib only).

It is as strict as the real servers we target, so a client bug that llama.cpp or OpenAI
would reject fails here too: an assistant message with ``content: null`` next to
``tool_calls``, an unknown role, a tool message answering no earlier tool call, a missing
``model``, ``messages`` not a list, an empty ``tools`` list are all answered with HTTP 422.

Usage::

    with FakeOpenAIServer() as server:
        server.script_chat("hello", tool_call_reply(("lookup", '{"q": "x"}')))
        ...  # point a client at server.base_url
        server.chat_requests[-1]["messages"]

Chat replies are consumed in order, one per ``/v1/chat/completions`` request (rejected
requests consume nothing). With no reply scripted the server answers HTTP 500, which
makes a forgotten script fail loudly. Embeddings are computed unless an error is scripted.

Replay mode answers from recordings of a real model (anything with ``request``,
``status`` and ``response``, e.g. ``fakes.real_transcripts.load_transcript()``) once the
script is empty::

    server.replay(load_transcript())

Each request gets the response recorded for the request that matches it loosely: the
same last user-or-tool message (else the same last user message), preferring one that
offered tools the same way, each recording used once in order and the last one again
when they are used up. System prompts are not compared, so rewritten prompts still
replay; a request that matches nothing is answered HTTP 500.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

__all__ = [
    "DropConnection",
    "ErrorReply",
    "FakeOpenAIServer",
    "NoChoicesReply",
    "RecordedRequest",
    "Recording",
    "TextReply",
    "ToolCallReply",
    "drop_connection",
    "early_end_reply",
    "error_reply",
    "fake_embedding",
    "length_reply",
    "malformed_arguments_reply",
    "no_choices_reply",
    "sse_reply",
    "text_reply",
    "tool_call_reply",
]

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


# -- scripted replies ------------------------------------------------------------------


@dataclass(frozen=True)
class TextReply:
    """A plain assistant answer.

    ``drop_after_chunks`` cuts a stream after that many chunks (the connection breaks);
    ``ends_early`` ends a stream cleanly after its text, with no finish chunk and no
    ``[DONE]`` (a proxy or worker that closed it before the model finished); ``delay_s``
    waits before answering (to make a client time out). ``finish_reason="length"`` is a
    model that hit its output token limit.
    """

    content: str
    finish_reason: str | None = "stop"
    drop_after_chunks: int | None = None
    ends_early: bool = False
    delay_s: float = 0.0
    usage: dict[str, int] | None = None  # recorded usage; computed when None


@dataclass(frozen=True)
class ToolCallReply:
    """An assistant turn asking for tools: ``(name, arguments string)`` pairs, sent verbatim."""

    calls: tuple[tuple[str, str], ...]
    content: str | None = None  # real servers send null content with tool calls
    ids: tuple[str, ...] | None = None
    finish_reason: str = "tool_calls"
    usage: dict[str, int] | None = None  # recorded usage; computed when None


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error; ``body`` defaults to the OpenAI error shape around ``message``."""

    status: int
    message: str = "scripted error"
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NoChoicesReply:
    """A 200 whose ``choices`` list is empty (seen from overloaded or misconfigured
    proxies); streamed: one chunk without choices, then ``[DONE]``."""


@dataclass(frozen=True)
class DropConnection:
    """Close the connection without answering (a crashed or restarting server)."""


@dataclass(frozen=True)
class RawReply:
    """``body`` sent as it is, for a stream too: not JSON, or JSON of the wrong shape.

    ``drip_s`` sends it one byte at a time with that pause before each (a server that
    keeps every read alive but never finishes); ``hang_s`` waits that long after the
    headers before the first byte.
    """

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    drip_s: float = 0.0
    hang_s: float = 0.0


Reply = TextReply | ToolCallReply | ErrorReply | DropConnection | RawReply | NoChoicesReply


def text_reply(
    content: str, *, drop_after_chunks: int | None = None, delay_s: float = 0.0
) -> TextReply:
    return TextReply(content, drop_after_chunks=drop_after_chunks, delay_s=delay_s)


def length_reply(content: str) -> TextReply:
    """An answer the model stopped because it reached its output token limit."""
    return TextReply(content, finish_reason="length")


def early_end_reply(content: str) -> TextReply:
    """Streamed: ``content``, then the stream ends with no finish reason and no ``[DONE]``."""
    return TextReply(content, ends_early=True)


def no_choices_reply() -> NoChoicesReply:
    return NoChoicesReply()


def sse_reply(*events: Any) -> RawReply:
    """A 200 event stream sent as it is: each event a JSON object or a raw string
    (``"[DONE]"``), whatever the request asked for."""
    body = "".join(
        f"data: {e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)}\n\n"
        for e in events
    )
    return RawReply(body.encode("utf-8"), content_type="text/event-stream")


def tool_call_reply(
    *calls: tuple[str, str], content: str | None = None, ids: Sequence[str] | None = None
) -> ToolCallReply:
    return ToolCallReply(tuple(calls), content, tuple(ids) if ids is not None else None)


def malformed_arguments_reply(
    name: str = "lookup_knowledge", raw_arguments: str = '{"query": "disk full'
) -> ToolCallReply:
    """A tool call whose arguments are not valid JSON, as small local models send."""
    return ToolCallReply(((name, raw_arguments),))


def error_reply(
    status: int,
    message: str = "scripted error",
    *,
    body: Any = None,
    retry_after: float | None = None,
) -> ErrorReply:
    headers = (("Retry-After", f"{retry_after:g}"),) if retry_after is not None else ()
    return ErrorReply(status, message, body, headers)


def drop_connection() -> DropConnection:
    return DropConnection()


def garbage_reply(body: bytes = b"<html>502 Bad Gateway</html>", **kwargs: Any) -> RawReply:
    """A 200 whose body is not what the protocol promises."""
    return RawReply(body, **kwargs)


def slow_stream_reply(paragraphs: int, *, every_s: float) -> RawReply:
    """A streamed answer of ``paragraphs`` chunks (``第 n 段。``), sent one byte every
    ``every_s`` seconds: a turn that is still streaming when a client stops it."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fake-model"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"content": f"第 {n} 段。\n\n"}}]}
        for n in range(1, paragraphs + 1)
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks)
    return RawReply(
        (body + "data: [DONE]\n\n").encode(), content_type="text/event-stream", drip_s=every_s
    )


def drip_reply(content: str = "a slow answer", *, every_s: float = 0.2) -> RawReply:
    """A valid completion sent one byte every ``every_s`` seconds."""
    body = {
        "id": "chatcmpl-drip",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    return RawReply(json.dumps(body).encode(), drip_s=every_s)


def hang_reply(seconds: float) -> RawReply:
    """Headers, then nothing for ``seconds`` (a stuck upstream), then a valid answer."""
    return RawReply(drip_reply("late").body, hang_s=seconds)


# -- replayed transcripts --------------------------------------------------------------


class Recording(Protocol):
    """One recorded exchange with a real server (``fakes.real_transcripts.Exchange``)."""

    @property
    def request(self) -> dict[str, Any]: ...

    @property
    def status(self) -> int: ...

    @property
    def response(self) -> Any: ...


def _normalised(value: Any) -> str:
    return " ".join(value.split()).casefold() if isinstance(value, str) else ""


def _last_content(messages: Any, roles: tuple[str, ...]) -> str:
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") in roles:
            return _normalised(message.get("content"))
    return ""


def _as_reply(recording: Recording) -> Reply:
    """The recorded response as a reply this server can send, streamed or not."""
    body = recording.response
    if recording.status != 200:
        message = str(body.get("error", body)) if isinstance(body, dict) else str(body)
        return ErrorReply(recording.status, message, body)
    choice = body["choices"][0]
    message = choice["message"]
    usage = body.get("usage")
    finish = choice.get("finish_reason") or "stop"
    calls = message.get("tool_calls") or []
    if calls:
        pairs = tuple((c["function"]["name"], c["function"]["arguments"]) for c in calls)
        ids = tuple(c["id"] for c in calls)
        return ToolCallReply(pairs, message.get("content"), ids, finish, usage)
    return TextReply(message.get("content") or "", finish, usage=usage)


class _Replay:
    """Chooses the recording that answers a request (see the module docstring)."""

    def __init__(self, recordings: Sequence[Recording]) -> None:
        self.recordings = list(recordings)
        self.used: set[int] = set()

    def answer(self, body: dict[str, Any]) -> Reply | None:
        messages = body.get("messages")
        offered = bool(body.get("tools"))
        keys = (
            (_last_content(messages, ("user", "tool")), ("user", "tool")),
            (_last_content(messages, ("user",)), ("user",)),
        )
        for key, roles in keys:
            matching = [
                i
                for i, r in enumerate(self.recordings)
                if key and _last_content(r.request.get("messages"), roles) == key
            ]
            same_tools = [
                i for i in matching if bool(self.recordings[i].request.get("tools")) == offered
            ]
            candidates = same_tools or matching
            if candidates:
                fresh = [i for i in candidates if i not in self.used]
                chosen = fresh[0] if fresh else candidates[-1]
                self.used.add(chosen)
                return _as_reply(self.recordings[chosen])
        return None


# -- embeddings ------------------------------------------------------------------------

_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")


@lru_cache(maxsize=65536)
def _token_vector(token: str, dim: int) -> tuple[float, ...]:
    seed = int.from_bytes(hashlib.sha256(token.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    return tuple(rng.gauss(0.0, 1.0) for _ in range(dim))


def fake_embedding(text: str, dim: int) -> list[float]:
    """A deterministic unit vector: the sum of hashed token vectors (CJK: per character).

    Texts sharing words are close and identical texts are identical, so retrieval code
    can be tested on meaningful neighbours; an empty text hashes as a whole.
    """
    tokens = _TOKEN.findall(text.casefold()) or [f"\x00{text}"]
    vector = [0.0] * dim
    for token in tokens:
        for i, value in enumerate(_token_vector(token, dim)):
            vector[i] += value
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


# -- the server ------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0  # the status answered (0: connection dropped)
    #: a dripped reply: every byte was sent, or the client closed the connection first
    sent_all: bool = False
    abandoned: bool = False


class _Reject(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


@dataclass
class _State:
    chat_script: deque[Reply] = field(default_factory=deque)
    embedding_script: deque[ErrorReply | DropConnection] = field(default_factory=deque)
    replay: _Replay | None = None
    recorded: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (a reset keep-alive connection) are normal; others are not."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    """The fake server on 127.0.0.1 (a free port), in a background thread.

    ``api_key``: when set, requests without ``Authorization: Bearer <api_key>`` get 401.
    ``embedding_dim``: the vector size when the request does not ask for ``dimensions``.
    ``port``: the port to listen on (default: a free one).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        embedding_dim: int = 64,
        stream_chunk_chars: int = 4,
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.requested_port = port
        self.embedding_dim = embedding_dim
        self.stream_chunk_chars = max(1, stream_chunk_chars)
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._httpd = _QuietHTTPServer(("127.0.0.1", self.requested_port), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting

    def script_chat(self, *replies: Reply | str) -> None:
        """Queue chat replies; a plain string is a text reply."""
        with self._state.lock:
            for reply in replies:
                self._state.chat_script.append(
                    TextReply(reply) if isinstance(reply, str) else reply
                )

    def replay(self, recordings: Sequence[Recording]) -> None:
        """Answer chat requests from these recordings once the script is empty."""
        with self._state.lock:
            self._state.replay = _Replay(recordings)

    def script_embeddings(self, *replies: ErrorReply | DropConnection) -> None:
        """Queue failures for the next embedding requests (then it computes vectors again)."""
        with self._state.lock:
            self._state.embedding_script.extend(replies)

    @property
    def pending_chat_replies(self) -> int:
        with self._state.lock:
            return len(self._state.chat_script)

    # what was received

    @property
    def recorded(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.recorded)

    @property
    def requests(self) -> list[Any]:
        """Every request body received, in order (rejected ones included)."""
        return [r.body for r in self.recorded]

    @property
    def chat_requests(self) -> list[Any]:
        return [r.body for r in self.recorded if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[Any]:
        return [r.body for r in self.recorded if r.path.endswith("/embeddings")]

    # internals used by the handler

    def _next_id(self) -> int:
        with self._state.lock:
            self._state.counter += 1
            return self._state.counter

    def _record(self, request: RecordedRequest) -> None:
        with self._state.lock:
            self._state.recorded.append(request)

    def _pop_chat(self, body: dict[str, Any]) -> Reply | None:
        with self._state.lock:
            if self._state.chat_script:
                return self._state.chat_script.popleft()
            return self._state.replay.answer(body) if self._state.replay else None

    def _pop_embedding(self) -> ErrorReply | DropConnection | None:
        with self._state.lock:
            script = self._state.embedding_script
            return script.popleft() if script else None


# -- validation (as strict as the real servers) ----------------------------------------


def _validate_chat(body: Any) -> None:
    if not isinstance(body, dict):
        raise _Reject(422, "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _Reject(422, "'model' is required and must be a non-empty string", "model")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _Reject(422, "'messages' must be a list", "messages")
    if not messages:
        raise _Reject(422, "'messages' must not be empty", "messages")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise _Reject(422, "'stream' must be a boolean", "stream")
    temperature = body.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        raise _Reject(422, "'temperature' must be a number between 0 and 2", "temperature")
    if "tools" in body:
        _validate_tools(body["tools"])
    response_format = body.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict)
        or response_format.get("type") not in ("text", "json_object", "json_schema")
    ):
        raise _Reject(422, "'response_format.type' must be text, json_object or json_schema")
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        _validate_message(i, message, open_calls)


def _validate_tools(tools: Any) -> None:
    if not isinstance(tools, list) or not tools:
        raise _Reject(422, "'tools' must be a non-empty list when present", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not function["name"]
        ):
            raise _Reject(422, f"tools[{i}] must be {{type: function, function: {{name, ...}}}}")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise _Reject(422, f"tools[{i}].function.parameters must be a JSON schema object")


def _is_content(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(part, dict) for part in value)
    )


def _validate_message(i: int, message: Any, open_calls: set[str]) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        raise _Reject(422, f"{where} must be an object")
    role = message.get("role")
    if role not in KNOWN_ROLES:
        raise _Reject(422, f"{where}: unknown role {role!r}")
    content = message.get("content")
    if role in ("system", "developer", "user"):
        if not _is_content(content):
            raise _Reject(422, f"{where}: 'content' must be a string or a list of parts")
        return
    if role == "assistant":
        tool_calls = message.get("tool_calls")
        if tool_calls:
            if content is None:  # what llama.cpp's server answers with 422
                raise _Reject(
                    422, f"{where}: assistant 'content' must be a string, not null, with tool_calls"
                )
            if not isinstance(tool_calls, list):
                raise _Reject(422, f"{where}: 'tool_calls' must be a list")
            for j, call in enumerate(tool_calls):
                _validate_tool_call(f"{where}.tool_calls[{j}]", call)
                open_calls.add(call["id"])
        if not _is_content(content):
            raise _Reject(422, f"{where}: assistant 'content' must be a string")
        return
    # role == "tool"
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or call_id not in open_calls:
        raise _Reject(
            422, f"{where}: tool_call_id {call_id!r} does not match an earlier assistant tool call"
        )
    if not _is_content(content):
        raise _Reject(422, f"{where}: tool 'content' must be a string")


def _validate_tool_call(where: str, call: Any) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
        raise _Reject(422, f"{where}: 'id' must be a non-empty string")
    if call.get("type") != "function" or not isinstance(function, dict):
        raise _Reject(422, f"{where}: must be {{type: function, function: {{...}}}}")
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise _Reject(422, f"{where}: 'function.name' must be a non-empty string")
    if not isinstance(function.get("arguments"), str):
        raise _Reject(422, f"{where}: 'function.arguments' must be a string")


def _validate_embeddings(body: Any) -> tuple[list[str], int, str]:
    if not isinstance(body, dict):
        raise _Reject(422, "the request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _Reject(422, "'model' is required and must be a non-empty string", "model")
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts:
        raise _Reject(422, "'input' must be a string or a non-empty list of strings", "input")
    for text in texts:
        if not isinstance(text, str) or not text:
            raise _Reject(422, "every 'input' must be a non-empty string", "input")
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
    ):
        raise _Reject(422, "'dimensions' must be a positive integer", "dimensions")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise _Reject(422, "'encoding_format' must be float or base64", "encoding_format")
    return texts, dimensions or 0, encoding


# -- payloads --------------------------------------------------------------------------


def _count_tokens(value: Any) -> int:
    if isinstance(value, str):
        return len(_TOKEN.findall(value))
    if isinstance(value, list):
        return sum(_count_tokens(v) for v in value)
    if isinstance(value, dict):
        return sum(_count_tokens(v) for v in value.values())
    return 0


def _usage(body: dict[str, Any], reply: TextReply | ToolCallReply) -> dict[str, int]:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt = _count_tokens(body.get("messages")) + 1
    if isinstance(reply, TextReply):
        completion = _count_tokens(reply.content) + 1
    else:
        completion = sum(_count_tokens(n) + _count_tokens(a) for n, a in reply.calls) + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _call_ids(reply: ToolCallReply, n: int) -> list[str]:
    if reply.ids is not None:
        return list(reply.ids)
    return [f"call_{n:04d}_{i}" for i in range(len(reply.calls))]


def _completion(body: dict[str, Any], reply: TextReply | ToolCallReply, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(reply, TextReply):
        message["content"] = reply.content
    else:
        message["content"] = reply.content
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, (name, args) in zip(_call_ids(reply, n), reply.calls, strict=True)
        ]
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": _usage(body, reply),
    }


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _chunks(
    body: dict[str, Any], reply: TextReply | ToolCallReply, n: int, size: int
) -> Iterator[dict[str, Any]]:
    """The reply as chat.completion.chunk objects, as OpenAI streams them."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body["model"],
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            ],
        }
        if include_usage:
            out["usage"] = None
        return out

    yield chunk({"role": "assistant", "content": ""})
    content = reply.content if isinstance(reply, TextReply) else (reply.content or "")
    for piece in _split(content, size):
        yield chunk({"content": piece})
    if isinstance(reply, ToolCallReply):
        for index, (cid, (name, args)) in enumerate(
            zip(_call_ids(reply, n), reply.calls, strict=True)
        ):
            first = {"index": index, "id": cid, "type": "function"}
            yield chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
            for piece in _split(args, size):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if isinstance(reply, TextReply) and reply.ends_early:
        return
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(body, reply)}


def _error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        # plumbing

        def _send_json(
            self,
            status: int,
            payload: Any,
            headers: Sequence[tuple[str, str]] = (),
            record: RecordedRequest | None = None,
        ) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            if record is not None:
                record.status = status

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _headers(self) -> dict[str, str]:
            return {name.lower(): value for name, value in self.headers.items()}

        def _read_body(self) -> tuple[Any, bool]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw.decode("utf-8")) if raw else None, True
            except (UnicodeDecodeError, ValueError):
                return raw.decode("utf-8", "replace"), False

        def _authorised(self) -> bool:
            if server.api_key is None:
                return True
            return self.headers.get("Authorization") == f"Bearer {server.api_key}"

        # routes

        def do_GET(self) -> None:
            record = RecordedRequest("GET", self.path, self._headers(), None)
            server._record(record)
            if self.path.rstrip("/") == "/v1/models":
                data = [{"id": "fake-model", "object": "model", "owned_by": "fake"}]
                self._send_json(200, {"object": "list", "data": data}, record=record)
            else:
                self._send_json(404, _error_body(404, f"no route {self.path}"), record=record)

        def do_POST(self) -> None:
            body, is_json = self._read_body()
            record = RecordedRequest("POST", self.path, self._headers(), body)
            server._record(record)
            path = self.path.split("?", 1)[0].rstrip("/")
            try:
                if not self._authorised():
                    raise _Reject(401, "Incorrect API key provided")
                if not is_json:
                    raise _Reject(400, "the request body is not valid JSON")
                if path == "/v1/chat/completions":
                    self._chat(body, record)
                elif path == "/v1/embeddings":
                    self._embeddings(body, record)
                else:
                    raise _Reject(404, f"no route {self.path}")
            except _Reject as exc:
                payload = _error_body(exc.status, exc.message, exc.param)
                self._send_json(exc.status, payload, record=record)

        def _scripted_error(self, reply: ErrorReply, record: RecordedRequest) -> None:
            payload = (
                reply.body if reply.body is not None else _error_body(reply.status, reply.message)
            )
            if isinstance(payload, str):
                data = payload.encode("utf-8")
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                record.status = reply.status
            else:
                self._send_json(reply.status, payload, reply.headers, record)

        def _chat(self, body: Any, record: RecordedRequest) -> None:
            _validate_chat(body)
            reply = server._pop_chat(body)
            n = server._next_id()
            if reply is None:
                raise _Reject(500, "fake server: no scripted chat reply left (nor a recording)")
            if isinstance(reply, DropConnection):
                self._drop()
                return
            if isinstance(reply, ErrorReply):
                self._scripted_error(reply, record)
                return
            if isinstance(reply, RawReply):
                self._raw(reply, record)
                return
            if isinstance(reply, NoChoicesReply):
                self._no_choices(body, n, record)
                return
            if isinstance(reply, TextReply) and reply.delay_s:
                time.sleep(reply.delay_s)
            if body.get("stream"):
                self._stream(body, reply, n, record)
            else:
                self._send_json(200, _completion(body, reply, n), record=record)

        def _raw(self, reply: RawReply, record: RecordedRequest) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.flush()
            record.status = reply.status
            time.sleep(reply.hang_s)
            if not reply.drip_s:
                self.wfile.write(reply.body)
                return
            for i in range(len(reply.body)):
                time.sleep(reply.drip_s)
                try:
                    self.wfile.write(reply.body[i : i + 1])
                    self.wfile.flush()
                except OSError:  # the client stopped reading and closed the connection
                    record.abandoned = True
                    return
            record.sent_all = True

        def _stream(
            self,
            body: dict[str, Any],
            reply: TextReply | ToolCallReply,
            n: int,
            record: RecordedRequest,
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            record.status = 200
            drop_after = reply.drop_after_chunks if isinstance(reply, TextReply) else None
            for sent, chunk in enumerate(_chunks(body, reply, n, server.stream_chunk_chars)):
                if drop_after is not None and sent >= drop_after:
                    self._drop()
                    return
                self._write_chunk(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
            if not (isinstance(reply, TextReply) and reply.ends_early):
                self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")

        def _no_choices(self, body: dict[str, Any], n: int, record: RecordedRequest) -> None:
            payload = {
                "id": f"chatcmpl-fake-{n}",
                "object": "chat.completion.chunk" if body.get("stream") else "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [],
            }
            if not body.get("stream"):
                self._send_json(200, payload, record=record)
                return
            events = f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Content-Length", str(len(events)))
            self.end_headers()
            self.wfile.write(events)
            record.status = 200

        def _embeddings(self, body: Any, record: RecordedRequest) -> None:
            texts, dimensions, encoding = _validate_embeddings(body)
            reply = server._pop_embedding()
            if isinstance(reply, DropConnection):
                self._drop()
                return
            if isinstance(reply, ErrorReply):
                self._scripted_error(reply, record)
                return
            dim = dimensions or server.embedding_dim
            data = []
            for index, text in enumerate(texts):
                vector = fake_embedding(text, dim)
                embedding: Any = vector
                if encoding == "base64":
                    packed = struct.pack(f"<{dim}f", *vector)
                    embedding = base64.b64encode(packed).decode("ascii")
                data.append({"object": "embedding", "index": index, "embedding": embedding})
            tokens = sum(_count_tokens(t) for t in texts)
            payload = {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
            self._send_json(200, payload, record=record)

    return Handler
