"""Behaviour profiles: deterministic simulators that play the LLM in benchmarks and tests.

They are not the product's model. Each reproduces a way real models misuse a lookup
tool, so the governed loop can be measured against the plain ReAct loop:

* ``obedient``: the extractive policy; stops when told;
* ``over_cautious``: re-asks with paraphrases until the tool is withheld;
* ``domain_hopper``: alternates between two domains until the tool is withheld;
* ``iss003_replay``: the 10 calls of the ISS-003 log (docs/design.md §5.4), in order,
  whatever it is told (its first call, to infrastructure, is its plan: the executor
  runs planned lookups);
* ``defiant``: calls the tool every step, even when it is not offered.

All answer with the extractive composition of what they retrieved.
"""

from __future__ import annotations

from collections.abc import Sequence

from superbiz._text import Language
from superbiz.agents.extractive import (
    ExtractiveChatModel,
    LookupArguments,
    TurnView,
    compose_answer,
)
from superbiz.agents.planner import Plan, PlannedDomain
from superbiz.llm.messages import AssistantMessage, ChatResponse, Message, ToolCall, ToolSpec
from superbiz.storage.invocations import TOOL_NAME

_PARAPHRASES: dict[Language, tuple[str, ...]] = {
    "en": (
        "{q}",
        "{q} details",
        "more about {q}",
        "{q} root cause",
        "how to fix {q}",
        "{q} troubleshooting steps",
        "{q} configuration",
        "{q} examples",
        "{q} best practices",
        "{q} explained",
        "{q} again",
    ),
    "zh": (
        "{q}",
        "{q} 详细说明",
        "{q} 的原因",
        "如何解决 {q}",
        "{q} 排查步骤",
        "{q} 相关配置",
        "{q} 示例",
        "{q} 注意事项",
        "{q} 最佳实践",
        "{q} 具体解释",
        "再查一次 {q}",
    ),
}


def paraphrase(question: str, language: Language, n: int) -> str:
    templates = _PARAPHRASES[language]
    return templates[n % len(templates)].format(q=question)


class Profile(ExtractiveChatModel):
    """A profile decides the next call; ``None`` answers."""

    name = "profile"
    #: profiles that call even when the tool is not offered
    ignores_withholding = False

    def scripted_plan(self, question: str) -> Plan | None:
        """The plan this profile replays, if it replays one (else the planner plans)."""
        return None

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        view = TurnView.of(messages, tools)
        if not view.tools_offered and not self.ignores_withholding:
            return ChatResponse(AssistantMessage(compose_answer(view)), None, "stop")
        arguments = self.next_call(view, messages)
        if arguments is None:
            return ChatResponse(AssistantMessage(compose_answer(view)), None, "stop")
        call = ToolCall.of(f"call_{next(self._ids)}", TOOL_NAME, arguments)
        # A defiant model may also write text next to its call; keep the answer ready.
        content = compose_answer(view) if not view.tools_offered else ""
        return ChatResponse(AssistantMessage(content, (call,)), None, "tool_calls")


class Obedient(Profile):
    name = "obedient"


class OverCautious(Profile):
    name = "over_cautious"

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> LookupArguments | None:
        return {"query": paraphrase(view.question, view.language, len(view.calls))}


class DomainHopper(Profile):
    """Alternates between the domain its first lookup landed in and another one."""

    name = "domain_hopper"

    def __init__(self, domains: Sequence[str]) -> None:
        super().__init__()
        self.domains = sorted(domains)

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> LookupArguments | None:
        query = paraphrase(view.question, view.language, len(view.calls))
        if not view.calls:
            return {"query": query}
        first = (view.results[0].get("primary") or {}).get("domain") if view.results else None
        home = first or (self.domains[0] if self.domains else None)
        other = next((d for d in self.domains if d != home), home)
        domain = other if len(view.calls) % 2 == 1 else home
        return {"query": query, "domain": domain} if domain else {"query": query}


# The ISS-003 log (docs/design.md §5.4): id=138 … 147.
ISS003_SCRIPT: tuple[tuple[str, int], ...] = (
    ("infrastructure", 0),
    ("infrastructure", 1),
    ("infrastructure", 2),
    ("api", 0),
    ("api", 1),
    ("infrastructure", 3),
    ("infrastructure", 4),
    ("infrastructure", 5),
    ("infrastructure", 6),
    ("api", 2),
)


class Iss003Replay(Profile):
    """Issues the ten calls of the ISS-003 log in order, whatever it is told."""

    name = "iss003_replay"
    ignores_withholding = True

    def scripted_plan(self, question: str) -> Plan:
        """The log's first call, which the executor now makes from the plan."""
        domain, _ = ISS003_SCRIPT[0]
        return Plan(True, (PlannedDomain(domain, question),))

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> LookupArguments | None:
        if len(view.calls) >= len(ISS003_SCRIPT):
            return None
        domain, variant = ISS003_SCRIPT[len(view.calls)]
        return {"query": paraphrase(view.question, view.language, variant), "domain": domain}


class Defiant(Profile):
    """Calls lookup every step, offered or not."""

    name = "defiant"
    ignores_withholding = True

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> LookupArguments | None:
        return {"query": paraphrase(view.question, view.language, len(view.calls))}


PROFILES = ("obedient", "over_cautious", "domain_hopper", "iss003_replay", "defiant")


def make_profile(name: str, domains: Sequence[str] = ()) -> Profile:
    match name:
        case "obedient":
            return Obedient()
        case "over_cautious":
            return OverCautious()
        case "domain_hopper":
            return DomainHopper(domains)
        case "iss003_replay":
            return Iss003Replay()
        case "defiant":
            return Defiant()
    raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
