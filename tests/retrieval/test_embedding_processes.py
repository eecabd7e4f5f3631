"""The embedded model in worker processes (``embedding_processes``), as a bulk ingest
uses it: the rows this process makes, from several threads at once, and this process's
own embedding when a worker cannot start or fails, at any point."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from superbiz import _process
from superbiz.retrieval.embedders import USEEmbedder
from superbiz.retrieval.embedding_processes import EmbeddingProcesses

TEXTS = [
    "Kafka consumer lag keeps growing after a rebalance",
    "支付回调超时，排查 Redis 连接池",
    "Pod restarts with exit code 137: check the memory limit",
    "主库挂了以后应用一直报 ERROR 1290 read-only",
    "",
    "A long runbook paragraph " * 60,
]
BATCHES = [[f"{text} {i}" for text in TEXTS] for i in range(6)]
WORKER = [sys.executable, "-m", "superbiz.retrieval.embedding_processes"]

Popen = subprocess.Popen
Start = Callable[..., "subprocess.Popen[bytes]"]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every worker process started, to see what was started and that none is left."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        assert args == WORKER
        process = Popen(args, **kwargs)
        processes.append(process)
        return process

    monkeypatch.setattr(_process.subprocess, "Popen", start)
    yield processes
    assert all(process.poll() is not None for process in processes)


def in_threads(embed: Callable[[list[str]], np.ndarray]) -> list[np.ndarray]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(embed, BATCHES))


def assert_rows_of(embedder: USEEmbedder, rows: list[np.ndarray]) -> None:
    """The rows this process makes for ``BATCHES`` (to float rounding: USE's own rows
    differ as much from one call to the next)."""
    for batch, got in zip(BATCHES, rows, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, embedder.embed(batch), atol=1e-6)


def test_two_workers_embed_the_rows_of_this_process(
    use_embedder: USEEmbedder, started: list[subprocess.Popen[bytes]]
) -> None:
    processes = use_embedder.in_processes(2)
    assert isinstance(processes, EmbeddingProcesses)
    with processes as embed:
        assert processes.ready(timeout=60) == 2
        rows = in_threads(embed)
        assert len(started) == 2 and all(p.poll() is None for p in started)
        assert processes.workers == 2

    assert_rows_of(use_embedder, rows)


def test_once_closed_a_call_embeds_here_without_a_failure(
    use_embedder: USEEmbedder,
    started: list[subprocess.Popen[bytes]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An ingest closes its workers once every chunk is in; a document it repairs after
    that is embedded here, never sent to a stopped worker."""
    processes = EmbeddingProcesses(use_embedder, 2, None)
    with processes as embed:
        assert processes.ready(timeout=60) == 2
    with caplog.at_level(logging.WARNING):
        rows = in_threads(embed)

    assert all(process.poll() is not None for process in started)
    assert_rows_of(use_embedder, rows)
    assert "worker" not in caplog.text


def test_a_worker_caps_the_tokens_as_its_embedder_does(
    use_embedder: USEEmbedder, started: list[subprocess.Popen[bytes]]
) -> None:
    capped = USEEmbedder(max_tokens=8)
    processes = EmbeddingProcesses(capped, 1, capped.max_tokens)
    with processes as embed:
        assert processes.ready(timeout=60) == 1
        rows = embed(BATCHES[0])

    assert len(started) == 1
    np.testing.assert_allclose(rows, capped.embed(BATCHES[0]), atol=1e-6)
    long_text = BATCHES[0].index(TEXTS[-1] + " 0")
    assert not np.allclose(rows[long_text], use_embedder.embed([BATCHES[0][long_text]])[0])


def test_no_worker_without_processes_or_a_second_core(
    use_embedder: USEEmbedder,
    started: list[subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with use_embedder.in_processes(0) as embed:
        assert embed == use_embedder.embed
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    with use_embedder.in_processes(2) as embed:
        assert embed == use_embedder.embed
    assert started == []


def test_a_call_does_not_wait_for_a_worker_to_start(
    use_embedder: USEEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before a worker has loaded its model a call embeds here; closing stops the worker
    still starting, and that is no failure."""
    started: list[subprocess.Popen[bytes]] = []

    def slow(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(Popen([sys.executable, "-c", "import time; time.sleep(600)"], **kwargs))
        return started[-1]

    monkeypatch.setattr(_process.subprocess, "Popen", slow)
    processes = EmbeddingProcesses(use_embedder, 1, None)
    with caplog.at_level(logging.WARNING), processes as embed:
        rows = in_threads(embed)
        assert processes.workers == 1 and started[0].poll() is None
    processes.ready(timeout=10)

    assert_rows_of(use_embedder, rows)
    assert started[0].poll() is not None
    assert "worker" not in caplog.text


def _crash(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return Popen([sys.executable, "-c", "import sys; sys.exit(3)"], **kwargs)


def _stop_after_a_batch(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """A worker that embeds one batch (with the real model) and then exits."""
    code = (
        "import pickle, sys\n"
        "from superbiz.retrieval.embedders import USEEmbedder\n"
        "source, sink = sys.stdin.buffer, sys.stdout.buffer\n"
        "embedder = USEEmbedder(max_tokens=pickle.load(source))\n"
        "pickle.dump(embedder.dimension, sink); sink.flush()\n"
        "pickle.dump(embedder.embed(pickle.load(source)), sink); sink.flush()\n"
    )
    return Popen([sys.executable, "-c", code], **kwargs)


def _answer_nonsense(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    code = (
        "import pickle, sys\n"
        "pickle.load(sys.stdin.buffer)\n"
        "pickle.dump(512, sys.stdout.buffer); sys.stdout.buffer.flush()\n"
        "pickle.load(sys.stdin.buffer)\n"
        "pickle.dump({'rows': 1}, sys.stdout.buffer); sys.stdout.buffer.flush()\n"
    )
    return Popen([sys.executable, "-c", code], **kwargs)


def _wrong_dimension(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    code = "import pickle, sys; pickle.load(sys.stdin.buffer); pickle.dump('ok', sys.stdout.buffer)"
    return Popen([sys.executable, "-c", code], **kwargs)


def _refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    raise OSError("no processes here")


@pytest.mark.parametrize(
    ("start", "said"),
    [
        (_crash, "worker process"),  # failed as it started or as it was asked
        (_stop_after_a_batch, "a worker process failed (it sent nothing"),
        (_answer_nonsense, "a worker process failed (it sent a dict, not 6 rows)"),
        (_wrong_dimension, "a worker process failed (it started with 'ok'"),
        (_refuse, "no worker process (no processes here)"),
    ],
    ids=["it crashes", "it stops", "it answers nonsense", "it starts wrong", "none starts"],
)
def test_without_a_worker_this_process_embeds_it_all(
    use_embedder: USEEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    start: Start,
    said: str,
) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def spy(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        process = start(args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(_process.subprocess, "Popen", spy)
    processes = EmbeddingProcesses(use_embedder, 2, None)
    with caplog.at_level(logging.WARNING), processes as embed:
        processes.ready(timeout=60)
        rows = in_threads(embed)

    assert_rows_of(use_embedder, rows)
    assert said in caplog.text
    assert all(process.poll() is not None for process in started)


def test_a_failed_worker_takes_no_more_batches(
    use_embedder: USEEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process.subprocess, "Popen", _stop_after_a_batch)
    processes = EmbeddingProcesses(use_embedder, 1, None)
    with processes as embed:
        assert processes.ready(timeout=60) == 1
        first = embed(BATCHES[0])
        assert processes.workers == 1
        rest = [embed(batch) for batch in BATCHES[1:]]
        assert processes.workers == 0

    assert_rows_of(use_embedder, [first, *rest])
