"""The ``knowledge_domain`` table and the knowledge map (seed 003 §2.2, §2.3).

Domains are built on ingest (derived, or summarised by a scripted LLM that counts its
calls per domain); a change recomputes only its domain; start-up builds the missing rows
and drops the empty ones, without an LLM call for the others. The map is the seed's YAML,
kept within a token budget for a large KB. Real USE, Milvus Lite, SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from conftest import SMALL_KB, SMALL_KB_DOMAINS
from superbiz import cli
from superbiz.config import Settings
from superbiz.exceptions import LLMUnavailableError
from superbiz.knowledge.coverage.domains import DESCRIPTION_CHARS, DomainService, derive_domain
from superbiz.knowledge.coverage.map import (
    DEFAULT_TOKEN_BUDGET,
    KnowledgeMap,
    MapDocument,
    MapDomain,
    build_map,
    estimate_tokens,
)
from superbiz.knowledge.documents.document import load_document
from superbiz.knowledge.documents.metadata import enrich
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.messages import AssistantMessage, ChatResponse, Message, ToolSpec
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.db import open_database
from superbiz.storage.domains import DomainRecord
from superbiz.storage.models import KnowledgeDomainRow
from superbiz.storage.repository import StoredDocument
from superbiz.testing import ScriptedChatModel

PAYMENT = "payment/支付失败排查.md"
PAYMENT_MD = SMALL_KB[PAYMENT]


class DomainModel:
    """A scripted ``ChatModel`` for ``DomainService``: answers by the domain it is asked
    about and counts its calls per domain."""

    name = "domain-model"

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        match = re.search(r"Domain: (\S+)", messages[-1].content)
        assert match is not None, messages[-1].content
        domain = match.group(1)
        self.calls[domain] += 1
        documents = len(re.findall(r"^- ", messages[-1].content, re.M))
        reply = {
            "description": f"{domain} v{self.calls[domain]} ({documents} documents)",
            "when_to_retrieve": f"Questions about {domain}.",
        }
        return ChatResponse(AssistantMessage(json.dumps(reply)), None, "stop")

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        raise NotImplementedError


class DownModel:
    name = "down"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        raise LLMUnavailableError("LLM endpoint http://127.0.0.1:9/v1 is unavailable")

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
        raise NotImplementedError


@pytest.fixture
def kb(
    tmp_path: Path,
    database_url: str,
    make_settings: Callable[..., Settings],
    use_embedder: Embedder,
) -> Iterator[KnowledgeBase]:
    opened = KnowledgeBase(make_settings(tmp_path, database_url), embedder=use_embedder)
    yield opened
    opened.close()


def rows(kb: KnowledgeBase) -> dict[str, tuple[str | None, int, datetime]]:
    """domain_id → (description, document_count, updated_at)."""
    with Session(kb.engine) as session:
        return {
            r.domain_id: (r.description, r.document_count, r.updated_at)
            for r in session.scalars(select(KnowledgeDomainRow))
        }


# -- the table and its rows ---------------------------------------------------------------------


def test_the_migration_creates_knowledge_domain(database_url: str) -> None:
    engine = open_database(database_url)
    try:
        inspector = inspect(engine)
        columns = {c["name"]: c for c in inspector.get_columns("knowledge_domain")}
        unique = [
            u["column_names"] for u in inspector.get_unique_constraints("knowledge_domain")
        ] + [i["column_names"] for i in inspector.get_indexes("knowledge_domain") if i["unique"]]
    finally:
        engine.dispose()
    assert set(columns) == {
        "id",
        "domain_id",
        "description",
        "when_to_retrieve",
        "document_count",
        "source",
        "created_at",
        "updated_at",
    }
    assert not columns["domain_id"]["nullable"] and columns["description"]["nullable"]
    assert ["domain_id"] in unique


def test_ingest_builds_a_row_per_domain(
    kb: KnowledgeBase, small_kb: Path, kb_writer: Callable[..., Path]
) -> None:
    kb_writer(
        small_kb,
        {
            "payment/refund.md": "---\ntitle: 退款指南\nwhen_to_retrieve: 用户询问退款进度时\n---\n"
            "# 退款指南\n\n退款一般三到五个工作日到账。\n"
        },
    )

    report = Ingestor(kb, domains=DomainService(kb)).ingest([small_kb])

    assert report.domains_changed == SMALL_KB_DOMAINS
    records = {r.domain_id: r for r in DomainService(kb).repository.all()}
    assert set(records) == SMALL_KB_DOMAINS
    payment = records["payment"]
    assert payment == DomainRecord(
        "payment",
        "payment: 退款指南; 支付失败排查",  # documents in path order
        "用户询问退款进度时 / 用户支付失败或回调异常时",
        2,
        "derived",
    )
    api = records["api"]
    assert (api.description, api.document_count) == ("api: API rate limiting", 1)
    assert (
        api.when_to_retrieve
        == "Clients that exceed their quota receive HTTP 429 Too Many Requests."
    )
    with Session(kb.engine) as session:
        stamps = [(r.created_at, r.updated_at) for r in session.scalars(select(KnowledgeDomainRow))]
    assert len(stamps) == len(SMALL_KB_DOMAINS)
    assert all(created is not None and updated is not None for created, updated in stamps)


def test_a_change_recomputes_only_its_domain(
    kb: KnowledgeBase, small_kb: Path, kb_writer: Callable[..., Path]
) -> None:
    model = DomainModel()
    ingestor = Ingestor(kb, domains=DomainService(kb, model))
    ingestor.ingest([small_kb])
    assert model.calls == Counter({d: 1 for d in SMALL_KB_DOMAINS})
    first = rows(kb)
    assert first["payment"][:2] == ("payment v1 (1 documents)", 1)

    # Unchanged files: nothing is recomputed.
    ingestor.ingest([small_kb])
    assert sum(model.calls.values()) == len(SMALL_KB_DOMAINS)

    # Change a payment document: only payment is summarised again.
    kb_writer(small_kb, {PAYMENT: PAYMENT_MD + "\n## 重复扣款\n重复扣款时发起冲正。\n"})
    report = ingestor.ingest([small_kb])
    assert report.updated == [PAYMENT] and report.domains_changed == {"payment"}
    assert model.calls["payment"] == 2 and sum(model.calls.values()) == 6
    second = rows(kb)
    assert second["payment"][0] == "payment v2 (1 documents)"
    assert second["payment"][2] >= first["payment"][2]
    assert {d: r for d, r in second.items() if d != "payment"} == {
        d: r for d, r in first.items() if d != "payment"
    }

    # Add an api document: only api.
    kb_writer(small_kb, {"api/auth-401.md": "# 401 Unauthorized\n\nThe token has expired.\n"})
    ingestor.ingest([small_kb])
    assert model.calls["api"] == 2 and sum(model.calls.values()) == 7
    third = rows(kb)
    assert third["api"][:2] == ("api v2 (2 documents)", 2)
    assert {d: r for d, r in third.items() if d != "api"} == {
        d: r for d, r in second.items() if d != "api"
    }

    # Remove the only ops document: its row goes, no LLM call, nothing else changes.
    (small_kb / "ops/notes/deploy-checklist.md").unlink()
    report = ingestor.ingest([small_kb], prune=True)
    assert report.removed == ["ops/notes/deploy-checklist.md"]
    assert sum(model.calls.values()) == 7
    fourth = rows(kb)
    assert "ops" not in fourth
    assert fourth == {d: r for d, r in third.items() if d != "ops"}

    # Move the glossary from general to api: both domains, and only they, are recomputed.
    kb_writer(small_kb, {"glossary.md": "---\ncategory: api\n---\n" + SMALL_KB["glossary.md"]})
    report = ingestor.ingest([small_kb])
    assert report.domains_changed == {"general", "api"}
    assert model.calls["api"] == 3 and model.calls["general"] == 1
    assert sum(model.calls.values()) == 8  # the emptied domain is dropped, not summarised
    fifth = rows(kb)
    assert set(fifth) == {"api", "infrastructure", "payment"}
    assert fifth["api"][:2] == ("api v3 (3 documents)", 3)
    assert fifth["payment"] == fourth["payment"]
    assert fifth["infrastructure"] == fourth["infrastructure"]


def test_ensure_all_builds_missing_rows_and_drops_empty_ones(
    kb: KnowledgeBase, small_kb: Path
) -> None:
    Ingestor(kb).ingest([small_kb])  # no DomainService: no rows yet
    assert rows(kb) == {}
    model = DomainModel()

    records = DomainService(kb, model).ensure_all()

    assert {r.domain_id for r in records} == SMALL_KB_DOMAINS
    assert all(r.source == "llm" for r in records)
    assert model.calls == Counter({d: 1 for d in SMALL_KB_DOMAINS})
    built = rows(kb)

    # A restart finds every row: no LLM call, nothing rewritten.
    restart = ScriptedChatModel()  # any call would fail: nothing is scripted
    DomainService(kb, restart).ensure_all()
    assert restart.steps == [] and rows(kb) == built

    # A row whose domain has no document is dropped; a missing row is rebuilt alone.
    service = DomainService(kb, model)
    service.repository.save(DomainRecord("ghost", "gone", None, 3, "derived"))
    service.repository.delete("api")
    records = service.ensure_all()
    assert {r.domain_id for r in records} == SMALL_KB_DOMAINS
    assert model.calls["api"] == 2 and sum(model.calls.values()) == len(SMALL_KB_DOMAINS) + 1
    after = rows(kb)
    assert {d: r for d, r in after.items() if d != "api"} == {
        d: r for d, r in built.items() if d != "api"
    }


def test_writers_saving_one_new_domain_at_once_do_not_collide(kb: KnowledgeBase) -> None:
    """Two turns (or replicas) building the map save the same missing domain: one row."""
    service = DomainService(kb)
    start = threading.Barrier(8)
    failures: list[BaseException] = []

    def save(n: int) -> None:
        start.wait()
        try:
            service.repository.save(DomainRecord("payment", f"writer {n}", None, n, "derived"))
        except BaseException as exc:
            failures.append(exc)

    writers = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(30)

    assert failures == []
    [(description, count, _)] = rows(kb).values()
    assert description == f"writer {count}"  # the last writer's row, whole


def test_the_domain_summary_is_repaired_once_then_derived(
    kb: KnowledgeBase, small_kb: Path
) -> None:
    Ingestor(kb).ingest([small_kb])
    good = json.dumps({"description": "支付链路问题排查", "when_to_retrieve": "涉及支付、退款时"})
    repaired = ScriptedChatModel("```\nnot json\n```", good)
    DomainService(kb, repaired).refresh(["payment"])
    failed = ScriptedChatModel(
        '{"description": "x"}', '{"description": "", "when_to_retrieve": "y"}'
    )
    DomainService(kb, failed).refresh(["api"])

    records = {r.domain_id: r for r in DomainService(kb).repository.all()}
    assert records["payment"] == DomainRecord(
        "payment", "支付链路问题排查", "涉及支付、退款时", 1, "llm"
    )
    assert "Answer again" in repaired.steps[1].system_texts[-1]
    assert len(failed.steps) == 2
    assert records["api"].source == "derived"
    assert records["api"].description == "api: API rate limiting"


def test_an_unreachable_llm_leaves_a_derived_domain_not_a_stale_one(
    kb: KnowledgeBase, small_kb: Path, kb_writer: Callable[..., Path]
) -> None:
    Ingestor(kb, domains=DomainService(kb)).ingest([small_kb])
    kb_writer(small_kb, {"payment/refund.md": "# 退款指南\n\n退款一般三到五个工作日到账。\n"})

    report = Ingestor(kb, domains=DomainService(kb, DownModel())).ingest([small_kb])

    assert report.added == ["payment/refund.md"]
    payment = {r.domain_id: r for r in DomainService(kb).repository.all()}["payment"]
    assert (payment.document_count, payment.source) == (2, "derived")


def test_derive_domain_clips_long_descriptions() -> None:
    docs = [
        StoredDocument(f"p/{i}.md", f"Runbook number {i}", "p", "h", 1, 1, "f", {})
        for i in range(40)
    ]

    record = derive_domain("p", docs)

    assert DESCRIPTION_CHARS - 2 <= len(record.description or "") <= DESCRIPTION_CHARS
    assert record.description.endswith("…") and record.when_to_retrieve is None  # type: ignore[union-attr]
    assert record.document_count == 40


# -- the map ----------------------------------------------------------------------------------


def test_the_map_is_the_seed_yaml(kb: KnowledgeBase, small_kb: Path) -> None:
    Ingestor(kb, domains=DomainService(kb)).ingest([small_kb])
    model = ScriptedChatModel()  # every row exists: building the map asks nothing

    kmap = build_map(kb, DomainService(kb, model))
    text = kmap.to_yaml()

    assert model.steps == []
    data = yaml.safe_load(text)
    assert set(data) == {"available_knowledge_domains"}  # within budget: no note
    domains = data["available_knowledge_domains"]
    assert [d["domain_id"] for d in domains] == sorted(SMALL_KB_DOMAINS) == kmap.domain_ids
    payment = next(d for d in domains if d["domain_id"] == "payment")
    assert payment["description"] == "payment: 支付失败排查"
    assert payment["when_to_retrieve"] == "用户支付失败或回调异常时"
    assert payment["documents"] == [
        {"title": "支付失败排查", "covers": ["支付回调超时", "退款失败"]}
    ]
    general = next(d for d in domains if d["domain_id"] == "general")
    assert general["documents"] == [{"title": "Glossary"}]  # no distinctive heading: no covers
    for domain in domains:
        assert {"domain_id", "description", "when_to_retrieve", "documents"} <= set(domain)
        assert "more_documents" not in domain
        for doc in domain["documents"]:
            assert set(doc) <= {"title", "covers"}  # document-level timing stays out
    assert "支付失败排查" in text  # unicode kept as is, not escaped
    assert estimate_tokens(text) <= DEFAULT_TOKEN_BUDGET


# -- a large KB within the token budget -------------------------------------------------------

LARGE_DOMAINS = ("payment", "infrastructure", "api", "database", "security")
LARGE_DOCS = 200


def write_large_kb(root: Path) -> Path:
    for i in range(LARGE_DOCS):
        domain = LARGE_DOMAINS[i % len(LARGE_DOMAINS)]
        path = root / domain / f"runbook-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\ncovers: [{domain} incident {i} first symptom, {domain} incident {i} rollback "
            f"plan, {domain} incident {i} escalation path]\n---\n"
            f"# {domain.title()} runbook {i}\n\nWhen {domain} incident {i} happens, restart "
            f"the worker.\n\n## Checking the {domain} queue {i}\nLook at the lag.\n",
            encoding="utf-8",
        )
    return root


def catalogue(kb: KnowledgeBase, folder: Path) -> None:
    """The documents of ``folder`` parsed and enriched as ingest does, stored without
    vectors (the map reads only the relational store; 200 Milvus writes would cost ~10 s)."""
    for file in sorted(folder.rglob("*.md")):
        doc = enrich(load_document(file, folder, 1 << 20), None).document
        kb.documents.save(
            StoredDocument(
                doc.path,
                doc.title,
                doc.domain,
                doc.content_hash,
                doc.size_bytes,
                1,
                str(file),
                doc.metadata(),
            )
        )


@pytest.fixture(scope="module")
def large_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("large-kb")
    data_dir = root / "data"
    kb = KnowledgeBase(Settings(data_dir=data_dir))
    try:
        catalogue(kb, write_large_kb(root / "kb"))
        DomainService(kb).ensure_all()
    finally:
        kb.close()
    return data_dir


@pytest.fixture
def large_map(large_data_dir: Path) -> Iterator[KnowledgeMap]:
    kb = KnowledgeBase(Settings(data_dir=large_data_dir))
    try:
        yield build_map(kb)
    finally:
        kb.close()


def check_summarised(text: str, budget: int) -> dict[str, Any]:
    assert estimate_tokens(text) <= budget
    data = yaml.safe_load(text)
    assert f"{budget}-token budget" in data["note"]
    domains = data["available_knowledge_domains"]
    assert [d["domain_id"] for d in domains] == sorted(LARGE_DOMAINS)
    assert sum(d["document_count"] for d in domains) == LARGE_DOCS
    for domain in domains:
        shown = len(domain.get("documents", []))
        assert domain["more_documents"] == domain["document_count"] - shown > 0
        for doc in domain.get("documents", []):
            assert doc["title"] and doc["covers"]
    return data


@pytest.mark.parametrize("budget", [6000, DEFAULT_TOKEN_BUDGET, 1500])
def test_a_large_map_is_summarised_within_the_budget(large_map: KnowledgeMap, budget: int) -> None:
    full = large_map.to_yaml(10**9)
    assert "note" not in yaml.safe_load(full)
    assert estimate_tokens(full) > 6000

    data = check_summarised(large_map.to_yaml(budget), budget)

    shown = [len(d.get("documents", [])) for d in data["available_knowledge_domains"]]
    if all(shown):
        assert f"at most {max(shown)} documents per domain" in data["note"]
    else:
        assert "domains only" in data["note"]


def test_a_tighter_budget_shows_fewer_documents(large_map: KnowledgeMap) -> None:
    def shown(budget: int) -> int:
        data = yaml.safe_load(large_map.to_yaml(budget))
        return sum(len(d.get("documents", [])) for d in data["available_knowledge_domains"])

    assert shown(10**9) == LARGE_DOCS > shown(6000) > shown(DEFAULT_TOKEN_BUDGET) >= shown(1500)


def test_a_map_never_claims_to_fit_a_budget_it_exceeds(large_map: KnowledgeMap) -> None:
    budget = 300
    text = large_map.to_yaml(budget)

    note = yaml.safe_load(text)["note"]
    assert estimate_tokens(text) <= budget or "exceed" in note


def test_a_map_built_from_objects_summarises_the_biggest_domains() -> None:
    docs = [MapDocument(f"Doc {i}", f"a/{i}.md", (f"cover {i}",)) for i in range(30)]
    kmap = KnowledgeMap(
        [
            MapDomain("a", "A", "when a", 30, docs),
            MapDomain("b", "B", "when b", 1, [MapDocument("Only", "b/o.md")]),
        ]
    )

    data = yaml.safe_load(kmap.to_yaml(250))

    a, b = data["available_knowledge_domains"]
    assert a["more_documents"] == 30 - len(a.get("documents", []))
    assert b["documents"] == [{"title": "Only"}] and "more_documents" not in b
    assert "note" in data


# -- superbiz map ---------------------------------------------------------------------------

runner = CliRunner()


def test_superbiz_map_prints_the_summarised_map(large_data_dir: Path) -> None:
    result = runner.invoke(cli.app, ["map", "--data-dir", str(large_data_dir)])

    assert result.exit_code == 0, result.output
    check_summarised(result.stdout, DEFAULT_TOKEN_BUDGET)


def test_superbiz_map_budget_option(large_data_dir: Path) -> None:
    result = runner.invoke(cli.app, ["map", "--data-dir", str(large_data_dir), "--budget", "1500"])

    assert result.exit_code == 0, result.output
    check_summarised(result.stdout, 1500)


def test_superbiz_map_of_the_small_kb(
    tmp_path: Path, small_kb: Path, use_embedder: Embedder
) -> None:
    data_dir = tmp_path / "data"
    kb = KnowledgeBase(Settings(data_dir=data_dir), embedder=use_embedder)
    try:
        Ingestor(kb).ingest([small_kb])  # no domain rows: the command builds them
    finally:
        kb.close()

    result = runner.invoke(cli.app, ["map", "--data-dir", str(data_dir)])

    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert [d["domain_id"] for d in data["available_knowledge_domains"]] == sorted(SMALL_KB_DOMAINS)
    assert "title: 支付失败排查" in result.stdout
    assert "covers:" in result.stdout and "note" not in data


def test_superbiz_map_of_an_empty_data_dir(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["map", "--data-dir", str(tmp_path / "empty")])

    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == {"available_knowledge_domains": []}


def test_a_long_category_gets_its_domain_row(
    request: pytest.FixtureRequest,
    kb: KnowledgeBase,
    tmp_path: Path,
    kb_writer: Callable[..., Path],
) -> None:
    """Documents accept a domain of up to 128 characters; its knowledge_domain row too."""
    category = "payment-" + "x" * 70
    folder = kb_writer(
        tmp_path / "long", {"a.md": f"---\ncategory: {category}\n---\n# A\n\nText.\n"}
    )

    Ingestor(kb, domains=DomainService(kb)).ingest([folder])

    assert [r.domain_id for r in DomainService(kb).repository.all()] == [category]


def _many_domains(count: int) -> KnowledgeMap:
    return KnowledgeMap(
        [
            MapDomain(
                f"team-{n:03d}",
                f"runbooks of team {n}: deploys, alerts and rollbacks",
                f"questions about the services team {n} owns",
                4,
                [MapDocument(f"Team {n} runbook {d}", f"team-{n:03d}/r{d}.md") for d in range(4)],
            )
            for n in range(count)
        ]
    )


def test_a_map_of_many_domains_shows_the_nearest_within_the_budget() -> None:
    kmap = _many_domains(300)
    assert estimate_tokens(kmap.to_yaml(10**9)) > 10 * DEFAULT_TOKEN_BUDGET
    nearness = {f"team-{n:03d}": -float(abs(n - 150)) for n in range(300)}

    shown = kmap.nearest(nearness, DEFAULT_TOKEN_BUDGET)
    text = shown.to_yaml(DEFAULT_TOKEN_BUDGET)

    assert estimate_tokens(text) <= DEFAULT_TOKEN_BUDGET
    data = yaml.safe_load(text)
    ids = [d["domain_id"] for d in data["available_knowledge_domains"]]
    assert ids[0] == "team-150" and 5 <= len(ids) < 300
    # the nearest ones, each with documents to recognise it by
    nearest = sorted(nearness, key=lambda domain: nearness[domain], reverse=True)
    assert ids == nearest[: len(ids)]
    assert all(d.get("documents") for d in data["available_knowledge_domains"])
    assert f"of 300 domains nearest the question, to fit the {DEFAULT_TOKEN_BUDGET}" in data["note"]


def test_a_narrowed_map_shows_as_many_of_the_nearest_domains_as_fit() -> None:
    """Not one fewer than fit (nor one more), with domains of very different sizes, and
    the same for every question asked of one map (its whole-map check is kept)."""
    kmap = KnowledgeMap(
        [
            MapDomain(
                f"d{n:03d}",
                "runbooks " * (1 + n % 17),
                "问题 " * (n % 5),
                n % 7,
                [
                    MapDocument(f"Runbook {n}.{d} " + "x" * (n % 40), f"d{n}/{d}.md")
                    for d in range(n % 7)
                ],
            )
            for n in range(240)
        ]
    )
    for seed in range(5):
        order = random.Random(seed).sample(range(240), 240)
        nearness = {f"d{n:03d}": -float(rank) for rank, n in enumerate(order)}
        shown = kmap.nearest(nearness, DEFAULT_TOKEN_BUDGET).domains
        ranked = [kmap.domains[n] for n in order]
        assert shown == ranked[: len(shown)] and 1 < len(shown) < 240
        fitting, bigger = KnowledgeMap(shown), KnowledgeMap(ranked[: len(shown) + 1])
        assert fitting.nearest({}, DEFAULT_TOKEN_BUDGET) is fitting
        assert bigger.nearest({}, DEFAULT_TOKEN_BUDGET) is not bigger


def test_a_map_that_fits_is_shown_whole() -> None:
    kmap = _many_domains(3)
    assert kmap.nearest({}, DEFAULT_TOKEN_BUDGET) is kmap
