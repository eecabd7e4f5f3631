"""Chat model over any OpenAI-compatible chat-completions endpoint.

Tool calls a model writes as text instead of sending natively are read back as calls,
and ``llm.action_mode: json`` replaces native tools with the JSON action protocol of
:mod:`superbiz.llm.text_tools`, for endpoints without function calling.

The SDK's own retries are switched off and done here instead, so that what is retried,
how long we wait and what the caller finally sees are the same for every server and can
be tested without waiting. Every failure the caller sees is an :class:`LLMError`:
``LLMUnavailableError`` (unreachable, overloaded, timing out: retried first) or
``LLMResponseError`` (the server refused the request or answered nonsense: not retried).
"""

from __future__ import annotations

import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx2
import openai

from superbiz.config import LLMSettings
from superbiz.exceptions import (
    ConfigError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from superbiz.llm import deadline
from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    to_openai,
)
from superbiz.llm.text_tools import (
    TOOL_CALL_TAG,
    TextCalls,
    action_messages,
    action_schema,
    parse_action,
    parse_text_calls,
)

__all__ = ["BACKOFF_BASE_S", "BACKOFF_CAP_S", "OpenAIChatModel", "backoff_delay"]

logger = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 30.0
"""A server's ``Retry-After`` is honoured up to this many seconds."""

_T = TypeVar("_T")


def backoff_delay(
    attempt: int,
    *,
    base: float = BACKOFF_BASE_S,
    cap: float = BACKOFF_CAP_S,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based).

    Exponential and capped, with "equal jitter" (between half and all of the step) so that
    clients failing together do not retry together, yet never retry at once.
    """
    step = min(cap, base * 2.0 ** max(0, attempt))
    jitter = rng.uniform(0, step / 2) if rng else random.uniform(0, step / 2)
    return step / 2 + jitter


def _retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _server_message(exc: openai.APIError) -> str:
    """The server's own explanation, whichever of the usual shapes it came in."""
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("message", "detail", "msg"):
                value = error.get(key)
                if isinstance(value, str) and value:
                    return value
        elif isinstance(error, str) and error:
            return error
        detail = body.get("detail")
        if detail:
            return str(detail)
        return str(dict(body))
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _describe(exc: BaseException) -> str:
    """One line naming the error and its root cause (e.g. ``Connection refused``)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, openai.APIStatusError):
        text = f"HTTP {exc.status_code}: {_server_message(exc)}"
    cause = exc.__cause__ or exc.__context__
    seen = {id(exc)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        first = str(cause).strip().split("\n", 1)[0]  # the message stays one line
        if first and first not in text:
            text += f" ({type(cause).__name__}: {first})"
            break
        cause = cause.__cause__ or cause.__context__
    return text


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or seconds < 0:
        return None
    return min(seconds, RETRY_AFTER_CAP_S)


class _DeadlineStream(httpx2.SyncByteStream):
    """A response body that ends with ``ReadTimeout`` once its request's deadline has
    passed, however steadily the server drips bytes (each read has its own timeout)."""

    def __init__(self, inner: httpx2.SyncByteStream, request: httpx2.Request, end: float) -> None:
        self.inner = inner
        self.request = request
        self.end = end

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.end:
                raise httpx2.ReadTimeout(
                    "the response did not finish within its deadline", request=self.request
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()


class DeadlineTransport(httpx2.HTTPTransport):
    """Every request ends within ``total_s`` (and within the turn's deadline): its
    connect and read timeouts are cut to what is left, and its body to the end time."""

    def __init__(self, total_s: float, connect_s: float) -> None:
        super().__init__()
        self.total_s = total_s
        self.connect_s = connect_s

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        left = self.total_s
        turn_left = deadline.remaining()
        if turn_left is not None:
            left = min(left, turn_left)
        if left <= 0:
            raise httpx2.ConnectTimeout("the turn's deadline has passed", request=request)
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            "connect": min(timeouts.get("connect") or left, self.connect_s, left),
            "read": min(timeouts.get("read") or left, left),
            "write": min(timeouts.get("write") or left, left),
            "pool": min(timeouts.get("pool") or left, left),
        }
        end = time.monotonic() + left
        response = super().handle_request(request)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _DeadlineStream(response.stream, request, end)
        return response


def _turn_over() -> bool:
    left = deadline.remaining()
    return left is not None and left <= 0


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamAssembler:
    """Turns chat.completion.chunk objects into text pieces and, at the end, one turn."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        #: a chunk carried the first choice (a stream of none is an empty reply)
        self.chose = False

    def feed(self, chunk: Any) -> str:
        usage = _usage(getattr(chunk, "usage", None))
        if usage is not None:
            self.usage = usage
        piece = ""
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            self.chose = True
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                piece += delta.content
            for fragment in delta.tool_calls or ():
                self._add_fragment(fragment)
        if piece:
            self.text.append(piece)
        return piece

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.index
        frag_id = fragment.id or ""
        if index is None:  # some servers omit it: a new id opens a new call
            known = {c.id for c in self.calls.values()}
            if not self.calls or (frag_id and frag_id not in known):
                index = len(self.calls)
            else:
                index = max(self.calls)
        call = self.calls.setdefault(index, _PartialCall())
        if frag_id and not call.id:
            call.id = frag_id
        function = getattr(fragment, "function", None)
        if function is None:
            return
        name = function.name or ""
        # The protocol sends the name once; tolerate servers that repeat it whole.
        if name and name != call.name:
            call.name += name
        if function.arguments:
            call.arguments.append(function.arguments)

    def check_complete(self, request: httpx2.Request | None) -> None:
        """Raise when the stream ended before the model finished: every server we target
        sends a ``finish_reason`` in its last choice chunk, so a stream without one was
        closed early (a proxy, a crashed worker) and its text is not the whole answer.
        Raised as the transport error it is, so it is retried or reported like one."""
        if self.chose and self.finish_reason is None:
            raise httpx2.RemoteProtocolError(
                "the stream ended without a finish reason (the answer is incomplete)",
                request=request,
            )

    def response(
        self, read: Callable[[str, tuple[ToolCall, ...]], AssistantMessage]
    ) -> ChatResponse:
        calls = tuple(
            ToolCall.parse(p.id or _new_call_id(), p.name, "".join(p.arguments))
            for _, p in sorted(self.calls.items())
        )
        return ChatResponse(read("".join(self.text), calls), self.usage, self.finish_reason)


class _TextGate:
    """Holds back streamed text that may turn out to be a tool call written as text.

    Text is shown as it comes, except: everything from a ``<tool_call>`` tag on (and a
    tail that could be the start of one), and a reply whose first characters open a JSON
    object or a code fence, which is shown only once it is known not to be a call.
    With ``hold_all`` (the JSON action protocol) nothing is shown before the end.
    """

    def __init__(self, *, hold_all: bool) -> None:
        self._text = ""
        self._shown = 0
        self._held = hold_all

    def feed(self, piece: str) -> str:
        self._text += piece
        if self._held:
            return ""
        if self._shown == 0:
            start = self._text.lstrip()
            if start.startswith(("{", "[", "`", TOOL_CALL_TAG)):
                self._held = True
                return ""
            if not start or TOOL_CALL_TAG.startswith(start):
                return ""  # not yet known
        tag = self._text.find(TOOL_CALL_TAG, self._shown)
        if tag >= 0:
            self._held = True
            return self._release(tag)
        end = len(self._text)
        for size in range(min(len(TOOL_CALL_TAG) - 1, end - self._shown), 0, -1):
            if TOOL_CALL_TAG.startswith(self._text[end - size :]):
                end -= size
                break
        return self._release(end)

    def _release(self, end: int) -> str:
        piece = self._text[self._shown : end]
        self._shown = max(self._shown, end)
        return piece

    def rest(self, content: str) -> str:
        """What remains to show of the final ``content`` once the turn is read."""
        shown = self._text[: self._shown]
        return content[len(shown) :] if content.startswith(shown) else ""


def _new_call_id() -> str:
    """An id for a tool call the server sent without one, so the reply can name it."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if prompt is None and completion is None:
        return None
    return Usage(int(prompt or 0), int(completion or 0))


class OpenAIChatModel:
    """A :class:`~superbiz.llm.base.ChatModel` over the official ``openai`` SDK.

    Works with OpenAI, DashScope/Qwen, DeepSeek, vLLM, Ollama and llama.cpp's server:
    only ``base_url``, ``api_key`` and ``model`` differ. ``sleep`` and ``rng`` are
    injectable so tests of the retry policy take no time.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        client: openai.OpenAI | None = None,
    ) -> None:
        if not settings.model:
            raise ConfigError("llm.model is not set: configure a chat model or use extractive mode")
        self.settings = settings
        self.name: str = settings.model
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = client or openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            timeout=httpx2.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
            max_retries=0,
            http_client=httpx2.Client(
                transport=DeadlineTransport(settings.timeout_s, settings.connect_timeout_s)
            ),
        )
        self._stream_usage = True  # ask for usage in streams until a server refuses it
        self._action_schema = True  # constrain JSON actions until a server refuses it

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------

    def _json_actions(self, tools: Sequence[ToolSpec]) -> bool:
        return bool(tools) and self.settings.action_mode == "json"

    def _params(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_format: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        if self._json_actions(tools):
            messages = action_messages(messages, tools)
            if response_format is None and self._action_schema:
                response_format = action_schema(tools)
            tools = ()
        params: dict[str, Any] = {
            "model": self.settings.model,
            "messages": to_openai(messages),
            "temperature": self.settings.temperature,
        }
        if tools:  # an empty "tools" list is a 400 on OpenAI itself
            params["tools"] = [tool.to_openai() for tool in tools]
        if response_format is not None:
            params["response_format"] = dict(response_format)
        return params

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        response_format: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """One model turn. ``response_format`` (e.g. a ``json_schema``) constrains the output."""
        deadline.check()
        params = self._params(messages, tools, response_format)
        try:
            completion = self._with_retries(lambda: self._client.chat.completions.create(**params))
        except LLMResponseError as exc:
            if not self._refused_action_schema(str(exc), tools, response_format):
                raise
            return self.complete(messages, tools)
        try:
            return self._parse_completion(completion, tools)
        except (AttributeError, TypeError, KeyError, IndexError) as exc:
            raise LLMResponseError(
                f"LLM endpoint {self.base_url} answered in an unexpected shape: {exc}"
            ) from None

    def _refused_action_schema(
        self, error: str, tools: Sequence[ToolSpec], response_format: object
    ) -> bool:
        """The server rejected the action step's ``response_format``: go on without it
        (the protocol is still in the prompt and the reply is parsed leniently)."""
        if response_format is not None or not self._json_actions(tools) or not self._action_schema:
            return False
        if "response_format" not in error and "json_schema" not in error:
            return False
        logger.info(
            "%s does not accept response_format; sending actions unconstrained", self.base_url
        )
        self._action_schema = False
        return True

    def _read(
        self, content: str, calls: tuple[ToolCall, ...], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        """The assistant turn, with tool calls written as text read as calls when the
        endpoint sent no native one."""
        if calls or not tools:
            return AssistantMessage(content, calls)
        names = {tool.name for tool in tools}
        if self._json_actions(tools):
            found: TextCalls | None = parse_action(content, names)
        else:
            found = parse_text_calls(content, names)
        if found is None:
            return AssistantMessage(content)
        return AssistantMessage(found.content, found.calls)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        response_format: Mapping[str, Any] | None = None,
    ) -> Iterator[StreamEvent]:
        """Text deltas as they arrive, then :class:`ResponseDone` with the whole turn.

        A failure before any text was yielded is retried like :meth:`complete`; after
        that a retry would repeat text the caller has already shown, so it is not. A
        stream that ends without a finish reason is such a failure (its text is not the
        whole answer); one without any choice is an empty reply, as in :meth:`complete`.
        """
        deadline.check()
        params = self._params(messages, tools, response_format)
        attempts = self.settings.max_retries + 1
        attempt = 0
        last: BaseException
        while True:
            assembler = _StreamAssembler()
            gate = _TextGate(hold_all=self._json_actions(tools))
            yielded = False
            extra = {"stream_options": {"include_usage": True}} if self._stream_usage else {}
            try:
                # params are built per endpoint, so no overload of the SDK's signature fits
                chunks = self._client.chat.completions.create(  # type: ignore[call-overload]
                    **params, **extra, stream=True
                )
                with chunks:
                    for chunk in chunks:
                        piece = gate.feed(assembler.feed(chunk)) if tools else assembler.feed(chunk)
                        if piece:
                            yielded = True
                            yield TextDelta(piece)
                    assembler.check_complete(getattr(chunks.response, "request", None))
            except openai.APIStatusError as exc:
                if extra and exc.status_code in (400, 422) and "stream_options" in _describe(exc):
                    logger.info("%s does not accept stream_options; retrying", self.base_url)
                    self._stream_usage = False
                    continue
                if exc.status_code in (400, 422) and self._refused_action_schema(
                    _describe(exc), tools, response_format
                ):
                    params = self._params(messages, tools, response_format)
                    continue
                self._raise_unless_retryable(exc)
                last = exc
            except openai.APIError as exc:
                self._raise_unless_retryable(exc)
                if yielded:
                    raise LLMUnavailableError(
                        f"LLM endpoint {self.base_url} broke off the stream: {_describe(exc)}"
                    ) from None
                last = exc
            except httpx2.TransportError as exc:  # raised while reading the stream's body
                if yielded:
                    raise self._unavailable(exc, attempt + 1, "broke off the stream") from None
                last = exc
            except (ValueError, AttributeError, TypeError) as exc:  # not JSON, or not a chunk
                raise LLMResponseError(
                    f"LLM endpoint {self.base_url} sent a malformed stream: {exc}"
                ) from None
            else:
                if not assembler.chose:  # only [DONE], or chunks without choices
                    raise self._no_choices()
                response = assembler.response(lambda text, calls: self._read(text, calls, tools))
                rest = gate.rest(response.message.content) if tools else ""
                if rest:
                    yield TextDelta(rest)
                yield ResponseDone(response)
                return
            attempt += 1
            if attempt >= attempts or _turn_over():
                raise self._unavailable(last, attempt)
            self._wait(attempt - 1, last, attempts)

    # -- retries ------------------------------------------------------------------------

    def _with_retries(self, call: Callable[[], _T]) -> _T:
        attempts = self.settings.max_retries + 1
        last: BaseException | None = None
        for attempt in range(attempts):
            try:
                return call()
            except openai.APIError as exc:
                self._raise_unless_retryable(exc)
                last = exc
            except ValueError as exc:  # a body that is not JSON
                raise LLMResponseError(
                    f"LLM endpoint {self.base_url} answered with a body that is not JSON: {exc}"
                ) from None
            if _turn_over():
                raise self._unavailable(last, attempt + 1)
            if attempt + 1 < attempts:
                self._wait(attempt, last, attempts)
        assert last is not None  # attempts >= 1
        raise self._unavailable(last, attempts)

    def _raise_unless_retryable(self, exc: openai.APIError) -> None:
        """Return when ``exc`` is worth another attempt; otherwise raise the caller's error."""
        if isinstance(exc, openai.APIConnectionError):  # includes timeouts
            return
        if isinstance(exc, openai.APIStatusError):
            if _retryable_status(exc.status_code):
                return
            raise LLMResponseError(
                f"LLM endpoint {self.base_url} rejected the request "
                f"(HTTP {exc.status_code}): {_server_message(exc)}"
            ) from None
        raise LLMResponseError(
            f"LLM endpoint {self.base_url} answered with an error: {_describe(exc)}"
        ) from None

    def _wait(self, attempt: int, exc: BaseException, attempts: int) -> None:
        delay = backoff_delay(attempt, rng=self._rng)
        retry_after = _retry_after(exc)
        if retry_after is not None:
            delay = max(delay, retry_after)
        logger.warning(
            "LLM endpoint %s failed (attempt %d/%d): %s; retrying in %.2f s",
            self.base_url,
            attempt + 1,
            attempts,
            _describe(exc),
            delay,
        )
        left = deadline.remaining()
        self._sleep(delay if left is None else max(0.0, min(delay, left)))

    def _unavailable(
        self, exc: BaseException, attempts: int, what: str = "is unavailable"
    ) -> LLMError:
        """The caller's error: :class:`LLMTimeoutError` when a deadline ended the call."""
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
            return LLMTimeoutError(
                f"LLM endpoint {self.base_url} did not answer in time after {tries} "
                f"(llm.timeout-s {self.settings.timeout_s:g} s, llm.turn-timeout-s "
                f"{self.settings.turn_timeout_s:g} s): {_describe(exc)}"
            )
        return LLMUnavailableError(
            f"LLM endpoint {self.base_url} {what} after {tries}: {_describe(exc)}"
        )

    # -- responses ----------------------------------------------------------------------

    def _no_choices(self) -> LLMResponseError:
        """A reply without an answer, streamed or not: one line, not the SDK's object
        (its repr is hundreds of characters of ``None`` fields)."""
        return LLMResponseError(f"LLM endpoint {self.base_url} returned no choices")

    def _parse_completion(self, completion: Any, tools: Sequence[ToolSpec]) -> ChatResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise self._no_choices()
        choice = choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for tool_call in message.tool_calls or ():
            call_id = getattr(tool_call, "id", None) or _new_call_id()
            function = getattr(tool_call, "function", None)
            if function is None:
                kind = getattr(tool_call, "type", "unknown")
                calls.append(
                    ToolCall(call_id, "", None, "", f"unsupported tool call type {kind!r}")
                )
                continue
            calls.append(ToolCall.parse(call_id, function.name or "", function.arguments))
        return ChatResponse(
            self._read(message.content or "", tuple(calls), tools),
            _usage(getattr(completion, "usage", None)),
            choice.finish_reason,
        )
