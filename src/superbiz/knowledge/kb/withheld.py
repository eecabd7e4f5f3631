"""What of a session a reader may see: a turn that used anything the reader may not
read is withheld whole.

A session's turns were answered for whoever asked them, with what that reader could
read. Another reader of the session (a follow-up in a shared session, an admin reading
a trace) or the same one after losing a group must not meet those documents again:
not as history the model reads, not as evidence, not as a trace, not even as a title
or a domain's name. Withholding the whole turn (question, answer, its recorded calls)
leaves no count or gap that says what was there. Pure: the caller says what the reader
may read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from superbiz.knowledge.documents.domains import normalize_domain
from superbiz.knowledge.kb.access_rules import ReaderLimits
from superbiz.storage.chat import ChatMessage
from superbiz.storage.invocations import Invocation


def withheld_turns(messages: Iterable[ChatMessage], may_read: Callable[[str], bool]) -> set[int]:
    """The turns whose answer cited a document ``may_read`` refuses."""
    return {
        m.turn
        for m in messages
        if any(not may_read(str(item.get("path", ""))) for item in m.evidence)
    }


def readable_messages(
    messages: Sequence[ChatMessage], may_read: Callable[[str], bool]
) -> list[ChatMessage]:
    """``messages`` without the turns whose answer cited a document the reader may not
    read (the question of such a turn goes too: its answer is what it asked for)."""
    hidden = withheld_turns(messages, may_read)
    return [m for m in messages if m.turn not in hidden]


def _call_hidden(call: Invocation, limits: ReaderLimits) -> bool:
    details = call.retrieval_details or {}
    paths = [
        *details.get("shown", []),
        *details.get("already_retrieved", []),
        *details.get("withheld", []),
    ]
    domains = [call.domain, *details.get("retrieved_domains", [])]
    argument = call.arguments.get("domain")
    return (
        any(not limits.may_read(str(path)) for path in paths)
        or any(d in limits.hidden_domains for d in domains if d)
        or (isinstance(argument, str) and normalize_domain(argument) in limits.hidden_domains)
        or limits.names_hidden_domain(call.error)
        or any(title in limits.hidden_titles for title in details.get("l0_titles", []))
    )


def withheld_call_turns(calls: Iterable[Invocation], limits: ReaderLimits) -> set[int]:
    """The turns with a recorded call that names a document, title or domain the
    reader may not know of."""
    return {call.turn for call in calls if _call_hidden(call, limits)}


def visible_turns(
    messages: Sequence[ChatMessage], calls: Sequence[Invocation], limits: ReaderLimits
) -> Collection[int]:
    """The turns of a session (messages and recorded calls) a reader may see."""
    hidden = withheld_turns(messages, limits.may_read) | withheld_call_turns(calls, limits)
    return ({m.turn for m in messages} | {c.turn for c in calls}) - hidden
