"""The key count of a large change on two cores (``_key_count``): the same counts and
users as one core, and one core when the worker cannot start or fails."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
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
Corpus = tuple[list[ExactEntry], list[tuple[str, str]]]
Start = Callable[..., "subprocess.Popen[bytes]"]


def workers_start_with(monkeypatch: pytest.MonkeyPatch, start: Start, *, threshold: int) -> None:
    """The worker started by ``start`` instead of ``subprocess.Popen``, from ``threshold``
    documents on."""
    monkeypatch.setattr(_key_count, "PARALLEL_DOCUMENTS", threshold)
    monkeypatch.setattr(_key_count.subprocess, "Popen", start)


def test_two_cores_count_what_one_counts(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    entries, texts = corpus
    alone = ExactIndex(entries).frequency(texts)
    started: list[list[str]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(args)
        return Popen(args, **kwargs)

    workers_start_with(monkeypatch, start, threshold=10)
    both = count_keys(entries, texts)

    assert started == [[sys.executable, "-m", "superbiz.knowledge.kb._key_count"]]
    assert both == alone
    assert both.to_json() == alone.to_json()
    assert any(count > 3 for count in both.counts.values()) and both.users


def _crash(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return Popen([sys.executable, "-c", "import sys; sys.exit(3)"], **kwargs)


def _refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    raise OSError("no processes here")


@pytest.mark.parametrize(
    ("start", "said"),
    [
        (_crash, "the worker failed"),
        (_refuse, "no worker process (no processes here)"),
    ],
    ids=["the worker fails", "no worker process"],
)
def test_without_a_worker_one_core_counts_it_all(
    corpus: Corpus,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    start: Start,
    said: str,
) -> None:
    entries, texts = corpus
    workers_start_with(monkeypatch, start, threshold=10)
    with caplog.at_level(logging.WARNING, logger="superbiz.knowledge.kb._key_count"):
        counted = count_keys(entries, texts)

    assert counted == ExactIndex(entries).frequency(texts)
    assert said in caplog.text


def test_a_small_change_is_counted_here(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    entries, texts = corpus

    def refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        raise AssertionError("a worker was started for a small change")

    workers_start_with(monkeypatch, refuse, threshold=_key_count.PARALLEL_DOCUMENTS)
    assert count_keys(entries, texts) == ExactIndex(entries).frequency(texts)
