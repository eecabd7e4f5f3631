"""The key count of a large change on two cores (``_key_count``), a batch at a time: the
same counts and users as one pass on one core, and one core when the worker cannot start
or fails, at any point."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from superbiz import _process
from superbiz.knowledge.documents.document import load_document
from superbiz.knowledge.kb import _key_count
from superbiz.knowledge.kb._key_count import Texts, count_keys
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
    monkeypatch.setattr(_process.subprocess, "Popen", start)


def batched(texts: list[tuple[str, str]], size: int = 3) -> Callable[[], list[Texts]]:
    """``texts`` as ``measure`` reads them: a batch at a time, and again when asked."""
    return lambda: [texts[i : i + size] for i in range(0, len(texts), size)]


def test_two_cores_count_what_one_counts(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    entries, texts = corpus
    alone = ExactIndex(entries).frequency(texts)
    started: list[list[str]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(args)
        return Popen(args, **kwargs)

    workers_start_with(monkeypatch, start, threshold=10)
    both = count_keys(entries, batched(texts), documents=len(texts))

    assert started == [[sys.executable, "-m", "superbiz.knowledge.kb._key_count"]]
    assert both == alone
    assert both.to_json() == alone.to_json()  # the users in the documents' order
    assert any(count > 3 for count in both.counts.values()) and both.users


def test_each_batch_is_counted_outside_the_stores(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statistics let go of the store lock while they count: once to start, once per
    batch, once for the result, so a turn waits for one batch at most."""
    entries, texts = corpus
    workers_start_with(monkeypatch, Popen, threshold=10)
    outside: list[int] = []

    @contextmanager
    def counting() -> Iterator[None]:
        outside.append(1)
        yield

    count_keys(entries, batched(texts, 5), documents=len(texts), outside=counting)

    assert len(outside) == 1 + -(-len(texts) // 5) + 1


def _crash(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return Popen([sys.executable, "-c", "import sys; sys.exit(3)"], **kwargs)


def _stop_after_a_batch(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    code = "import pickle, sys; pickle.load(sys.stdin.buffer); pickle.load(sys.stdin.buffer)"
    return Popen([sys.executable, "-c", code], **kwargs)


def _answer_nonsense(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    code = (
        "import pickle, sys\n"
        "while pickle.load(sys.stdin.buffer) is not None: pass\n"
        "pickle.dump({'counts': 1}, sys.stdout.buffer)"
    )
    return Popen([sys.executable, "-c", code], **kwargs)


def _refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    raise OSError("no processes here")


@pytest.mark.parametrize(
    ("start", "said"),
    [
        (_crash, "the worker failed"),
        (_stop_after_a_batch, "the worker failed"),
        (_answer_nonsense, "the worker failed (it sent a dict, not"),
        (_refuse, "no worker process (no processes here)"),
    ],
    ids=["the worker fails", "the worker stops", "the worker answers nonsense", "no worker"],
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
        counted = count_keys(entries, batched(texts), documents=len(texts))

    assert counted == ExactIndex(entries).frequency(texts)
    assert counted.to_json() == ExactIndex(entries).frequency(texts).to_json()
    assert said in caplog.text


def test_a_small_change_is_counted_here(corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    entries, texts = corpus

    def refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        raise AssertionError("a worker was started for a small change")

    workers_start_with(monkeypatch, refuse, threshold=_key_count.PARALLEL_DOCUMENTS)
    counted = count_keys(entries, batched(texts), documents=len(texts))
    assert counted == ExactIndex(entries).frequency(texts)
