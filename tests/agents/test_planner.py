"""The Planner: the deterministic ``MapPlanner`` and the ``LLMPlanner`` (validated JSON,
one repair, then the map planner as fallback), on the small KB's real knowledge map
(USE, Milvus Lite, SQLite). The LLM is a ``ScriptedChatModel`` or the OpenAI client
talking to the strict fake server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from conftest import SMALL_KB_DOMAINS, write_kb
from fakes.embedders import CountingEmbedder
from fakes.openai_server import FakeOpenAIServer
from fakes.real_transcripts import load_transcript
from superbiz.agents.context import Citation
from superbiz.agents.planner import (
    LLMPlanner,
    MapPlanner,
    Plan,
    PlannedDomain,
    PlanReply,
    PlanRequest,
)
from superbiz.agents.prompts import load_prompt
from superbiz.config import LLMSettings, PlannerConfig, Settings
from superbiz.exceptions import LLMUnavailableError
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.coverage.map import KnowledgeMap, MapDocument, MapDomain, build_map
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import Message, SystemMessage, ToolSpec, UserMessage
from superbiz.llm.openai_compat import OpenAIChatModel
from superbiz.llm.structured import parse_structured
from superbiz.retrieval.embedders import Embedder
from superbiz.testing import ScriptedChatModel

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
PAYMENT_EVIDENCE = Citation(ref=1, path=PAYMENT, title="支付失败排查", domain="payment")
REDIS_EVIDENCE = Citation(ref=2, path=REDIS, title="Redis 连接池耗尽", domain="infrastructure")
BOTH = "支付回调超时，同时 Redis connection pool exhausted 怎么办"


@pytest.fixture(scope="module")
def kmap(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Embedder
) -> Iterator[KnowledgeMap]:
    root = tmp_path_factory.mktemp("planner-kb")
    kb = KnowledgeBase(Settings(data_dir=root / "data"), embedder=use_embedder)
    try:
        Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(root / "kb")])
        yield build_map(kb)
    finally:
        kb.close()


@pytest.fixture
def planner(use_embedder: Embedder) -> MapPlanner:
    return MapPlanner(use_embedder, PlannerConfig())


# -- MapPlanner -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "domain"),
    [
        ("支付回调超时怎么办？", "payment"),
        ("退款失败是什么原因", "payment"),
        ("Redis 连接池耗尽", "infrastructure"),
        ("How do I raise my API quota?", "api"),
        ("Clients get HTTP 429 Too Many Requests", "api"),
        ("What does idempotency mean?", "general"),
    ],
)
def test_the_map_planner_picks_the_domain(
    planner: MapPlanner, kmap: KnowledgeMap, question: str, domain: str
) -> None:
    plan = planner.plan(PlanRequest(question, kmap))

    # one document a domain: the map cannot measure how far ahead a domain must be, so
    # the plan names its best domain first but its lookup searches the whole KB
    assert (plan.need_retrieval, plan.source, plan.scoped) == (True, "map", False)
    assert plan.domain_ids == [domain]
    assert {d.sub_question for d in plan.domains} == {question}


def test_a_question_spanning_two_domains_is_not_scoped_on_a_map_that_cannot_tell(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    """One document a domain measures no margin: the plan's one lookup searches the whole
    KB (both domains) rather than each domain the old 85 % cutoff kept."""
    wide = MapPlanner(use_embedder, PlannerConfig()).plan(PlanRequest(BOTH, kmap))
    narrow = MapPlanner(use_embedder, PlannerConfig(max_domains=1)).plan(PlanRequest(BOTH, kmap))

    assert not wide.scoped and not narrow.scoped
    assert wide.domain_ids == narrow.domain_ids and wide.domain_ids[0] in (
        "payment",
        "infrastructure",
    )


def test_a_question_about_a_document_already_held_is_answered_from_evidence(
    planner: MapPlanner, kmap: KnowledgeMap
) -> None:
    plan = planner.plan(PlanRequest("退款失败是什么原因", kmap, [PAYMENT_EVIDENCE]))

    assert plan == Plan(False, (), None, "evidence", "answer from 支付失败排查")


def test_evidence_of_another_document_does_not_stop_retrieval(
    planner: MapPlanner, kmap: KnowledgeMap
) -> None:
    plan = planner.plan(PlanRequest("退款失败是什么原因", kmap, [REDIS_EVIDENCE]))

    assert plan.need_retrieval and plan.domain_ids[0] == "payment" and plan.source == "map"


def test_a_replan_skips_the_consulted_domains_and_retrieves(
    planner: MapPlanner, kmap: KnowledgeMap
) -> None:
    request = PlanRequest(
        BOTH, kmap, [PAYMENT_EVIDENCE], frozenset({"payment"}), ["Redis connection pool"]
    )

    plan = planner.plan(request)

    assert plan.need_retrieval and plan.source == "map"
    assert "payment" not in plan.domain_ids
    assert plan.domain_ids[0] == "infrastructure"


def test_nothing_left_to_consult(planner: MapPlanner, kmap: KnowledgeMap) -> None:
    everything = frozenset(SMALL_KB_DOMAINS)

    assert planner.plan(PlanRequest("支付回调超时", kmap, exclude=everything)) == Plan(
        False, (), None, "map", "no domain left to consult"
    )
    assert not planner.plan(PlanRequest("支付回调超时", KnowledgeMap([]))).need_retrieval


def test_map_entries_are_embedded_once(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    embedder = CountingEmbedder(use_embedder)
    planner = MapPlanner(embedder, PlannerConfig())  # type: ignore[arg-type]

    planner.plan(PlanRequest("支付回调超时怎么办？", kmap))
    first = embedder.texts
    planner.plan(PlanRequest("How do I raise my API quota?", kmap))

    # each entry, and each title asked as a question to measure the map's clear margin
    assert first == 2 * sum(len(d.documents) for d in kmap.domains)
    assert embedder.texts == first


# -- LLMPlanner with a scripted model -----------------------------------------------------------


def llm_planner(model: Any, use_embedder: Embedder, **settings: Any) -> LLMPlanner:
    planner_settings = PlannerConfig(**settings)
    return LLMPlanner(model, MapPlanner(use_embedder, planner_settings), planner_settings)


def plan_json(*domains: tuple[str, str], need: bool = True, direct: str | None = None) -> str:
    return json.dumps(
        {
            "need_retrieval": need,
            "domains": [{"domain": d, "sub_question": q} for d, q in domains],
            "direct_answer": direct,
        },
        ensure_ascii=False,
    )


@pytest.mark.parametrize(
    ("question", "language", "none"),
    [("支付回调超时怎么办？", "zh", "（无）"), ("How do I raise my API quota?", "en", "(none)")],
)
def test_the_map_is_in_the_planner_system_prompt(
    use_embedder: Embedder, kmap: KnowledgeMap, question: str, language: str, none: str
) -> None:
    model = ScriptedChatModel(plan_json(("payment", "回调超时的排查步骤")))

    plan = llm_planner(model, use_embedder).plan(PlanRequest(question, kmap))

    [step] = model.steps
    system, user = step.messages
    assert isinstance(system, SystemMessage) and user == UserMessage(question)
    assert step.tools == ()
    expected = load_prompt("chat-planner-prompt", language).format(  # type: ignore[arg-type]
        knowledge_map=kmap.to_yaml().strip(),
        session_evidence=none,
        conversation=none,
        max_domains=3,
    )
    assert system.content == expected
    assert "available_knowledge_domains:" in system.content
    for domain in kmap.domains:
        assert f"domain_id: {domain.domain_id}" in system.content
    assert '{"need_retrieval": true' in system.content  # the example survives formatting
    # the small KB's map cannot tell its domains apart: the plan's lookups are unscoped
    assert plan == Plan(
        True, (PlannedDomain("payment", "回调超时的排查步骤"),), None, "llm", scoped=False
    )


def test_a_follow_up_is_planned_in_the_light_of_the_earlier_questions(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    """The live transcript's planner saw "那 max-active 应该调到多少？" alone and made it a
    MySQL question: it is told the conversation it continues."""
    model = ScriptedChatModel(plan_json(("infrastructure", "pay-callback 的 max-active")))
    earlier = "用户付了钱但订单一直显示未支付，回调没收到怎么办？"

    llm_planner(model, use_embedder).plan(
        PlanRequest("那 max-active 应该调到多少？", kmap, conversation=[earlier])
    )

    [step] = model.steps
    system, user = step.messages
    assert f"## 本次会话之前的问题（按先后）\n- {earlier}\n" in system.content
    assert user == UserMessage("那 max-active 应该调到多少？")  # the asker's words, as asked


def test_session_evidence_and_max_domains_reach_the_prompt(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    model = ScriptedChatModel(plan_json(need=False))

    plan = llm_planner(model, use_embedder, max_domains=2).plan(
        PlanRequest("退款失败是什么原因", kmap, [PAYMENT_EVIDENCE, REDIS_EVIDENCE])
    )

    system = model.steps[0].system_texts[0]
    assert "- 支付失败排查 [payment]\n- Redis 连接池耗尽 [infrastructure]" in system
    assert "最多选 2 个域" in system
    assert plan == Plan(False, (), None, "llm")


def test_a_small_budget_summarises_the_map_in_the_prompt(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    model = ScriptedChatModel(plan_json(("api", "quota")))

    llm_planner(model, use_embedder, map_token_budget=300).plan(
        PlanRequest("How do I raise my API quota?", kmap)
    )

    system = model.steps[0].system_texts[0]
    assert "\nnote: " in system and "300-token budget" in system


def test_no_retrieval_with_a_direct_answer(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    model = ScriptedChatModel(plan_json(need=False, direct="  你好！有什么可以帮你？ "))

    plan = llm_planner(model, use_embedder).plan(PlanRequest("你好", kmap))

    assert plan == Plan(False, (), "你好！有什么可以帮你？", "llm")


def test_malformed_output_is_repaired_once(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    model = ScriptedChatModel("I think payment.", plan_json(("payment", "回调超时")))

    plan = llm_planner(model, use_embedder).plan(PlanRequest("支付回调超时怎么办？", kmap))

    assert plan == Plan(
        True, (PlannedDomain("payment", "回调超时"),), None, "llm-repaired", scoped=False
    )
    first, second = model.steps
    assert second.messages[:2] == first.messages
    [repair] = second.messages[2:]
    assert isinstance(repair, SystemMessage)
    assert "not a valid plan: no JSON object" in repair.content


def test_an_unknown_domain_is_malformed(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    model = ScriptedChatModel(plan_json(("billing", "x")), plan_json(("payment", "回调超时")))

    plan = llm_planner(model, use_embedder).plan(PlanRequest("支付回调超时怎么办？", kmap))

    assert plan.source == "llm-repaired" and plan.domain_ids == ["payment"]
    repair = model.steps[1].system_texts[-1]
    assert "unknown domain 'billing'" in repair
    assert "known: api, general, infrastructure, ops, payment" in repair


def test_malformed_twice_falls_back_to_the_map_planner(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    model = ScriptedChatModel('{"need_retrieval": "yes"}', plan_json(("billing", "x")))
    question = "支付回调超时怎么办？"

    plan = llm_planner(model, use_embedder).plan(PlanRequest(question, kmap))

    assert len(model.steps) == 2  # one repair, no more
    assert plan.source == "fallback"
    assert plan.domains[0] == PlannedDomain("payment", question)
    assert plan.note is not None and plan.note.startswith("planner output rejected: ")
    assert "unknown domain 'billing'" in plan.note


def test_a_recorded_html_escaped_reply_is_a_plan_without_repair(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    first = next(e for e in load_transcript() if e.is_planner and "&#34;" in e.reply)
    model = ScriptedChatModel(first.reply)

    plan = llm_planner(model, use_embedder).plan(PlanRequest(first.question, kmap))

    assert plan == Plan(
        True, (PlannedDomain("payment", first.question),), None, "llm", scoped=False
    )
    assert len(model.steps) == 1


def test_an_unreachable_llm_falls_back_at_once(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    calls: list[int] = []

    def down(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        calls.append(1)
        raise LLMUnavailableError("LLM endpoint http://127.0.0.1:9/v1 is unavailable")

    model = ScriptedChatModel(down, down)

    plan = llm_planner(model, use_embedder).plan(PlanRequest("How do I raise my API quota?", kmap))

    assert calls == [1]
    assert (plan.source, plan.domain_ids[0]) == ("fallback", "api")
    assert plan.note == "planner output rejected: LLM endpoint http://127.0.0.1:9/v1 is unavailable"


def test_a_replan_may_not_choose_a_consulted_domain(
    use_embedder: Embedder, kmap: KnowledgeMap
) -> None:
    model = ScriptedChatModel(
        plan_json(("payment", "again")), plan_json(("infrastructure", "Redis 连接池"))
    )
    request = PlanRequest(BOTH, kmap, (), frozenset({"payment"}), ["Redis connection pool"])

    plan = llm_planner(model, use_embedder).plan(request)

    assert (plan.source, plan.domain_ids) == ("llm-repaired", ["infrastructure"])
    question = model.steps[0].messages[1].content
    assert question.startswith(BOTH)
    assert (
        "（重新规划：已查询的域 payment；仍缺少的维度：Redis connection pool。请只选其他域。）"
        in (question)
    )
    assert "unknown domain 'payment'" in model.steps[1].system_texts[-1]


def test_an_english_replan_note(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    model = ScriptedChatModel(plan_json(("api", "quota")))
    request = PlanRequest("How do I raise my API quota?", kmap, (), frozenset({"payment"}), [])

    llm_planner(model, use_embedder).plan(request)

    assert (
        model.steps[0]
        .messages[1]
        .content.endswith(
            "(Re-plan: domains already consulted: payment; still missing: -. "
            "Choose other domains only.)"
        )
    )


def test_the_planner_over_the_openai_protocol(use_embedder: Embedder, kmap: KnowledgeMap) -> None:
    with FakeOpenAIServer() as server:
        server.script_chat("```json\n" + plan_json(("api", "How to raise the quota")) + "\n```")
        model = OpenAIChatModel(
            LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0),
            sleep=lambda _s: None,
        )
        plan = llm_planner(model, use_embedder).plan(
            PlanRequest("How do I raise my API quota?", kmap)
        )
        [request] = server.chat_requests

    assert plan == Plan(
        True, (PlannedDomain("api", "How to raise the quota"),), None, "llm", scoped=False
    )
    system, user = request["messages"]
    assert system["role"] == "system" and "available_knowledge_domains:" in system["content"]
    assert user == {"role": "user", "content": "How do I raise my API quota?"}
    assert "tools" not in request


# -- PlanReply ------------------------------------------------------------------------------

ALLOWED = {"api", "payment", "infrastructure"}


def parse(reply: str | dict[str, Any], max_domains: int = 3) -> Plan:
    text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
    reply_ = parse_structured(text, PlanReply, {"allowed": ALLOWED})
    return reply_.to_plan("the question", max_domains, "map")


def test_plan_reply_accepts_a_plan() -> None:
    plan = parse(
        'Plan:\n```json\n{"need_retrieval": true, "domains": ['
        '{"domain": " Payment ", "sub_question": " 回调超时 "}, {"domain": "api"}, '
        '{"domain": "infrastructure", "sub_question": "  "}]}\n```'
    )

    assert plan == Plan(
        True,
        (
            PlannedDomain("payment", "回调超时"),
            PlannedDomain("api", "the question"),
            PlannedDomain("infrastructure", "the question"),
        ),
    )


def test_plan_reply_keeps_each_domain_once_and_at_most_max_domains() -> None:
    entries = [{"domain": d} for d in ("api", "api", "payment", "infrastructure")]

    assert parse({"need_retrieval": True, "domains": entries}).domain_ids == [
        "api",
        "payment",
        "infrastructure",
    ]
    assert parse({"need_retrieval": True, "domains": entries}, max_domains=2).domain_ids == [
        "api",
        "payment",
    ]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"need_retrieval": False, "direct_answer": " Hi! "}, Plan(False, (), "Hi!")),
        ({"need_retrieval": False, "direct_answer": "  "}, Plan(False, (), None)),
        ({"need_retrieval": False}, Plan(False, (), None)),
        ({"need_retrieval": False, "domains": [{"domain": "nowhere"}]}, Plan(False, (), None)),
    ],
)
def test_plan_reply_without_retrieval(reply: dict[str, Any], expected: Plan) -> None:
    assert parse(reply) == expected


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("payment, please", "no JSON object"),
        ('{"need_retrieval": true, }', "invalid JSON"),
        ({"domains": [{"domain": "api"}]}, "'need_retrieval': Field required"),
        (
            {"need_retrieval": "true", "domains": [{"domain": "api"}]},
            "'need_retrieval': Input should be a valid boolean",
        ),
        (
            {"need_retrieval": False, "direct_answer": 42},
            "'direct_answer': Input should be a valid string",
        ),
        ({"need_retrieval": True}, "'domains' must list at least one domain"),
        ({"need_retrieval": True, "domains": []}, "'domains' must list at least one domain"),
        ({"need_retrieval": True, "domains": "api"}, "'domains': Input should be a valid list"),
        ({"need_retrieval": True, "domains": ["api"]}, "'domains.0': Input should be a valid"),
        ({"need_retrieval": True, "domains": [{"domain": 1}]}, "'domains.0.domain': Input"),
        (
            {"need_retrieval": True, "domains": [{"domain": "api"}, {"domain": "billing"}]},
            "unknown domain 'billing'; known: api, infrastructure, payment",
        ),
    ],
)
def test_plan_reply_rejects(reply: str | dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse(reply)


def test_plan_as_dict() -> None:
    plan = Plan(True, (PlannedDomain("api", "q"),), None, "llm-repaired", "n")

    assert plan.as_dict() == {
        "need_retrieval": True,
        "domains": [{"domain": "api", "sub_question": "q"}],
        "direct_answer": None,
        "source": "llm-repaired",
        "note": "n",
        "scoped": True,
    }
    assert plan.domain_ids == ["api"]


def test_prompt_files_exist_in_both_languages() -> None:
    for language in ("zh", "en"):
        prompt = load_prompt("chat-planner-prompt", language)  # type: ignore[arg-type]
        assert "{knowledge_map}" in prompt and "{session_evidence}" in prompt
        assert "{max_domains}" in prompt


def test_plan_reply_spells_a_domain_as_the_knowledge_base_does() -> None:
    """A model that writes a two-word domain with a space names the hyphenated domain."""
    reply = {"need_retrieval": True, "domains": [{"domain": " Payment  Ops "}]}
    text = json.dumps(reply)
    plan = parse_structured(text, PlanReply, {"allowed": {"payment-ops"}}).to_plan("q", 3, "map")
    assert plan.domain_ids == ["payment-ops"]


def test_a_title_that_is_the_products_name_does_not_take_the_plan(planner: MapPlanner) -> None:
    """A page titled with the product's name scored 1 for every question naming the
    product (an exact title match); the map planner now ranks domains by meaning, and
    the question about a full disk plans the storage domain."""
    domains = [
        MapDomain("streaming", "Kafka", "", 1, [MapDocument("Kafka", "streaming/kafka.md")]),
        MapDomain(
            "storage",
            "Disks and volumes",
            "",
            1,
            [MapDocument("Persistent volume disk is full", "storage/disk-full.md")],
        ),
    ]
    question = "The persistent volume disk of the kafka broker is full"

    plan = planner.plan(PlanRequest(question, KnowledgeMap(domains)))

    assert plan.domain_ids[0] == "storage"
