"""Settings of a chat turn: the ``llm``, the ``governance`` matrix, the ``planner``,
``chat`` history and the session backend, each with its ``advanced`` keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from superbiz.config._section import _Section


class SessionSettings(_Section):
    """Where action memory lives: ``sql`` (default, survives between CLI commands)
    or ``memory`` (one process)."""

    backend: Literal["sql", "memory"] = "sql"
    """Internal: where action memory lives: `sql` (the relational store; survives between CLI
    commands and is shared by replicas) or `memory` (one process)."""


class LLMSettings(_Section):
    """An OpenAI-compatible chat-completions endpoint; no ``model`` means extractive mode.

    ``timeout_s`` is the deadline of one request, from connecting to its last byte (a
    server that drips bytes cannot extend it); ``connect_timeout_s`` bounds the connect;
    ``turn_timeout_s`` bounds every model call of one chat turn together, retries included.
    """

    base_url: str | None = None
    """The OpenAI-compatible chat-completions endpoint (DashScope, DeepSeek, OpenAI, vLLM, Ollama,
    llama.cpp …)."""
    api_key: str | None = None
    """The endpoint's API key."""
    model: str | None = None
    """The model name; unset: no model at all, the extractive mode."""
    timeout_s: float = Field(60.0, gt=0)
    """Seconds one request may take, from connecting to its last byte (a server that drips bytes
    cannot extend it)."""
    connect_timeout_s: float = Field(10.0, gt=0)
    """Seconds connecting may take."""
    turn_timeout_s: float = Field(180.0, gt=0)
    """Seconds every model call of one chat turn may take together, retries included."""
    max_retries: int = Field(3, ge=0)
    """Retries of a request that failed with a 5xx, a 408 or 429, or a broken connection."""
    temperature: float = Field(0.2, ge=0, le=2)
    """The sampling temperature sent with every request."""
    action_mode: Literal["tools", "json"] = "tools"
    """`tools`: native tool calls; `json`: a JSON action step, for endpoints (and small models)
    without reliable tool calling."""

    @property
    def configured(self) -> bool:
        return bool(self.model)


class GovernanceSettings(_Section):
    """The quality × water-level decision matrix (docs/design.md §5): on or off, and the
    hard step cap of a turn."""

    enabled: bool = True
    """`false`: the plain ReAct loop, no governor (a baseline to compare with)."""
    max_steps: int = Field(10, ge=1)
    """The hard cap of executor steps in one turn."""


class AdvancedGovernanceSettings(_Section):
    """The matrix's tuning and its benchmark baselines (``advanced.governance``).

    ``mode: matrix`` is plan A; ``mode: domain-limit`` is plan B (one lookup per
    domain, no supplements); ``mode: cap`` is the peer baseline, a plain count cap of
    ``cap_calls`` lookups per turn (``superbiz eval agent --governance cap:N`` runs it
    beside the matrix). The water level is read from ``indicator``; in a turn that ran
    the plan's lookups, whatever it says, ``high_min_found`` lookups that found documents
    are high water (the matrix never shows one question more evidence than the plain cap
    of that many lookups could).
    """

    mode: Literal["matrix", "domain-limit", "cap"] = "matrix"
    """Baseline: `matrix`: the quality × water-level matrix (plan A); `domain-limit`: plan B, one
    lookup per domain and no supplements; `cap`: the plain count cap agent frameworks offer.
    `superbiz eval agent --governance on,cap:3,off` runs the cap and the ungoverned loop beside the
    configured governor without touching this key."""
    cap_calls: int = Field(3, ge=0)
    """Baseline: with `mode: cap`, lookups per turn, then the tool is withdrawn (`--governance
    cap:N` sets it for a benchmark run)."""
    indicator: Literal["calls", "tokens", "domains"] = "calls"
    """Tuning: what the water level reads: `calls`, `tokens` or `domains`."""
    low_max_calls: int = Field(3, ge=0)
    """Tuning: with `indicator: calls`, low water up to this many calls."""
    high_min_calls: int = Field(8, ge=1)
    """Tuning: with `indicator: calls`, high water from this many calls (mid between); `/api/info`
    reports it as `high_mark`."""
    low_max_tokens: int = Field(4000, ge=0)
    """Tuning: with `indicator: tokens`, low water up to this many tokens of evidence."""
    high_min_tokens: int = Field(12000, ge=1)
    """Tuning: with `indicator: tokens`, high water from this many."""
    low_max_domains: int = Field(2, ge=0)
    """Tuning: with `indicator: domains`, low water up to this many domains retrieved in the
    session."""
    high_min_domains: int = Field(4, ge=1)
    """Tuning: with `indicator: domains`, high water from this many."""
    high_min_found: int = Field(3, ge=1)
    """Tuning: in a turn that ran the plan's lookups, this many lookups that found documents are
    high water whatever the indicator says (the matrix never shows more evidence than the plain cap
    of that many lookups could); while no lookup of such a turn has answered, its first this-many
    calls that name no domain run as pages of the ranking."""
    withhold_after_blocked: int = Field(2, ge=1)
    """Tuning: a model blocked again after this many explained blocks has the tool withheld."""


class GovernanceConfig(GovernanceSettings, AdvancedGovernanceSettings):
    """What a turn is governed by: ``governance`` and ``advanced.governance``."""


class PlannerSettings(_Section):
    """The most domains one plan names."""

    max_domains: int = Field(3, ge=1)
    """The most domains one plan consults."""


class AdvancedPlannerSettings(_Section):
    """The Planner sees the knowledge map within ``map_token_budget`` estimated tokens
    (``advanced.planner``)."""

    map_token_budget: int = Field(2000, ge=200)
    """Internal: the knowledge map the Planner sees is summarised past this many estimated tokens
    (`superbiz map --budget` shows another); past it, the Planner is shown the domains nearest the
    question (a map of 50,000 documents stays within it)."""
    scope_precision: float = Field(0.95, gt=0, lt=1)
    """Tuning: a plan is scoped to the map's best domain only when it leads the next by a margin at
    which the knowledge base's own titles find their own domain this often (the margin is measured
    on each KB, leave one out; see `agents/_domain_margin.py`)."""
    scope: Literal["measured", "always", "never"] = "measured"
    """Tuning: `measured`: scope a plan where the map can tell (above); `always`: scope every plan
    to its domains (a planned domain with no answer still searches the whole KB); `never`: every
    planned lookup searches the whole knowledge base."""


class PlannerConfig(PlannerSettings, AdvancedPlannerSettings):
    """What the Planner runs with: ``planner`` and ``advanced.planner``."""


class ChatSettings(_Section):
    """What a turn sends back to the model and keeps: earlier turns within
    ``history_token_budget`` estimated tokens (oldest dropped first), and answers of at
    most ``max_answer_chars`` (longer ones are cut, with a note)."""

    history_token_budget: int = Field(2000, ge=0)
    """Estimated tokens of earlier turns sent back to the model; whole turns, oldest dropped first.
    """
    max_answer_chars: int = Field(20_000, ge=100)
    """Longer answers are cut, with a note, before they are stored."""
