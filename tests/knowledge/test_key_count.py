"""The key count of a large change on two cores (``_key_count``): the same counts and
users as one core, and one core when the worker cannot start or fails."""

from __future__ import annotations

import logging
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from superbiz.knowledge.documents.document import load_document
from superbiz.knowledge.kb import _key_count
from superbiz.knowledge.kb._key_count import count_keys
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex


@pytest.fixture(scope="module")
def corpus() -> tuple[list[ExactEntry], list[tuple[str, str]]]:
    """The example KB's documents (English and Chinese), four of them five times over
    under other paths: keys used by one document and by more than ``KEY_DOCUMENTS_LIMIT``."""
    root = Path(str(files("superbiz") / "examples" / "corpus"))
    docs = [load_document(p, root, 10**6, ("utf-8",)) for p in sorted(root.rglob("*.md"))]
    entries, texts = [], []
    for copy in range(5):
        for doc in docs if copy == 0 else docs[:4]:
            path = f"copy-{copy}/{doc.path}"
            entries.append(
                ExactEntry(path, doc.title, doc.domain, doc.aliases, doc.covers, doc.tags)
            )
            texts.append((path, f"{doc.title}\n{doc.body}"))
    return entries, texts


Popen = subprocess.Popen


def test_two_cores_count_what_one_counts(
    corpus: tuple[list[ExactEntry], list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, texts = corpus
    index = ExactIndex(entries)
    alone = index.frequency(texts)
    monkeypatch.setattr(_key_count, "PARALLEL_DOCUMENTS", 10)
    started: list[list[str]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(args)
        return Popen(args, **kwargs)

    monkeypatch.setattr(_key_count.subprocess, "Popen", start)

    both = count_keys(entries, texts, index)

    assert started == [[sys.executable, "-m", "superbiz.knowledge.kb._key_count"]]
    assert both == alone
    assert both.to_json() == alone.to_json()
    assert any(count > 3 for count in both.counts.values()) and both.users


def test_a_worker_that_fails_leaves_its_half_here(
    corpus: tuple[list[ExactEntry], list[tuple[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entries, texts = corpus
    index = ExactIndex(entries)
    monkeypatch.setattr(_key_count, "PARALLEL_DOCUMENTS", 10)

    def crash(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        return Popen([sys.executable, "-c", "import sys; sys.exit(3)"], **kwargs)

    monkeypatch.setattr(_key_count.subprocess, "Popen", crash)
    with caplog.at_level(logging.WARNING, logger="superbiz.knowledge.kb._key_count"):
        counted = count_keys(entries, texts, index)

    assert counted == index.frequency(texts)
    assert "the worker failed" in caplog.text


def test_no_worker_process_counts_on_one_core(
    corpus: tuple[list[ExactEntry], list[tuple[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entries, texts = corpus
    index = ExactIndex(entries)
    monkeypatch.setattr(_key_count, "PARALLEL_DOCUMENTS", 10)

    def refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        raise OSError("no processes here")

    monkeypatch.setattr(_key_count.subprocess, "Popen", refuse)
    with caplog.at_level(logging.WARNING, logger="superbiz.knowledge.kb._key_count"):
        counted = count_keys(entries, texts, index)

    assert counted == index.frequency(texts)
    assert "no worker process (no processes here)" in caplog.text


def test_a_small_change_is_counted_here(
    corpus: tuple[list[ExactEntry], list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, texts = corpus

    def refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        raise AssertionError("a worker was started for a small change")

    monkeypatch.setattr(_key_count.subprocess, "Popen", refuse)
    assert count_keys(entries, texts, ExactIndex(entries)) == ExactIndex(entries).frequency(texts)
