"""Document metadata for the knowledge map: ``covers`` and ``when_to_retrieve``.

Frontmatter values always win; without an LLM the metadata is derived (distinctive
headings → covers, first paragraph → when_to_retrieve) and marked ``derived``; with an LLM
(a scripted model, or the client talking to the strict fake OpenAI server) it is
validated, repaired once, and on failure the document is still ingested with derived
metadata and the failure reported. Derived covers are only headings: the exact index (L0)
ignores them. Ingestion is real (USE, Milvus Lite, SQLite).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from fakes.openai_server import FakeOpenAIServer
from superbiz import cli
from superbiz.config import LLMSettings, Settings
from superbiz.exceptions import LLMUnavailableError
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.documents.document import (
    HEADLINE_DESCRIPTION_CHARS,
    SourceDocument,
    parse_document,
)
from superbiz.knowledge.documents.metadata import (
    MAX_COVER_CHARS,
    MAX_COVERS,
    MAX_WHEN_CHARS,
    LLMMetadataWriter,
    MetadataReply,
    derive_metadata,
    enrich,
)
from superbiz.knowledge.ingest.batches import chunk_record
from superbiz.knowledge.ingest.ingestor import Ingestor, IngestReport
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.exact_entries import exact_entry
from superbiz.llm.messages import Message, SystemMessage, ToolSpec, UserMessage
from superbiz.llm.openai_compat import OpenAIChatModel
from superbiz.llm.structured import parse_structured
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.exact_index import MatchField
from superbiz.storage.repository import StoredDocument
from superbiz.testing import ScriptedChatModel

ROLLBACK = "ops/rollback.md"
FAILOVER = "ops/failover.md"
QUEUE = "ops/queue-backlog.md"

ROLLBACK_MD = """# Release rollback

Roll back a release when error rates climb right after a deploy.

## Symptoms
Error rate above 5 % within ten minutes of the deploy.

## Canary analysis
Compare the canary's error budget with the baseline before widening the rollout.

## 3. 排查步骤
Check the deploy log first.
"""
FAILOVER_MD = """---
title: DNS failover
covers: [DNS failover drill, 切换演练]
when_to_retrieve: 用户要做 DNS 主备切换或演练时
---
# DNS failover

Switch the primary record to the standby region.
"""
QUEUE_MD = """# Queue backlog

Consumers fall behind and the backlog grows past the alert threshold.

## Scaling consumers
Add consumers until the lag shrinks.
"""
VALID = json.dumps(
    {"covers": ["Canary analysis", "rollback after deploy"], "when_to_retrieve": "x"}
)


def doc_of(text: str, path: str = ROLLBACK) -> SourceDocument:
    return parse_document(text.encode("utf-8"), PurePosixPath(path))


def metadata_reply(covers: Sequence[str], when: str) -> str:
    return json.dumps({"covers": list(covers), "when_to_retrieve": when}, ensure_ascii=False)


# -- frontmatter always wins ---------------------------------------------------------------


def test_frontmatter_values_win_and_the_llm_is_not_asked() -> None:
    model = ScriptedChatModel()  # any call would fail the test: nothing is scripted
    doc = doc_of(FAILOVER_MD, FAILOVER)

    enriched = enrich(doc, LLMMetadataWriter(model))

    assert enriched.failure is None and model.steps == []
    assert enriched.document.covers == ("DNS failover drill", "切换演练")
    assert enriched.document.when_to_retrieve == "用户要做 DNS 主备切换或演练时"
    assert enriched.document.origin == {"covers": "frontmatter", "when_to_retrieve": "frontmatter"}


@pytest.mark.parametrize(
    "with_llm",
    [False, True],
    ids=["derived", "llm"],
)
def test_a_frontmatter_field_wins_over_the_other_source(with_llm: bool) -> None:
    """Only ``covers`` in the frontmatter: it stays; ``when_to_retrieve`` is filled."""
    text = "---\ncovers: [canary rollback]\n---\n" + ROLLBACK_MD
    model = ScriptedChatModel(metadata_reply(["llm cover"], "When a deploy goes bad."))
    writer = LLMMetadataWriter(model) if with_llm else None

    enriched = enrich(doc_of(text), writer).document

    source = "llm" if with_llm else "derived"
    assert enriched.covers == ("canary rollback",)
    assert enriched.when_to_retrieve == (
        "When a deploy goes bad."
        if with_llm
        else "Roll back a release when error rates climb right after a deploy."
    )
    assert enriched.origin == {"covers": "frontmatter", "when_to_retrieve": source}


def test_a_frontmatter_when_wins_over_the_llm() -> None:
    text = "---\nwhen_to_retrieve: During a bad deploy.\n---\n" + ROLLBACK_MD
    model = ScriptedChatModel(metadata_reply(["canary analysis"], "LLM sentence."))

    enriched = enrich(doc_of(text), LLMMetadataWriter(model)).document

    assert enriched.covers == ("canary analysis",)
    assert enriched.when_to_retrieve == "During a bad deploy."
    assert enriched.origin == {"covers": "llm", "when_to_retrieve": "frontmatter"}


# -- derived without an LLM -----------------------------------------------------------------


def test_without_an_llm_headings_become_covers_and_the_first_paragraph_when() -> None:
    enriched = enrich(doc_of(ROLLBACK_MD), None)

    # "Symptoms" and "3. 排查步骤" are generic section names; the title is not a cover.
    assert enriched.document.covers == ("Canary analysis",)
    assert enriched.document.when_to_retrieve == (
        "Roll back a release when error rates climb right after a deploy."
    )
    assert enriched.document.origin == {"covers": "derived", "when_to_retrieve": "derived"}
    assert enriched.failure is None


def test_derived_covers_are_plain_unique_clipped_and_at_most_six() -> None:
    headings = [f"## Topic {i} **bold** `code`\ntext {i}\n" for i in range(9)]
    body = (
        "# Many topics\n\n> Quoted *first* paragraph with a [link](http://x).\n\n"
        + "## [Feature flags](http://flags)\nx\n## Feature flags\ny\n"
        + f"## {'Very long heading ' * 8}\nz\n"
        + "".join(headings)
    )

    covers, when = derive_metadata(doc_of(body))

    assert len(covers) == MAX_COVERS
    assert covers[0] == "Feature flags"  # link syntax removed, the duplicate dropped
    assert len(covers[1]) == MAX_COVER_CHARS and covers[1].startswith("Very long heading")
    assert covers[2] == "Topic 0 bold code"
    assert when == "Quoted first paragraph with a link."


def test_a_long_first_paragraph_is_clipped_and_a_bare_document_falls_back_to_its_title() -> None:
    _, when = derive_metadata(doc_of("# Long\n\n" + "word " * 200))
    covers, bare = derive_metadata(doc_of("# Only a title\n\n```\nls\n```\n", "x/bare.md"))

    assert len(when) == MAX_WHEN_CHARS
    assert (covers, bare) == ((), "Only a title")


def test_derived_metadata_of_a_chinese_document() -> None:
    body = "# 订单超卖\n\n大促期间库存扣减出现负数时参考本文。\n\n## 概述\n略\n## 库存预扣\n略\n"

    assert derive_metadata(doc_of(body, "order/oversell.md")) == (
        ("库存预扣",),
        "大促期间库存扣减出现负数时参考本文。",
    )


def test_a_code_block_is_not_the_first_paragraph() -> None:
    body = (
        "# Release rollback\n\n```bash\nkubectl rollout undo deploy/web\n```\n\n"
        "Roll back when error rates climb.\n"
    )

    _, when = derive_metadata(doc_of(body))

    assert when == "Roll back when error rates climb."


# -- the LLM writer: validated, one repair ----------------------------------------------------


def test_valid_json_from_the_llm_is_used_with_origin_llm() -> None:
    model = ScriptedChatModel(f"```json\n{VALID}\n```")

    enriched = enrich(doc_of(ROLLBACK_MD), LLMMetadataWriter(model))

    assert enriched.failure is None
    assert enriched.document.covers == ("Canary analysis", "rollback after deploy")
    assert enriched.document.when_to_retrieve == "x"
    assert enriched.document.origin == {"covers": "llm", "when_to_retrieve": "llm"}
    [step] = model.steps
    system, user = step.messages
    assert isinstance(system, SystemMessage) and isinstance(user, UserMessage)
    assert '"covers"' in system.content and "English" in system.content
    assert user.content.startswith("Title: Release rollback\n\n")
    assert "Canary analysis" in user.content
    assert step.tools == ()


def test_a_chinese_document_asks_for_chinese_metadata() -> None:
    model = ScriptedChatModel(metadata_reply(["库存预扣"], "库存扣成负数时"))
    doc = doc_of("# 订单超卖\n\n大促期间库存扣减出现负数时参考本文，按步骤核对库存流水。\n")

    LLMMetadataWriter(model).write(doc)

    assert "Chinese" in model.steps[0].system_texts[0]


def test_malformed_json_then_valid_on_the_repair_retry_is_llm() -> None:
    model = ScriptedChatModel('{"covers": ["Canary analysis", }', VALID)

    enriched = enrich(doc_of(ROLLBACK_MD), LLMMetadataWriter(model))

    assert enriched.failure is None
    assert enriched.document.origin == {"covers": "llm", "when_to_retrieve": "llm"}
    assert enriched.document.covers == ("Canary analysis", "rollback after deploy")
    first, second = model.steps
    assert second.messages[: len(first.messages)] == first.messages
    [repair] = second.messages[len(first.messages) :]
    assert isinstance(repair, SystemMessage)
    assert "invalid JSON" in repair.content and '"when_to_retrieve"' in repair.content


def test_malformed_twice_falls_back_to_derived_and_reports_the_failure() -> None:
    model = ScriptedChatModel(
        "sure! here are the covers", '{"covers": [], "when_to_retrieve": "x"}'
    )

    enriched = enrich(doc_of(ROLLBACK_MD), LLMMetadataWriter(model))

    assert len(model.steps) == 2  # one repair, no more
    assert enriched.document.covers == ("Canary analysis",)
    assert enriched.document.origin == {"covers": "derived", "when_to_retrieve": "derived"}
    assert enriched.failure is not None
    assert "after one repair" in enriched.failure and "'covers'" in enriched.failure


def test_an_llm_that_fails_leaves_derived_metadata_and_the_reason() -> None:
    class Down:
        name = "down"

        def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
            raise LLMUnavailableError("LLM endpoint http://127.0.0.1:9/v1 is unavailable")

        def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Any:
            raise NotImplementedError

    enriched = enrich(doc_of(ROLLBACK_MD), LLMMetadataWriter(Down()))

    assert enriched.document.origin["covers"] == "derived"
    assert enriched.failure == "LLM endpoint http://127.0.0.1:9/v1 is unavailable"


# -- MetadataReply ----------------------------------------------------------------------------


def parse_metadata(reply: str) -> tuple[tuple[str, ...], str]:
    value = parse_structured(reply, MetadataReply)
    return tuple(value.covers), value.when_to_retrieve


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"covers": ["a b"], "when_to_retrieve": "when x"}', (("a b",), "when x")),
        ('Here you go:\n```json\n{"covers": ["a"], "when_to_retrieve": "w"}\n```', (("a",), "w")),
        (
            '{"covers": ["  a  ", "a", "", "b"], "when_to_retrieve": "  w  "}',
            (("a", "b"), "w"),
        ),
        (
            '{"covers": ["支付超时", "扣款无回调"], "when_to_retrieve": "支付失败时"}',
            (("支付超时", "扣款无回调"), "支付失败时"),
        ),
    ],
)
def test_parse_metadata_accepts(reply: str, expected: tuple[tuple[str, ...], str]) -> None:
    assert parse_metadata(reply) == expected


def test_parse_metadata_clips_to_the_limits() -> None:
    reply = json.dumps(
        {"covers": [f"cover {i} " + "x" * 80 for i in range(10)], "when_to_retrieve": "w" * 999}
    )

    covers, when = parse_metadata(reply)

    assert len(covers) == MAX_COVERS and all(len(c) == MAX_COVER_CHARS for c in covers)
    assert len(when) == MAX_WHEN_CHARS


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("no json here", "no JSON object"),
        ('{"covers": ["a", }', "invalid JSON"),
        ('{"when_to_retrieve": "w"}', "'covers': Field required"),
        ('{"covers": "a, b", "when_to_retrieve": "w"}', "'covers': Input should be a valid list"),
        ('{"covers": [], "when_to_retrieve": "w"}', "'covers': List should have at least 1 item"),
        ('{"covers": ["a", 3], "when_to_retrieve": "w"}', "'covers.1': Input should be a valid"),
        ('{"covers": [" ", ""], "when_to_retrieve": "w"}', "'covers': only empty strings"),
        ('{"covers": ["a"]}', "'when_to_retrieve': Field required"),
        ('{"covers": ["a"], "when_to_retrieve": "  "}', "'when_to_retrieve': String should have"),
        ('{"covers": ["a"], "when_to_retrieve": ["w"]}', "'when_to_retrieve': Input should be"),
    ],
)
def test_parse_metadata_rejects(reply: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_metadata(reply)


# -- ingestion: stored metadata, the exact index, reported failures ----------------------------


@pytest.fixture
def open_kb(tmp_path: Path, use_embedder: Embedder) -> Iterator[Callable[[], KnowledgeBase]]:
    opened: list[KnowledgeBase] = []

    def make() -> KnowledgeBase:
        settings = Settings(data_dir=tmp_path / "data")
        kb = KnowledgeBase(settings, embedder=use_embedder)
        opened.append(kb)
        return kb

    yield make
    for kb in opened:
        kb.close()


@pytest.fixture
def ops_kb(tmp_path: Path, kb_writer: Callable[..., Path]) -> Path:
    return kb_writer(
        tmp_path / "kb", {ROLLBACK: ROLLBACK_MD, FAILOVER: FAILOVER_MD, QUEUE: QUEUE_MD}
    )


def exact_fields(kb: KnowledgeBase, query: str) -> dict[str, MatchField]:
    return {m.doc_path: m.field for m in kb.exact_index.match(query)}


def test_ingest_without_an_llm_stores_derived_metadata_that_l0_ignores(
    open_kb: Callable[[], KnowledgeBase], ops_kb: Path
) -> None:
    kb = open_kb()

    report = Ingestor(kb).ingest([ops_kb])

    assert sorted(report.added) == [FAILOVER, QUEUE, ROLLBACK]
    assert report.metadata_failures == []
    rollback = kb.documents.get(ROLLBACK)
    assert rollback is not None
    assert rollback.covers == ["Canary analysis"]
    assert rollback.when_to_retrieve == (
        "Roll back a release when error rates climb right after a deploy."
    )
    assert rollback.origin == {"covers": "derived", "when_to_retrieve": "derived"}
    failover = kb.documents.get(FAILOVER)
    assert failover is not None and failover.origin == {
        "covers": "frontmatter",
        "when_to_retrieve": "frontmatter",
    }
    # L0: frontmatter covers match, derived covers (headings) do not.
    assert exact_fields(kb, "什么时候需要做切换演练") == {FAILOVER: MatchField.COVERS}
    assert exact_fields(kb, "How do I run a canary analysis?") == {}
    assert exact_fields(kb, "consumers lag: scaling consumers?") == {}


@pytest.mark.parametrize(
    ("origin", "indexed"),
    [("derived", ()), ("llm", ("Canary analysis",)), ("frontmatter", ("Canary analysis",))],
)
def test_the_exact_index_takes_covers_unless_derived(origin: str, indexed: tuple[str, ...]) -> None:
    metadata = {
        "covers": ["Canary analysis"],
        "tags": ["deploy"],
        "aliases": ["undo a release"],
        "origin": {"covers": origin, "when_to_retrieve": origin},
    }
    doc = StoredDocument(ROLLBACK, "Release rollback", "ops", "h", 1, 1, "f", metadata)

    entry = exact_entry(doc)

    assert entry.covers == indexed
    assert (entry.title, entry.aliases, entry.tags) == (
        "Release rollback",
        ("undo a release",),
        ("deploy",),
    )


@pytest.mark.parametrize(
    ("path", "keys"),
    [
        ("ops/incompatible.md", ()),  # one word: how the file was filed
        ("ops/mysql-failover.md", ("mysql-failover",)),
        ("ops/NodeClockSkewDetected.md", ("NodeClockSkewDetected",)),
    ],
)
def test_the_file_name_is_a_key_only_when_it_is_a_name(path: str, keys: tuple[str, ...]) -> None:
    stem = path.rsplit("/", 1)[1].removesuffix(".md")
    doc = StoredDocument(path, "不向前兼容的更新", "ops", "h", 1, 1, "f", {"aliases": [stem]})

    assert exact_entry(doc).aliases == keys


def per_title(replies: dict[str, list[str]]) -> Callable[..., str]:
    """A scripted reply that answers by the document's title (order-independent)."""

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        title = re.match(r"Title: (.+)", messages[1].content)
        assert title is not None, messages[1].content
        return replies[title.group(1)].pop(0)

    return reply


def test_ingest_with_an_llm_valid_repaired_and_failed(
    open_kb: Callable[[], KnowledgeBase], ops_kb: Path
) -> None:
    replies = {
        "Release rollback": [metadata_reply(["Canary analysis", "bad deploy"], "After a deploy.")],
        "Queue backlog": ["not json", metadata_reply(["consumer lag"], "When consumers lag.")],
    }
    model = ScriptedChatModel(*[per_title(replies)] * 3)
    kb = open_kb()

    report = Ingestor(kb, metadata=LLMMetadataWriter(model)).ingest([ops_kb])

    assert len(model.steps) == 3  # rollback once, queue twice; failover has its frontmatter
    assert report.metadata_failures == []
    rollback, queue = kb.documents.get(ROLLBACK), kb.documents.get(QUEUE)
    assert rollback is not None and queue is not None
    assert (rollback.covers, rollback.when_to_retrieve) == (
        ["Canary analysis", "bad deploy"],
        "After a deploy.",
    )
    assert rollback.origin == {"covers": "llm", "when_to_retrieve": "llm"}
    assert queue.origin == {"covers": "llm", "when_to_retrieve": "llm"}
    assert queue.covers == ["consumer lag"]
    # LLM covers are real scenarios: the exact index uses them.
    assert exact_fields(kb, "How do I run a canary analysis?") == {ROLLBACK: MatchField.COVERS}

    # Unchanged documents are not described again (a restart costs no LLM call).
    again = Ingestor(kb, metadata=LLMMetadataWriter(ScriptedChatModel())).ingest([ops_kb])
    assert sorted(again.unchanged) == [FAILOVER, QUEUE, ROLLBACK]


def test_ingest_with_an_llm_failing_twice_keeps_the_document_and_reports_it(
    open_kb: Callable[[], KnowledgeBase], ops_kb: Path
) -> None:
    model = ScriptedChatModel(
        # ops/failover.md has its frontmatter; then ops/queue-backlog.md, ops/rollback.md
        "I cannot help with that",
        '{"covers": ["consumer lag"], "when_to_retrieve": null}',
        metadata_reply(["Canary analysis"], "After a deploy."),
    )
    kb = open_kb()

    report = Ingestor(kb, metadata=LLMMetadataWriter(model)).ingest([ops_kb])

    assert model.pending == 0
    assert sorted(report.added) == [FAILOVER, QUEUE, ROLLBACK]
    [(path, reason)] = report.metadata_failures
    assert path == QUEUE
    assert "after one repair" in reason and "'when_to_retrieve'" in reason
    assert report.as_dict()["metadata_failures"] == [{"path": path, "reason": reason}]
    queue = kb.documents.get(QUEUE)
    assert queue is not None and queue.chunk_count > 0  # still ingested and indexed
    assert queue.covers == ["Scaling consumers"]
    assert queue.when_to_retrieve == (
        "Consumers fall behind and the backlog grows past the alert threshold."
    )
    assert queue.origin == {"covers": "derived", "when_to_retrieve": "derived"}
    _, hits = kb.searcher.search("consumers fall behind and the backlog grows")
    assert hits and hits[0].doc_path == QUEUE
    rollback = kb.documents.get(ROLLBACK)
    assert rollback is not None and rollback.origin["covers"] == "llm"


# -- the CLI against the strict fake OpenAI server ---------------------------------------------


@pytest.fixture
def shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


def test_cli_ingest_with_the_fake_server_reports_metadata_failures(
    shared_embedder: None, ops_kb: Path, tmp_path: Path
) -> None:
    with FakeOpenAIServer() as server:
        server.script_chat(
            # ops/failover.md has frontmatter; ops/queue-backlog.md, then ops/rollback.md:
            "[]",
            "still not an object",
            metadata_reply(["Canary analysis"], "After a deploy."),
            # the one changed domain, summarised once
            json.dumps({"description": "Operations runbooks", "when_to_retrieve": "Ops issues."}),
        )
        env = {
            "SUPERBIZ_LLM__MODEL": "fake-model",
            "SUPERBIZ_LLM__BASE_URL": server.base_url,
            "SUPERBIZ_LLM__MAX_RETRIES": "0",
        }
        data_dir = tmp_path / "data"
        result = CliRunner().invoke(
            cli.app, ["ingest", str(ops_kb), "--data-dir", str(data_dir), "--json"], env=env
        )
        assert server.pending_chat_replies == 0
        requests = server.chat_requests

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [f["path"] for f in report["metadata_failures"]] == [QUEUE]
    assert report["domains_changed"] == ["ops"]
    assert len(requests) == 4
    assert "Title: Queue backlog" in requests[0]["messages"][1]["content"]
    kb = KnowledgeBase(Settings(data_dir=data_dir))
    try:
        stored = {d.path: d.origin for d in kb.documents.all()}
        [domain] = DomainService(kb).repository.all()
    finally:
        kb.close()
    assert stored == {
        FAILOVER: {"covers": "frontmatter", "when_to_retrieve": "frontmatter"},
        QUEUE: {"covers": "derived", "when_to_retrieve": "derived"},
        ROLLBACK: {"covers": "llm", "when_to_retrieve": "llm"},
    }
    assert (domain.domain_id, domain.source, domain.description) == (
        "ops",
        "llm",
        "Operations runbooks",
    )


def test_the_openai_client_writes_metadata_through_the_fake_server() -> None:
    with FakeOpenAIServer() as server:
        server.script_chat(metadata_reply(["Canary analysis"], "After a deploy."))
        model = OpenAIChatModel(
            LLMSettings(base_url=server.base_url, model="fake-model", max_retries=0),
            sleep=lambda _s: None,
        )
        covers, when = LLMMetadataWriter(model).write(doc_of(ROLLBACK_MD))
        [request] = server.chat_requests

    assert (covers, when) == (("Canary analysis",), "After a deploy.")
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "tools" not in request


def test_ingest_report_lists_metadata_failures_as_dicts() -> None:
    report = IngestReport(metadata_failures=[("a.md", "no JSON object")])

    assert report.as_dict()["metadata_failures"] == [{"path": "a.md", "reason": "no JSON object"}]


def test_the_headline_carries_only_a_description_the_author_wrote() -> None:
    """Each chunk is embedded and indexed under its document's headline: the title and
    the frontmatter's description; one derived from the opening or written by a model
    does not head the chunks (the opening is in the first chunk already; a model's is a
    guess)."""
    written = enrich(doc_of(FAILOVER_MD, FAILOVER), None).document
    assert written.headline == "DNS failover\n用户要做 DNS 主备切换或演练时"
    derived = enrich(doc_of(ROLLBACK_MD), None).document
    assert derived.when_to_retrieve and derived.origin["when_to_retrieve"] == "derived"
    assert derived.headline == "Release rollback"
    model = ScriptedChatModel(VALID)
    guessed = enrich(doc_of(ROLLBACK_MD), LLMMetadataWriter(model)).document
    assert guessed.when_to_retrieve == "x" and guessed.headline == "Release rollback"


def test_a_page_long_description_heads_each_chunk_clipped() -> None:
    """A description of 50,000 characters heads each chunk with its first
    ``HEADLINE_DESCRIPTION_CHARS``: the chunk's own text is still what BM25 indexes."""
    body = "## Steps\n\nRun `vault write transit/keys/api/rotate` to rotate the key.\n"
    text = f"---\ntitle: Rotate\ndescription: {'word ' * 10_000}\n---\n{body}"
    doc = enrich(doc_of(text, "ops/rotate.md"), None).document
    assert len(doc.headline) <= len("Rotate\n") + HEADLINE_DESCRIPTION_CHARS
    (chunk,) = chunk_markdown(doc.body, 800, 100)
    record = chunk_record(doc, chunk, np.zeros(4, dtype=np.float32))
    assert "vault write transit/keys/api/rotate" in record.search_text
    assert len(record.search_text) < 2 * len(doc.headline) + len(body) + 50
