"""The permission probe's knowledge base, readers and leak check, shared by every layer's
test (knowledge base, governed lookup, runtime, MCP, HTTP).

The small KB plus a restricted domain (``hr``, by ``access.domains``) and a restricted
document in an open domain (``payment``, by its own ``access:``). ``alice`` may read
both; ``bob`` may read neither. Whatever bob does, nothing of them may reach him: no
path, title, marker word or the domain's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conftest import SMALL_KB, write_kb
from superbiz.access import Reader
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import AccessSettings, Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

HR_DOC = "hr/parental-leave.md"
RECON_DOC = "payment/nightly-reconciliation.md"
HIDDEN_DOCS = (HR_DOC, RECON_DOC)
HR_TITLE = "Parental leave application 育儿假申请流程"
RECON_TITLE = "Nightly ledger reconciliation runbook"

RESTRICTED: dict[str, str] = {
    HR_DOC: f"""---
title: {HR_TITLE}
category: hr
covers: [parental leave, 育儿假天数]
---
# {HR_TITLE}

Employees apply for parental leave in the zebrafish portal at least 30 days ahead.
育儿假每年十天，需要在 zebrafish 系统里提交申请并由直属经理审批。
""",
    RECON_DOC: f"""---
title: {RECON_TITLE}
category: payment
access: [payments]
covers: [ledger mismatch, 对账差异]
---
# {RECON_TITLE}

When the nightly kingfisher ledger job reports a mismatch, freeze settlement and
compare the kingfisher ledger with the channel statement line by line.
每晚 kingfisher 对账任务发现差异时，先冻结结算，再逐笔核对渠道账单。
""",
}
ACCESS_KB = {**SMALL_KB, **RESTRICTED}

ALICE = Reader.of_groups("alice", ["payments", "hr-team"])
BOB = Reader.of_groups("bob", ["sre"])

#: questions that name or describe what bob may not read, in every way a person would
PROBES = [
    HR_TITLE,
    RECON_TITLE,
    "parental leave",
    "育儿假申请流程",
    "zebrafish portal",
    "kingfisher ledger mismatch",
    "nightly reconciliation 对账差异怎么处理",
    "hr/parental-leave.md",
    "How many days of 育儿假 do employees get?",
]

#: what may never reach bob (compared lower-case); the domain is checked as a word
_MARKERS = ("parental", "育儿假", "zebrafish", "kingfisher", "reconciliation", "对账差异")
_HR_WORD = re.compile(r"(?<![a-z0-9_-])hr(?![a-z0-9_])")


def write_access_kb(root: Path) -> Path:
    return write_kb(root, dict(ACCESS_KB))


def access_settings(data_dir: Path, **overrides: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        access=AccessSettings(domains={"hr": ("hr-team",)}),
        **overrides,
    )


def open_access_runtime(root: Path, embedder: Any, **overrides: Any) -> Runtime:
    """The service's runtime (extractive answers) over the probe's KB, ingested into
    ``root / "data"`` (and ``database_url`` when given); the caller closes it."""
    settings = access_settings(root / "data", **overrides)
    kb = KnowledgeBase(settings, embedder=embedder)
    runtime = open_runtime(settings, kb=kb, model=ExtractiveChatModel())
    report = Ingestor(kb, domains=runtime.domains).ingest([write_access_kb(root / "kb")])
    assert not report.skipped, report.skipped
    return runtime


def leaks(value: Any, said: Sequence[str] = ()) -> list[str]:
    """What of the restricted documents ``value`` (any JSON-able value or text) shows,
    apart from the reader's own words (``said``: its question, echoed as the query)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    lower = text.lower()
    for words in sorted(said, key=len, reverse=True):
        lower = lower.replace(words.lower(), " ")
    found = [marker for marker in (*_MARKERS, *HIDDEN_DOCS) if marker.lower() in lower]
    if _HR_WORD.search(lower):
        found.append("the domain hr")
    return found


def assert_nothing_hidden(value: Any, said: Sequence[str] = ()) -> None:
    found = leaks(value, said)
    assert not found, f"restricted material reached the reader: {found}"
