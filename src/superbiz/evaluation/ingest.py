"""``superbiz eval ingest``: chunks per second and peak memory of one ingest from scratch.

The ingest goes into a fresh temporary data directory (SQLite and Milvus Lite, whatever
the settings say about stores), with the configured embedder, so the numbers compare
across runs and the real knowledge base is never touched. ``synthetic_mb`` writes one
single-line file of that size, the worst case for the chunker: no headings, no
paragraphs.
"""

from __future__ import annotations

import os
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from superbiz._text import load_segmenter
from superbiz.config import AdvancedSettings, IngestSettings, Settings, VectorSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

# Words of the kind a runbook holds, English and Chinese, for the synthetic file.
_WORDS = (
    "payment gateway timeout refund callback redis pool connection exhausted retry queue "
    "latency replica leader election disk pressure throttled deploy rollback alert "
    "支付 回调 超时 退款 连接池 重试 队列 延迟 副本 磁盘 限流 发布 回滚 告警 排查 配置"
).split()


def synthetic_file(folder: Path, megabytes: float, seed: int = 13) -> Path:
    """A single-line Markdown file of about ``megabytes`` MB (10^6 bytes) in ``folder``."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word.encode()) + 1
    file = folder / f"synthetic-{megabytes:g}mb.md"
    file.write_text(" ".join(words), encoding="utf-8")
    return file


def benchmark_ingest(
    settings: Settings, path: Path | None = None, *, synthetic_mb: float | None = None
) -> dict[str, Any]:
    """Ingest ``path`` (or a synthetic file) into a temporary KB; time and memory."""
    if (path is None) == (synthetic_mb is None):
        raise ValueError("give a path or synthetic_mb, not both")
    with tempfile.TemporaryDirectory(prefix="superbiz-eval-ingest-") as scratch:
        work = Path(scratch)
        if synthetic_mb is not None:
            (work / "kb").mkdir()
            path = synthetic_file(work / "kb", synthetic_mb)
        assert path is not None
        largest = max((f.stat().st_size for f in _files(path)), default=0)
        ingest = settings.ingest.model_dump()
        # a speed benchmark, not a limit check: the largest file always fits
        ingest["max_file_bytes"] = max(settings.ingest.max_file_bytes, largest)
        scratch_settings = Settings(
            data_dir=work / "data",
            database_url=None,
            vector=VectorSettings(),
            embedding=settings.embedding,
            advanced=AdvancedSettings(embedding=settings.advanced.embedding),
            ingest=IngestSettings(**ingest),
        )
        kb = KnowledgeBase(scratch_settings)
        try:
            # What a running service has loaded already is timed apart: the model, the
            # stores (pymilvus, Milvus Lite) and jieba's dictionary (Lite's BM25 analyzer).
            opening = time.perf_counter()
            dimension = kb.embedder.dimension
            _ = kb.store
            load_segmenter()
            startup = time.perf_counter() - opening
            cpu_before, started = _cpu_seconds(), time.perf_counter()
            report = Ingestor(kb).ingest([path])
            seconds = time.perf_counter() - started
            cpu = _cpu_seconds() - cpu_before
            chunks = sum(doc.chunk_count for doc in kb.documents.all())
        finally:
            kb.close()
    return {
        "path": str(path) if synthetic_mb is None else None,
        "synthetic_mb": synthetic_mb,
        "bytes": sum(f.stat().st_size for f in _files(path)) if synthetic_mb is None else None,
        "embedder": scratch_settings.embedding.model,
        "dimension": dimension,
        "documents": len(report.added),
        "skipped": len(report.skipped),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 1) if seconds else None,
        "startup_seconds": round(startup, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _files(path: Path) -> list[Path]:
    return [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    """The process's peak resident memory so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if os.uname().sysname == "Darwin" else peak / 1024


def render_ingest_report(report: dict[str, Any], console: Console) -> None:
    what = report["path"] or f"a synthetic {report['synthetic_mb']:g} MB single-line file"
    console.print(
        f"ingest of {what}: {report['documents']} documents, {report['chunks']} chunks in "
        f"{report['seconds']} s → [bold]{report['chunks_per_s']} chunks/s[/], peak RSS "
        f"[bold]{report['peak_rss_mb']} MB[/]"
    )
    console.print(
        f"[dim]{report['cpu_seconds']} s of CPU; start-up before the clock (model, stores, "
        f"jieba's dictionary) {report['startup_seconds']} s; load average "
        f"{report['load_average_1m']} "
        f"on {report['cpus']} CPUs (a busy machine slows this down)[/]"
    )
