"""The turn context as the executor's model reads it: typed going in, typed coming out.

The plan and the session evidence travel as JSON in system messages; the deterministic
players read them back as the same ``Plan`` and ``Citation`` objects, and the text the
model sees is exactly what it was before they were typed.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from superbiz.agents.context import (
    EVIDENCE_HEADER,
    PLAN_HEADER,
    Citation,
    dump_evidence,
    evidence_message,
    load_evidence,
    read_evidence,
)
from superbiz.agents.planner import Plan, PlannedDomain
from superbiz.llm.messages import SystemMessage, UserMessage

PLAN = Plan(
    True,
    (PlannedDomain("infrastructure", "Redis 连接池耗尽"), PlannedDomain("api", "429")),
    source="llm-repaired",
    note="two domains",
)
EVIDENCE = [
    Citation(1, "Redis 连接池耗尽", "infrastructure/redis-pool.md", "infrastructure", "扩容"),
    Citation(2, "Rate limit", "api/rate-limit.md", "api", "429 means slow down"),
]


def test_a_plan_survives_the_message_round_trip() -> None:
    messages = [SystemMessage("prompt"), PLAN.to_message(), UserMessage("问题")]
    assert Plan.from_messages(messages) == PLAN
    direct = Plan(False, direct_answer="你好", source="llm")
    assert Plan.from_messages([direct.to_message()]) == direct


def test_the_plan_message_is_the_json_the_model_always_read() -> None:
    assert PLAN.to_message().content == (
        f"{PLAN_HEADER}\n"
        '{"need_retrieval": true, "domains": [{"domain": "infrastructure", "sub_question": '
        '"Redis 连接池耗尽"}, {"domain": "api", "sub_question": "429"}], '
        '"direct_answer": null, "source": "llm-repaired", "note": "two domains", '
        '"scoped": true}'
    )


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [UserMessage(f"{PLAN_HEADER}\n{{}}")],  # only system messages carry context
        [SystemMessage(f"{PLAN_HEADER}\nnot json")],
        [SystemMessage(f'{PLAN_HEADER}\n{{"need_retrieval": true, "source": "oracle"}}')],
    ],
)
def test_no_readable_plan_reads_as_none(messages: list[SystemMessage | UserMessage]) -> None:
    assert Plan.from_messages(messages) is None


def test_evidence_survives_the_message_and_the_store() -> None:
    message = evidence_message(EVIDENCE)
    assert message.content.startswith(f'{EVIDENCE_HEADER}\n[{{"ref": 1, "title": "Redis')
    assert read_evidence([SystemMessage("prompt"), message]) == EVIDENCE
    stored = dump_evidence(EVIDENCE)
    assert stored[1] == {
        "ref": 2,
        "title": "Rate limit",
        "path": "api/rate-limit.md",
        "domain": "api",
        "content": "429 means slow down",
        "page": None,
        "use": "quoted",
    }
    assert load_evidence(stored) == EVIDENCE
    # evidence stored before citations had pages still loads
    assert load_evidence([{k: v for k, v in stored[1].items() if k != "page"}]) == EVIDENCE[1:]


def test_a_pdf_citation_names_its_page() -> None:
    cited = Citation(3, "Gateway Manual", "vendor/gateway.pdf", "vendor", "rotate", page=12)

    assert cited.location == "vendor/gateway.pdf#page=12"
    assert cited.as_dict() == {
        "ref": 3,
        "title": "Gateway Manual",
        "path": "vendor/gateway.pdf",
        "domain": "vendor",
        "page": 12,
        "location": "vendor/gateway.pdf#page=12",
    }
    assert load_evidence(dump_evidence([cited])) == [cited]


def test_reported_citations_leave_the_content_out() -> None:
    assert EVIDENCE[0].as_dict() == {
        "ref": 1,
        "title": "Redis 连接池耗尽",
        "path": "infrastructure/redis-pool.md",
        "domain": "infrastructure",
    }


def test_unreadable_evidence_is_none_in_a_message_and_an_error_in_the_store() -> None:
    assert read_evidence([SystemMessage(f"{EVIDENCE_HEADER}\n[{{}}]")]) == []
    assert read_evidence([]) == []
    with pytest.raises(ValidationError):
        load_evidence([{"title": "no path"}])
