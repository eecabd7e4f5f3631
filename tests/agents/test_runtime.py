"""``open_runtime`` / ``open_lookup``: the one place a data directory is wired up."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import superbiz.testing
from conftest import write_kb
from superbiz.agents import runtime as runtime_module
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.planner import LLMPlanner, MapPlanner
from superbiz.agents.runtime import WARM_UP_SESSION, LookupRuntime, open_lookup, open_runtime
from superbiz.agents.store_access import ReleasingModel
from superbiz.config import LLMSettings, Settings
from superbiz.evaluation.agent import builtin_dataset
from superbiz.exceptions import StoreError
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm import make_chat_model
from superbiz.retrieval.embedders import Embedder
from superbiz.testing import ScriptedChatModel

REDIS = "infrastructure/redis-pool.md"


def test_without_an_llm_the_runtime_plays_the_extractive_policy(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    assert make_chat_model(settings.llm) is None
    with open_runtime(settings) as runtime:
        assert isinstance(runtime.model, ExtractiveChatModel)
        assert runtime.extractive
        assert isinstance(runtime.planner, MapPlanner)


def test_a_given_model_plans_and_executes(tmp_path: Path) -> None:
    model = ScriptedChatModel()
    with open_runtime(Settings(data_dir=tmp_path / "data"), model=model) as runtime:
        assert runtime.model is model and not runtime.extractive
        assert isinstance(runtime.planner, LLMPlanner)
        assert isinstance(runtime.domains.model, ReleasingModel)  # outside the store lock
        assert runtime.domains.model.inner is model


def test_a_configured_llm_is_the_default_model(tmp_path: Path) -> None:
    llm = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")
    with open_runtime(Settings(data_dir=tmp_path / "data", llm=llm)) as runtime:
        assert runtime.model.name == "m"
        assert not runtime.extractive


def test_leaving_the_block_closes_the_knowledge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = KnowledgeBase(Settings(data_dir=tmp_path / "data"))
    closed: list[bool] = []
    monkeypatch.setattr(kb, "close", lambda: closed.append(True))
    with pytest.raises(RuntimeError), open_runtime(kb.settings, kb=kb):
        raise RuntimeError("a failing turn")
    assert closed == [True]
    with open_lookup(kb.settings, kb=kb) as runtime:
        assert type(runtime) is LookupRuntime  # no chat store, planner or model
    assert closed == [True, True]


def test_warm_up_leaves_no_trace(governed_kb: KnowledgeBase) -> None:
    tracker = InMemorySessionTracker()
    runtime = open_lookup(governed_kb.settings, kb=governed_kb, tracker=tracker)
    runtime.warm_up()
    assert tracker.retrieved_docs(WARM_UP_SESSION) == {}
    assert runtime.invocations.for_session(WARM_UP_SESSION) == []


def test_the_testing_module_example_works(tmp_path: Path) -> None:
    """The example in ``superbiz.testing``'s docstring, run as written on the example KB."""
    doc = superbiz.testing.__doc__ or ""
    block = doc.split("::\n", 1)[1].split("\n\n``turn.citations``", 1)[0]
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(block), namespace)
    namespace["KB"] = builtin_dataset() / "corpus"
    namespace["test_redis_questions_cite_the_runbook"](tmp_path / "data")


def test_a_map_build_that_fails_is_tried_again(
    tmp_path: Path, use_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed build must not mark the old map fresh: the next turn builds it again."""
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([write_kb(tmp_path / "kb")])
        before = {d.domain_id for d in runtime.knowledge_map().domains}
        Ingestor(kb).ingest(
            [write_kb(tmp_path / "more", {"billing/refunds.md": "# 退款\n退款流程"})]
        )

        def store_down(*_: object, **__: object) -> None:
            raise StoreError("the relational store at sqlite:///… is unavailable")

        monkeypatch.setattr(runtime_module, "build_map", store_down)
        with pytest.raises(StoreError):
            runtime.knowledge_map()
        monkeypatch.undo()

        assert {d.domain_id for d in runtime.knowledge_map().domains} == before | {"billing"}


SHORT_RUNBOOK = """---
title: 磁盘写满处理
category: infrastructure
---
# 磁盘写满处理

先执行 df -h 找到写满的分区。
"""


def test_the_default_runtime_quotes_without_the_model_answer_path(
    tmp_path: Path, use_embedder: Embedder
) -> None:
    """``Runtime.ask`` wraps the model (store lock) before the executor sees it: the
    extractive policy still declares that it quotes, so a short quote, whose label is
    most of its words, is neither put to the evidence test nor "repaired" into the label
    saying a model's answer was replaced (there is no model)."""
    settings = Settings(data_dir=tmp_path / "data")  # the default: no LLM, SQLite, Lite
    kb = KnowledgeBase(settings, embedder=use_embedder)
    Ingestor(kb, domains=DomainService(kb)).ingest(
        [write_kb(tmp_path / "kb", {"infrastructure/disk-full.md": SHORT_RUNBOOK})]
    )
    with open_runtime(settings, kb=kb) as runtime:
        assert runtime.store_lock.enabled  # the model is wrapped for the turn
        turn = runtime.ask("s1", "磁盘写满了怎么办？").result

    assert turn.answer.startswith("【抽取式回答】未配置大模型")
    assert "df -h" in turn.answer and turn.grounded
    assert turn.steps == 1  # the answer; no repair call


def test_every_wrapper_forwards_that_its_model_quotes() -> None:
    from superbiz.agents.store_access import StoreLock
    from superbiz.api.events import TokenStreamingModel
    from superbiz.evaluation.agent import MeteredModel
    from superbiz.llm.base import quotes_documents

    for inner, quotes in ((ExtractiveChatModel(), True), (ScriptedChatModel(), False)):
        wrapped = [
            StoreLock(enabled=True).releasing(inner),
            MeteredModel(inner),
            TokenStreamingModel(inner, "s1", lambda event: None),
        ]
        assert quotes_documents(inner) is quotes
        assert [quotes_documents(w) for w in wrapped] == [quotes] * 3
        assert quotes_documents(MeteredModel(wrapped[0])) is quotes  # wrapped twice
