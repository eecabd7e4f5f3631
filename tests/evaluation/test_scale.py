"""``superbiz eval scale``: the generated copies are distinct documents with questions
whose gold is known, and the benchmark measures every size of one growing KB."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml
from typer.testing import CliRunner

from superbiz.cli import app
from superbiz.config import Settings
from superbiz.evaluation._scale_corpus import ScaleCorpus
from superbiz.evaluation.scale import EMBED_PASSES, _embedder_rate, sizes
from superbiz.knowledge.documents.frontmatter import split_frontmatter
from superbiz.retrieval.embedders import EmbedTexts

RUNBOOKS = {
    "payment/callback-timeout.md": (
        "Payment callback timeout",
        "payment",
        "## Symptoms\n\nThe PaymentGateway callback waits 3000 ms, then the order stays unpaid.\n"
        "\n## Fix\n\nRaise the Redis pool to 64 connections and retry the callback queue.\n",
    ),
    "payment/refund-stuck.md": (
        "Refund stuck in pending",
        "payment",
        "## Symptoms\n\nA refund stays pending for 48 hours.\n\n## Fix\n\nReplay the refund "
        "job for the order and check the acquirer report.\n",
    ),
    "infra/disk-full.md": (
        "Node disk full",
        "infrastructure",
        "## Symptoms\n\nThe kubelet evicts pods when the disk passes 85 percent.\n\n## Fix\n\n"
        "Free space under /var/log and expand the volume by 20 GB.\n",
    ),
    "infra/连接池.md": (
        "数据库连接池耗尽",
        "infrastructure",
        "## 现象\n\n应用报连接超时，连接池的活跃连接达到 30 个上限。\n\n## 处理\n\n"
        "先排查慢查询，再把连接池调大到 50 个。\n",
    ),
}
QUERIES = [
    {"id": "q1", "query": "payment callback timeout after 3000 ms", "lang": "en",
     "gold": ["payment/callback-timeout.md"], "category": "payment"},
    {"id": "q2", "query": "数据库连接池耗尽怎么办", "lang": "zh",
     "gold": ["infra/连接池.md"], "category": "infrastructure"},
]  # fmt: skip


def _seed(root: Path) -> Path:
    for path, (title, category, body) in RUNBOOKS.items():
        file = root / "corpus" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        front = yaml.safe_dump({"title": title, "category": category}, allow_unicode=True)
        file.write_text(f"---\n{front}---\n\n# {title}\n\n{body}", encoding="utf-8")
    lines = [json.dumps(q, ensure_ascii=False) for q in QUERIES]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _read(file: Path) -> tuple[dict[str, object], str]:
    front, body = split_frontmatter(file.read_text(encoding="utf-8"))
    return dict(front), body


def test_copies_are_new_documents_of_the_seeds_shape(tmp_path: Path) -> None:
    corpus = ScaleCorpus([_seed(tmp_path / "seed")], tmp_path / "out")
    assert corpus.write(3 * len(RUNBOOKS)) == 12
    files = sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert len(files) == 12 and all(f.suffix == ".md" for f in files)

    seed_front, seed_body = _read(tmp_path / "out" / "payment/callback-timeout.md")
    titles = {seed_front["title"]}
    for copy in (1, 2):
        path = corpus.copy_path("payment/callback-timeout.md", copy)
        assert path.startswith(f"copy-{copy:04d}/") and path.endswith(".md")
        front, body = _read(tmp_path / "out" / path)
        titles.add(front["title"])
        assert front["category"] == f"payment-{corpus.substitution(copy).name}"
        # new words, entities and numbers in the same places: headings stay headings
        assert body != seed_body
        assert body.count("\n## ") == seed_body.count("\n## ")
        assert "3000" not in body and re.search(r"\b\d{4}\b", body)
        assert "PaymentGateway" not in body
    assert len(titles) == 3  # every copy has a title of its own


def test_a_copys_question_has_the_copys_document_as_gold(tmp_path: Path) -> None:
    corpus = ScaleCorpus([_seed(tmp_path / "seed")], tmp_path / "out")
    queries = corpus.queries_of(3, per_copy=2)
    assert [q.id for q in queries[:2]] == ["q1", "q2"]  # the seed's, unchanged
    copies = queries[2:]
    assert len(copies) == 4 and {q.copy for q in copies} == {1, 2}
    for query in copies:
        swap = corpus.substitution(query.copy)
        seed = next(q for q in corpus.queries if f"{q.id}@{query.copy}" == query.id)
        assert query.query == swap.text(seed.query) != seed.query
        assert query.gold == tuple(corpus.copy_path(g, query.copy) for g in seed.gold)
        assert query.category == swap.domain(seed.category or "")


def test_the_sizes_grow_by_five_up_to_the_largest() -> None:
    assert sizes(477, 50_000) == [477, 2385, 11925, 50000]
    assert sizes(4, 30) == [4, 20, 30]


def test_cli_measures_each_size_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    seed = _seed(tmp_path / "seed")
    args = ["eval", "scale", str(seed), "--max-documents", "8", "--work", str(tmp_path / "w")]
    args += ["--rounds", "3"]
    result = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [row["documents"] for row in report["sizes"]] == [4, 8]
    first, second = report["sizes"]
    assert first["ingest"]["documents"] == 4 and second["ingest"]["documents"] == 4
    assert second["chunks"] > first["chunks"] and second["domains"] == 2 * first["domains"]
    assert first["recall"]["seed"]["queries"] == 2 and second["recall"]["copies"]["queries"] == 2
    assert second["recall"]["copies"]["recall@5"] > 0
    assert 0 < second["planner"]["map_tokens"] <= 2000
    assert second["planner"]["new_process_first_plan_ms"] > 0
    assert second["ingest"]["embedder_chunks_per_s"] > 0 and second["peak_rss_mb"] > 0
    # wall and CPU time of each lookup (CPU: what another process's load moves least)
    assert second["lookup_ms"]["cpu_p50"] > 0 and second["lookup_ms"]["p50"] > 0
    # timed three times over, each figure the median of the passes'
    rounds = second["lookup_ms"]["p50_rounds"]
    assert report["lookup_rounds"] == second["lookup_ms"]["rounds"] == len(rounds) == 3
    assert second["lookup_ms"]["p50"] == sorted(rounds)[1]
    assert "scale (embedded profile" in result.output
    # one file uploaded and deleted at each size, gone before the next size's ingest
    assert first["upload"]["seconds"] > 0 and first["upload"]["delete_seconds"] > 0
    assert second["domains"] == 2 * first["domains"] and "one file uploaded" in result.output
    # a reader denied one domain searches beside everyone (the last domain by name)
    searches = second["dense_search_ms"]
    assert searches["dense_p50_ms"] > 0 and searches["restricted_dense_p50_ms"] > 0
    assert searches["denied_domain"].startswith("payment")  # the seed's, or a copy's
    assert f"a reader denied {searches['denied_domain']}" in " ".join(result.output.split())


def test_every_copy_of_a_numbered_seed_is_a_file_of_its_own(tmp_path: Path) -> None:
    """Numbers are drawn per copy, not permuted: ``faq-012`` and ``faq-047`` may both
    become ``faq-389``, and the later copy overwrote the earlier (321 of 50,000 on dev2)."""
    root = tmp_path / "seed"
    for n in range(120):
        file = root / "corpus" / "faq" / f"faq-{n:03d}.md"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"---\ntitle: Question {n}\n---\n\nAnswer number {n}.\n", "utf-8")
    (root / "queries.jsonl").write_text("", encoding="utf-8")
    corpus = ScaleCorpus([root], tmp_path / "out")
    assert corpus.write(4 * 120) == 480
    assert sum(1 for p in (tmp_path / "out").rglob("*.md")) == 480
    paths = list(corpus.iter_paths(480))
    assert len(set(paths)) == 480
    assert corpus.copy_path("faq/faq-007.md", 2) == paths[2 * 120 + 7]


def test_a_work_folder_left_by_a_larger_run_holds_only_this_sizes_documents(
    tmp_path: Path,
) -> None:
    """Each size ingests the corpus folder: an earlier run's 8 documents left there made
    the first size of the next run ingest 8 instead of 4."""
    seed = _seed(tmp_path / "seed")
    ScaleCorpus([seed], tmp_path / "w" / "corpus").write(8)

    corpus = ScaleCorpus([seed], tmp_path / "w" / "corpus")
    corpus.write(4)

    assert sorted(p.relative_to(corpus.root).as_posix() for p in corpus.root.rglob("*.md")) == (
        sorted(corpus.iter_paths(4))
    )


def test_the_embedders_rate_is_its_fastest_pass(tmp_path: Path) -> None:
    """A shared machine once ran one pass at half the speed of the next: the rate an
    ingest is compared with is the embedder's fastest pass over the sample."""
    seed = _seed(tmp_path / "seed")
    paths = [p.relative_to(seed / "corpus").as_posix() for p in (seed / "corpus").rglob("*.md")]
    calls: list[int] = []

    class FirstPassSlow:
        def in_processes(self, processes: int) -> AbstractContextManager[EmbedTexts]:
            return nullcontext(self.embed)

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            calls.append(len(texts))
            if len(calls) == 1:  # the sample is one batch: the first pass is this call
                time.sleep(0.5)
            return np.zeros((len(texts), 4), dtype=np.float32)

    kb = SimpleNamespace(embedder=FirstPassSlow())
    rate = _embedder_rate(kb, Settings(), seed / "corpus", paths)  # type: ignore[arg-type]
    assert len(calls) == EMBED_PASSES == 2 and calls[0] == calls[1] == len(RUNBOOKS)
    assert rate is not None and rate > len(RUNBOOKS) / 0.5
