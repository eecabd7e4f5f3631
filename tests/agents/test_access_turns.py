"""The permission probe through governed lookups and whole turns (``Runtime.ask`` with a
reader): the map the planner sees, action memory, DEDUPED, follow-ups in a session
another reader used, and the extractive answer."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from access_probe import (
    ALICE,
    BOB,
    HIDDEN_DOCS,
    HR_DOC,
    PROBES,
    RECON_DOC,
    RECON_TITLE,
    access_settings,
    assert_nothing_hidden,
    write_access_kb,
)
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.supervisor import SupervisedTurn
from superbiz.governance.verdicts import DedupReason
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("access-turns")
    folder = write_access_kb(root / "kb")
    settings = access_settings(root / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    assistant = open_runtime(settings, kb=kb, model=ExtractiveChatModel())
    assert not Ingestor(kb, domains=assistant.domains).ingest([folder]).skipped
    yield assistant
    assistant.close()


def _session() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def everything_of(turn: SupervisedTurn) -> dict[str, Any]:
    """What a turn tells anyone: answer, citations, plans, every lookup's view and record."""
    result = turn.result
    return {
        "answer": result.answer,
        "citations": [dataclasses.asdict(c) for c in result.citations],
        "plan": turn.plan.as_dict(),
        "replan": turn.replan.as_dict() if turn.replan else None,
        "lookups": [
            {
                "view": o.model_view(),
                "details": o.details.as_dict() if o.details else None,
                "arguments": o.arguments,
                "domain": o.domain,
                "error": o.error,
            }
            for o in result.lookups
        ],
    }


def test_the_map_bob_sees_holds_nothing_he_may_not_read(runtime: Runtime) -> None:
    whole, mine = runtime.knowledge_map(), runtime.knowledge_map(BOB)
    assert_nothing_hidden(mine.to_yaml())
    assert_nothing_hidden(mine.as_dict())
    assert "hr" in whole.domain_ids and "hr" not in mine.domain_ids
    payment = {d.domain_id: d for d in whole.domains}["payment"]
    his = {d.domain_id: d for d in mine.domains}["payment"]
    # the stored summary was written from every payment document: his is his documents'
    assert RECON_TITLE in payment.description and his.document_count == payment.document_count - 1
    assert runtime.knowledge_map(ALICE).as_dict() == whole.as_dict()
    assert runtime.knowledge_map(BOB) is mine  # built once per version and group set


def test_bob_asks_about_them_and_learns_nothing(runtime: Runtime) -> None:
    for question in PROBES:
        turn = runtime.ask(_session(), question, reader=BOB)
        assert_nothing_hidden(everything_of(turn), said=[question])


def test_alice_gets_the_answers_of_a_reader_of_everything(runtime: Runtime) -> None:
    for question in PROBES[:5]:
        mine = everything_of(runtime.ask(_session(), question, reader=ALICE))
        everyone = everything_of(runtime.ask(_session(), question))
        for view in (mine, everyone):
            for lookup in view["lookups"]:  # what differs by nature: timing
                lookup["details"] = {
                    k: v for k, v in (lookup["details"] or {}).items() if "latency" not in k
                }
        assert mine == everyone, question
    found = runtime.ask(_session(), RECON_TITLE, reader=ALICE).result
    assert RECON_DOC in [c.path for c in found.citations]


def test_a_follow_up_in_alices_session_meets_nothing_of_hers(runtime: Runtime) -> None:
    """Alice's turns in a session retrieved and cited the restricted documents; bob, in
    the same session, is not told they were seen (no DEDUPED, no domain), does not get
    her turns as history or evidence, and his lookups search what he may read."""
    session = _session()
    first = runtime.ask(session, RECON_TITLE, reader=ALICE).result
    second = runtime.ask(session, "育儿假申请流程", reader=ALICE).result
    cited = {c.path for c in [*first.citations, *second.citations]}
    assert set(HIDDEN_DOCS) <= cited
    assert set(HIDDEN_DOCS) <= set(runtime.tracker.retrieved_docs(session))
    said: list[str] = []  # bob's own words: a follow-up's lookup is asked with them
    for question in [RECON_TITLE, "what should I do first?", "再说说育儿假", "parental leave"]:
        said.append(question)
        turn = runtime.ask(session, question, reader=BOB)
        assert_nothing_hidden(everything_of(turn), said=said)
        for outcome in turn.result.lookups:
            assert outcome.dedup_reason != DedupReason.DOC_RETRIEVED or not (
                set(outcome.details.already_retrieved if outcome.details else []) & set(HIDDEN_DOCS)
            )
    # the governed lookup alone: what alice saw is DEDUPED for her, not for bob
    lookup = runtime.lookup
    again = lookup.lookup(session, RECON_TITLE, reader=ALICE)
    assert again.result.dedup_reason == DedupReason.DOC_RETRIEVED
    assert RECON_DOC in again.details.already_retrieved
    his = lookup.lookup(session, RECON_TITLE, reader=BOB)
    assert his.result.dedup_reason is None
    seen = {"view": his.result.as_dict(), "details": his.details.as_dict()}
    assert_nothing_hidden(seen, said=[RECON_TITLE])
    assert "hr" not in lookup.retrieved_domains(session, BOB)
    assert "hr" in lookup.retrieved_domains(session, ALICE)


def test_a_restricted_domain_named_in_a_call_is_unknown_to_bob(runtime: Runtime) -> None:
    session = _session()
    hidden = runtime.user_lookup(session, "leave", "hr", reader=BOB)
    absent = runtime.user_lookup(session, "leave", "nope", reader=BOB)
    assert hidden.error and absent.error
    assert hidden.error.replace("'hr'", "'X'") == absent.error.replace("'nope'", "'X'")
    found = runtime.user_lookup(_session(), "parental leave", "hr", reader=ALICE)
    assert found.result and found.result.primary and found.result.primary.path == HR_DOC


def test_a_reader_who_loses_a_group_loses_its_turns_too(runtime: Runtime) -> None:
    """The same person after leaving ``payments``: the session's earlier turn that cited
    the reconciliation runbook is no longer history or evidence to it."""
    session = _session()
    runtime.ask(session, RECON_TITLE, reader=ALICE)
    former = ALICE.of_groups("alice", ["hr-team"])
    turn = runtime.ask(session, "what was the first step again?", reader=former)
    shown = everything_of(turn)
    assert RECON_DOC not in str(shown) and "kingfisher" not in str(shown).lower()


def test_a_name_only_a_hidden_document_holds_is_one_the_kb_never_mentions_for_bob(
    runtime: Runtime,
) -> None:
    """A Chinese question naming a product the knowledge base never mentions is not
    answered from pages that share its other words. Read on what the reader may read:
    to bob, "kingfisher" (only in the reconciliation runbook) is as unknown as a name
    no document holds."""
    question = "kingfisher 对账任务报差异，怎么处理？"
    kb = runtime.kb
    assert kb.unknown_names(["kingfisher", "zookeeper"], ALICE) == ["zookeeper"]
    assert kb.unknown_names(["kingfisher", "zookeeper"], BOB) == ["kingfisher", "zookeeper"]

    alice = runtime.ask(_session(), question, reader=ALICE).result
    assert [c.path for c in alice.citations][:1] == [RECON_DOC], alice.answer
    bob = runtime.ask(_session(), question, reader=BOB).result
    assert not bob.citations and "知识库中没有找到提及 kingfisher 的内容。" in bob.answer, (
        bob.answer
    )
    nobody = runtime.ask(_session(), "zookeeper 选主失败怎么办？", reader=BOB).result
    assert not nobody.citations and "知识库中没有找到提及 zookeeper 的内容。" in nobody.answer, (
        nobody.answer
    )
