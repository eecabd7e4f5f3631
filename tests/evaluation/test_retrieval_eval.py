"""``evaluate_retrieval``: supplements per level and an answer-only dataset's summary line.

Real KB (USE + Milvus Lite + SQLite) on the small KB; the embedder is the session's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from superbiz.config import Settings
from superbiz.evaluation.metrics import wilson_interval
from superbiz.evaluation.retrieval import (
    evaluate_retrieval,
    is_answer_only,
    load_queries,
    render_report,
    render_reports,
)
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

QUERIES = [
    {"id": "q1", "query": "支付回调超时怎么办", "lang": "zh", "gold": ["payment/支付失败排查.md"]},
    {
        "id": "q2",
        "query": "how to raise the per-tenant request limit",
        "lang": "en",
        "gold": ["api/rate-limit.md"],
    },
    {
        "id": "q3",
        "query": "repeating a request has the same effect",
        "lang": "en",
        "gold": ["glossary.md"],
    },
]


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


def _dataset(root: Path, kb_writer: Callable[..., Path], readme: str | None) -> Path:
    kb_writer(root / "corpus")
    lines = (json.dumps(q, ensure_ascii=False) for q in QUERIES)
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if readme is not None:
        (root / "README.md").write_text(readme, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("readme", "expected"),
    [
        ("# DEV evaluation set, variant answer-only: runbooks\n", True),
        ("# DEV evaluation set\n\nNot answer-only: see the variant.\n", False),
        ("no heading, answer-only in prose only\n", False),
        (None, False),
    ],
)
def test_answer_only_is_read_from_the_readme_title(
    tmp_path: Path, readme: str | None, expected: bool
) -> None:
    if readme is not None:
        (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    assert is_answer_only(tmp_path) is expected


@pytest.mark.parametrize("query", ["", "  ", None, 42, ["a"]])
def test_a_query_line_without_a_question_is_refused_with_its_line(
    tmp_path: Path, query: object
) -> None:
    rows = [QUERIES[0], {"id": "bad", "query": query, "gold": ["a.md"]}]
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    with pytest.raises(SuperbizError, match=r"queries.jsonl:2: not a query line \(its query is"):
        load_queries(tmp_path)


def test_report_counts_supplements_per_level_and_summarises_answer_only(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    dataset = _dataset(tmp_path / "ds", kb_writer, "# Small set, variant answer-only\n")
    report = evaluate_retrieval(dataset, Settings(data_dir=tmp_path / "data"))

    assert report["answer_only"] is True
    found = sum(row["count"] for name, row in report["levels"].items() if name != "NONE")
    shown = 0.0
    for row in report["levels"].values():
        per_lookup, foreign = row["supplements_per_lookup"], row["cross_language_share"]
        assert per_lookup is None or per_lookup >= 0
        assert foreign is None or 0.0 <= foreign <= 1.0
        shown += (per_lookup or 0.0) * row["count"]
    overall = report["supplements"]
    assert overall["supplements_per_lookup"] == pytest.approx(shown / found, abs=1e-3)
    # a lookup whose primary is gold has shown gold; supplements can only add to that
    primary_gold = sum(
        (row["precision"] or 0.0) * row["count"]
        for name, row in report["levels"].items()
        if name != "NONE"
    )
    assert primary_gold / report["queries"] - 1e-3 <= report["gold_shown"] <= 1.0

    console = Console(record=True, width=200)
    render_report(report, console)
    text = console.export_text()
    assert "supplements/lookup" in text and "other language" in text
    summary = [line for line in text.splitlines() if line.startswith("answer-only:")]
    assert len(summary) == 1
    assert "zh R@1" in summary[0] and "en R@1" in summary[0]
    assert "HIGHLY_RELEVANT precision" in summary[0] and "gold shown" in summary[0]
    assert "gold document shown (primary or supplement)" in text


def test_a_corpus_file_skipped_as_part_of_a_page_is_no_fault_and_a_broken_one_is(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    """A site built by Sphinx keeps each page's source beside it (``_sources/``): an
    evaluation of the built site runs; an empty file still stops it, named."""
    dataset = _dataset(tmp_path / "ds", kb_writer, None)
    (dataset / "corpus" / "objects.inv").write_bytes(b"# Sphinx inventory version 2\n")
    kb_writer(dataset / "corpus" / "_sources", {"glossary.md.txt": "# Glossary\nCopied.\n"})

    report = evaluate_retrieval(dataset, Settings(data_dir=tmp_path / "data"), limit=1)

    assert report["queries"] == 1
    (dataset / "corpus" / "empty.md").write_text("")
    with pytest.raises(SuperbizError, match=r"^1 corpus files could not be ingested \(empty.md"):
        evaluate_retrieval(dataset, Settings(data_dir=tmp_path / "data"), limit=1)


def test_a_dev_dataset_prints_no_answer_only_line(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    dataset = _dataset(tmp_path / "ds", kb_writer, None)
    report = evaluate_retrieval(dataset, Settings(data_dir=tmp_path / "data"), limit=1)
    assert report["answer_only"] is False
    console = Console(record=True, width=200)
    render_report(report, console)
    assert "answer-only:" not in console.export_text()


def test_each_level_precision_comes_with_its_95_percent_interval(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    dataset = _dataset(tmp_path / "ds", kb_writer, None)
    report = evaluate_retrieval(dataset, Settings(data_dir=tmp_path / "data"))

    found = {name: row for name, row in report["levels"].items() if name != "NONE"}
    assert found
    for row in found.values():
        hits = round(row["precision"] * row["count"])
        assert row["precision_95"] == list(wilson_interval(hits, row["count"]) or ())
        low, high = row["precision_95"]
        assert low <= row["precision"] <= high
    console = Console(record=True, width=200)
    render_reports({"datasets": [report, report]}, console)
    text = console.export_text()
    row = next(iter(found.values()))
    low, high = row["precision_95"]
    assert f"{row['precision']:.3f} [{low:.3f}–{high:.3f}]" in text
    assert "PRECISE precision [95 %]" in text and "HIGHLY_RELEVANT precision [95 %]" in text


def test_a_data_directory_holding_another_datasets_kb_is_refused_untouched(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    """dev2 pointed at dev2-answer-only's data directory had added the files the two do
    not share to it before stopping on the others: the KB is now refused as it is."""
    first = _dataset(tmp_path / "first", kb_writer, None)
    second = _dataset(tmp_path / "second", kb_writer, None)
    (second / "corpus" / "extra.md").write_text("# Extra\n\nOnly the second set has it.\n")
    settings = Settings(data_dir=tmp_path / "data")
    evaluate_retrieval(first, settings, limit=1)
    kb = KnowledgeBase(settings)
    before = sorted(kb.documents.fingerprints())
    kb.close()

    with pytest.raises(SuperbizError, match=r"holds another knowledge base .*first/corpus"):
        evaluate_retrieval(second, settings, limit=1)

    kb = KnowledgeBase(settings)
    assert sorted(kb.documents.fingerprints()) == before  # nothing of the second added
    kb.close()
    # the same dataset moved elsewhere: its old files are gone, the new ones replace them
    moved = tmp_path / "moved"
    first.rename(moved)
    assert evaluate_retrieval(moved, settings, limit=1)["queries"] == 1
