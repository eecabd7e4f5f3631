"""The live run of a small real model (``qwen2.5-coder-1.5b-live-turn3.jsonl``), replayed.

Qwen2.5-Coder-1.5B answered seven questions on the example KB (tests/data/llm-transcripts):
its follow-up "那 max-active 应该调到多少？" wrote back the previous turn's extractive answer
word for word and was shown as a grounded model answer, with the Redis pool runbook never
retrieved; its answers carried ``&#34;`` / ``&#39;``; a Chinese question quoting an English
log line was answered in English; the extractive answers quoted a document's opening or the
wrong document first. The fake OpenAI server answers every request with the recorded
response that matches it, so the model says exactly what it said then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer
from fakes.real_transcripts import QWEN_LIVE_TURN3, replaying
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.relevance import RelevanceLevel

PAYMENT = "用户付了钱但订单一直显示未支付，回调没收到怎么办？"
FOLLOW_UP = "那 max-active 应该调到多少？"
HIKARI = "HikariCP 报 Connection is not available, request timed out after 3000ms 怎么排查？"
RATE_LIMIT = "API gateway returns 429 Too Many Requests for one partner, what do we change?"
REFUND = "退款一直卡在处理中，要怎么处理？"
REDIS_RUNBOOK = "infrastructure/redis-pool-and-eviction.md"
ZH_FALLBACK = "【抽取式回答】模型的回答没有依据"
ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|quot|apos|amp|lt|gt);", re.IGNORECASE)


@pytest.fixture
def replayed(example_kb: KnowledgeBase) -> Iterator[tuple[Runtime, FakeOpenAIServer]]:
    with replaying(example_kb, QWEN_LIVE_TURN3) as replay:
        yield replay


def test_the_copied_follow_up_is_no_grounded_answer_and_keeps_the_subject(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, server = replayed
    first = runtime.ask("live-follow-up", PAYMENT).result
    second = runtime.ask("live-follow-up", FOLLOW_UP)
    turn = second.result

    # the model wrote back the first turn's answer: a copy, not an answer (bc5e2c6 showed
    # it as answer_source "model", grounded)
    assert turn.answer_source == "extractive"
    assert turn.copied == "turn" and turn.relabelled
    assert turn.answer.startswith(ZH_FALLBACK)
    assert turn.answer != first.answer
    # the planner made it a MySQL question; the follow-up's own words still reach the
    # Redis pool runbook, which the extractive answer quotes
    assert second.plan.domain_ids == ["database"]
    shown = [doc for o in turn.lookups if o.executed for doc in o.shown]
    assert REDIS_RUNBOOK in shown
    assert REDIS_RUNBOOK in [c.path for c in turn.citations]
    quotes = turn.answer.split("\n\n[")[1:]
    [redis_quote] = [q for q in quotes if "《Redis 连接池耗尽与内存淘汰处理》" in q.splitlines()[0]]
    assert "max-active" in redis_quote  # the runbook's passage on the setting asked about
    # the planner was told the conversation it continues
    planner_prompts = [
        r["messages"][0]["content"] for r in server.chat_requests if "tools" not in r
    ]
    assert any(PAYMENT in p and "本次会话之前的问题" in p for p in planner_prompts)


def test_no_html_entity_reaches_the_answer(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, _ = replayed
    runtime.ask("live-entities", PAYMENT)
    turn = runtime.ask("live-entities", FOLLOW_UP).result
    assert not ENTITY.search(turn.answer)


def test_a_chinese_question_quoting_an_english_log_line_is_answered_in_chinese(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, _ = replayed
    turn = runtime.ask("live-hikari", HIKARI).result
    assert turn.language == "zh"
    assert turn.answer.startswith(ZH_FALLBACK)  # the model's English HikariCP advice went
    assert "来源：" in turn.answer


def test_the_extractive_answer_quotes_the_matching_section(example_kb: KnowledgeBase) -> None:
    """Without an LLM the lookup asks the question itself, so the section it names (获取连接
    超时) is among what was retrieved, next to the document's opening: the quote is it."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)  # the default: no LLM
    turn = runtime.ask("extractive-hikari", HIKARI).result
    assert turn.answer.startswith("【抽取式回答】未配置大模型")  # the asker's language
    first_quote = turn.answer.split("\n\n[", 2)[1]
    assert first_quote.startswith("1] 《MySQL 连接池配置与 HikariCP 调优》")
    assert "Connection is not available" in first_quote
    assert "订单与支付相关服务" not in first_quote  # not the document's opening


def test_a_word_jiebas_dictionary_lacks_still_chooses_the_quote(example_kb: KnowledgeBase) -> None:
    """ "到账" is no word of jieba's (cut 到 / 账): the refund guide's opening was quoted
    for "退款多久到账？" instead of the step that says how long a refund takes."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("extractive-refund-delay", "退款多久到账？").result
    first_quote = turn.answer.split("\n\n[", 2)[1]
    assert first_quote.startswith("1] 《退款处理指南》")
    assert "1–5 个工作日到账" in first_quote


def test_an_error_code_only_one_runbook_holds_is_found(example_kb: KnowledgeBase) -> None:
    """ "What does error 42903 mean?" embeds nearer the auth errors' code table (0.273) than
    the rate-limit runbook that lists 42903 (0.239, under the reference): the lookup said
    nothing was relevant. Only that runbook holds the code: it is a REFERENCE answer."""
    found = example_kb.retriever.retrieve("What does error 42903 mean?")
    assert found.ranked[0].similarity < found.ranked[1].similarity
    assert found.level is RelevanceLevel.REFERENCE
    assert [d.doc_path for d in found.shown][:1] == ["api/rate-limit-429.md"]


def test_the_extractive_answer_quotes_the_document_naming_the_question_first(
    replayed: tuple[Runtime, FakeOpenAIServer],
) -> None:
    runtime, _ = replayed
    turn = runtime.ask("live-429", RATE_LIMIT).result
    assert turn.answer_source == "extractive"
    first_quote = turn.answer.split("\n\n[", 2)[1]
    assert "429" in first_quote


def test_without_an_llm_the_follow_up_is_looked_up_in_its_own_words(
    example_kb: KnowledgeBase,
) -> None:
    """The map plans "那 max-active 应该调到多少？" into a domain that holds nothing for it;
    in a conversation the asker's words are then looked up across the knowledge base."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)  # the default: no LLM
    runtime.ask("extractive-follow-up", PAYMENT)
    turn = runtime.ask("extractive-follow-up", FOLLOW_UP).result
    assert REDIS_RUNBOOK in [c.path for c in turn.citations]
    assert "max-active` 调到 128" in turn.answer.split("\n\n[", 2)[1]
