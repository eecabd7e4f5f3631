"""Chat model over any OpenAI-compatible chat-completions endpoint.

Tool calls a model writes as text instead of sending natively are read back as calls,
and ``llm.action_mode: json`` replaces native tools with the JSON action protocol of
:mod:`superbiz.llm.text_tools`, for endpoints without function calling.

The SDK's own retries are switched off and done here instead, so that what is retried,
how long we wait and what the caller finally sees are the same for every server and can
be tested without waiting. Every failure the caller sees is an :class:`LLMError`:
``LLMUnavailableError`` (unreachable, overloaded, timing out: retried first) or
``LLMResponseError`` (the server refused the request or answered nonsense: not retried).

The transport, its deadlines and the retry policy are in :mod:`superbiz.llm._transport`;
streamed replies are assembled in :mod:`superbiz.llm._stream`.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from superbiz.llm._stream import StreamAssembler, TextGate, new_call_id, read_usage
from superbiz.llm._transport import (
    BACKOFF_BASE_S,
    BACKOFF_CAP_S,
    DeadlineTransport,
    backoff_delay,
    describe_error,
    retry_after_s,
    retryable_status,
    server_message,
    turn_over,
)
from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    to_openai,
)
from superbiz.llm.text_tools import (
    TextCalls,
    action_messages,
    action_schema,
    parse_action,
    parse_text_calls,
)

__all__ = ["BACKOFF_BASE_S", "BACKOFF_CAP_S", "OpenAIChatModel", "backoff_delay"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


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
        sleep: Callable[[float], None] = deadline.pause,
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
            assembler = StreamAssembler()
            gate = TextGate(hold_all=self._json_actions(tools))
            yielded = False
            extra = {"stream_options": {"include_usage": True}} if self._stream_usage else {}
            try:
                # params are built per endpoint, so no overload of the SDK's signature fits
                chunks = self._client.chat.completions.create(  # type: ignore[call-overload]
                    **params, **extra, stream=True
                )
                with chunks:
                    for chunk in chunks:
                        deadline.check_cancelled()  # a stopped turn reads no more of it
                        piece = gate.feed(assembler.feed(chunk)) if tools else assembler.feed(chunk)
                        if piece:
                            yielded = True
                            yield TextDelta(piece)
                    assembler.check_complete(getattr(chunks.response, "request", None))
            except openai.APIStatusError as exc:
                if (
                    extra
                    and exc.status_code in (400, 422)
                    and "stream_options" in describe_error(exc)
                ):
                    logger.info("%s does not accept stream_options; retrying", self.base_url)
                    self._stream_usage = False
                    continue
                if exc.status_code in (400, 422) and self._refused_action_schema(
                    describe_error(exc), tools, response_format
                ):
                    params = self._params(messages, tools, response_format)
                    continue
                self._raise_unless_retryable(exc)
                last = exc
            except openai.APIError as exc:
                deadline.check_cancelled()  # a stopped turn's request, not a failure
                self._raise_unless_retryable(exc)
                if yielded:
                    raise LLMUnavailableError(
                        f"LLM endpoint {self.base_url} broke off the stream: {describe_error(exc)}"
                    ) from None
                last = exc
            except httpx2.TransportError as exc:  # raised while reading the stream's body
                deadline.check_cancelled()
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
            if attempt >= attempts or turn_over():
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
                deadline.check_cancelled()  # a stopped turn's request, not a failure
                self._raise_unless_retryable(exc)
                last = exc
            except ValueError as exc:  # a body that is not JSON
                raise LLMResponseError(
                    f"LLM endpoint {self.base_url} answered with a body that is not JSON: {exc}"
                ) from None
            if turn_over():
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
            if retryable_status(exc.status_code):
                return
            raise LLMResponseError(
                f"LLM endpoint {self.base_url} rejected the request "
                f"(HTTP {exc.status_code}): {server_message(exc)}"
            ) from None
        raise LLMResponseError(
            f"LLM endpoint {self.base_url} answered with an error: {describe_error(exc)}"
        ) from None

    def _wait(self, attempt: int, exc: BaseException, attempts: int) -> None:
        delay = backoff_delay(attempt, rng=self._rng)
        retry_after = retry_after_s(exc)
        if retry_after is not None:
            delay = max(delay, retry_after)
        logger.warning(
            "LLM endpoint %s failed (attempt %d/%d): %s; retrying in %.2f s",
            self.base_url,
            attempt + 1,
            attempts,
            describe_error(exc),
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
                f"{self.settings.turn_timeout_s:g} s): {describe_error(exc)}"
            )
        return LLMUnavailableError(
            f"LLM endpoint {self.base_url} {what} after {tries}: {describe_error(exc)}"
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
            call_id = getattr(tool_call, "id", None) or new_call_id()
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
            read_usage(getattr(completion, "usage", None)),
            choice.finish_reason,
        )
