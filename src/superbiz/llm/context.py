"""Turn context handed to the executor's model as system messages: the plan and the
evidence retrieved earlier in the session.

Both are JSON behind a fixed first line, so a model reads them as text and a
deterministic player (the extractive model, the behaviour profiles) can parse them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from superbiz.llm.messages import Message, SystemMessage

PLAN_HEADER = "PLAN (from the planner; consult these domains):"
EVIDENCE_HEADER = "SESSION EVIDENCE (retrieved earlier in this session; cite by ref):"


def plan_message(plan: dict[str, Any]) -> SystemMessage:
    return SystemMessage(f"{PLAN_HEADER}\n{json.dumps(plan, ensure_ascii=False)}")


def evidence_message(documents: Sequence[dict[str, Any]]) -> SystemMessage:
    """``documents``: dicts with ref, title, path, domain, content."""
    return SystemMessage(f"{EVIDENCE_HEADER}\n{json.dumps(list(documents), ensure_ascii=False)}")


def _read(messages: Sequence[Message], header: str) -> Any:
    for message in messages:
        if isinstance(message, SystemMessage) and message.content.startswith(header):
            try:
                return json.loads(message.content[len(header) :])
            except json.JSONDecodeError:
                return None
    return None


def read_plan(messages: Sequence[Message]) -> dict[str, Any] | None:
    plan = _read(messages, PLAN_HEADER)
    return plan if isinstance(plan, dict) else None


def read_evidence(messages: Sequence[Message]) -> list[dict[str, Any]]:
    evidence = _read(messages, EVIDENCE_HEADER)
    return [e for e in evidence if isinstance(e, dict)] if isinstance(evidence, list) else []
