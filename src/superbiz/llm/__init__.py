"""Chat-model clients: one small interface over the OpenAI chat-completions protocol.

Pure client code: nothing here knows about agents, governance or retrieval.
``OpenAIChatModel`` is imported on first use: the ``openai`` SDK takes half a second to
import, which commands that never talk to a model should not pay.
"""

from typing import TYPE_CHECKING, Any

from superbiz.llm.base import ChatModel, ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
    to_openai,
)

if TYPE_CHECKING:
    from superbiz.config import LLMSettings
    from superbiz.llm.openai_compat import OpenAIChatModel, backoff_delay

__all__ = [
    "AssistantMessage",
    "ChatModel",
    "ChatResponse",
    "Message",
    "OpenAIChatModel",
    "ResponseDone",
    "StreamEvent",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "backoff_delay",
    "make_chat_model",
    "to_openai",
]


def make_chat_model(settings: "LLMSettings") -> ChatModel | None:
    """The configured LLM, or ``None`` when none is configured (the agents' runtime then
    plays the extractive policy)."""
    if not settings.configured:
        return None
    from superbiz.llm.openai_compat import OpenAIChatModel

    return OpenAIChatModel(settings)


def __getattr__(name: str) -> Any:
    if name in ("OpenAIChatModel", "backoff_delay"):
        from superbiz.llm import openai_compat

        return getattr(openai_compat, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
