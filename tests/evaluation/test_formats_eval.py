"""``superbiz eval formats``: a small dataset rendered by the real converters (pandoc,
and LibreOffice for PDF where it is installed), each rendering ingested and searched
beside the Markdown original."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from superbiz.cli import app
from superbiz.config import Settings
from superbiz.evaluation.formats import evaluate_formats, render_dataset
from superbiz.exceptions import SuperbizError

DOCS = {
    "infrastructure/redis-pool.md": (
        "---\ntitle: Redis pool exhausted\n---\n# Redis pool exhausted\n\n"
        "## Symptoms\nClients time out waiting for a connection from the pool.\n\n"
        "## Fix\n```\nredis-cli CONFIG SET maxclients 20000\n```\n\n"
        "| setting | value |\n| --- | --- |\n| maxclients | 10000 |\n"
    ),
    "payment/refund.md": (
        "---\ntitle: 退款失败排查\n---\n## 退款失败\n\n"
        "退款失败通常是因为原交易已经关闭或者商户余额不足。\n"
    ),
    "kubernetes/crashloop.md": (
        "---\ntitle: KubePodCrashLooping\n---\n# KubePodCrashLooping\n\n"
        "## Meaning\nPod is in CrashLoop which means the app dies or is unresponsive.\n"
    ),
}
QUERIES = [
    {
        "id": "q1",
        "query": "redis clients time out waiting for a connection",
        "lang": "en",
        "gold": ["infrastructure/redis-pool.md"],
    },
    {"id": "q2", "query": "退款失败怎么办", "lang": "zh", "gold": ["payment/refund.md"]},
    {
        "id": "q3",
        "query": "pod keeps restarting in crash loop",
        "lang": "en",
        "gold": ["kubernetes/crashloop.md"],
    },
]
needs_pandoc = pytest.mark.skipif(shutil.which("pandoc") is None, reason="pandoc is not installed")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    for relative, text in DOCS.items():
        path = root / "corpus" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    lines = "\n".join(json.dumps(q, ensure_ascii=False) for q in QUERIES)
    (root / "queries.jsonl").write_text(lines + "\n", encoding="utf-8")
    return root


@needs_pandoc
def test_a_rendered_dataset_keeps_its_folders_and_points_its_gold_at_the_new_files(
    dataset: Path, tmp_path: Path
) -> None:
    target = tmp_path / "html"
    first = render_dataset(dataset, target, "html")

    assert (first["files"], first["missing"], first["reused"]) == (3, 0, False)
    assert (target / "corpus" / "payment" / "refund.html").is_file()
    gold = [json.loads(line)["gold"] for line in (target / "queries.jsonl").open()]
    assert gold == [
        ["infrastructure/redis-pool.html"],
        ["payment/refund.html"],
        ["kubernetes/crashloop.html"],
    ]
    assert render_dataset(dataset, target, "html")["reused"] is True


@needs_pandoc
def test_each_format_is_searched_and_set_beside_markdown(dataset: Path, tmp_path: Path) -> None:
    formats = ["html", "docx", "adoc"] + (["pdf"] if shutil.which("soffice") else [])

    report = evaluate_formats(
        dataset, lambda data: Settings(data_dir=data), tmp_path / "work", formats=formats
    )

    rows = report["formats"]
    assert list(rows) == ["md", *formats]
    for fmt in formats:
        row = rows[fmt]
        assert (row["documents"], row["skipped"]) == (3, 0), fmt
        assert row["recall@5"] == rows["md"]["recall@5"] == 1.0, fmt
        assert sum(row["levels"].values()) == 3
        assert row["delta"]["recall@5"] == 0.0
        assert isinstance(row["meets_targets"], bool)
    assert "pandoc" in report["converters"]


def test_a_missing_converter_is_named_with_how_to_install_it(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SuperbizError, match=r"pandoc is not installed: `apt-get install pandoc`"):
        evaluate_formats(dataset, lambda data: Settings(data_dir=data), tmp_path / "work")


def test_an_unknown_format_is_refused(dataset: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "formats", str(dataset), "--formats", "odt"])
    assert result.exit_code != 0
    assert "unknown format 'odt'; choose from html, docx, pdf, adoc" in result.output
