"""``superbiz eval sync``: how long a sync of a Git source takes when one file of many
changed, against the full ingest of the same repository.

A repository of ``files`` generated runbooks is made in a temporary folder (``git
init``, a bare remote over ``file://``), ingested in full into a fresh temporary
knowledge base (SQLite and Milvus Lite, the configured embedder), then ``changes`` times
one file is edited, committed, pushed and synced. The target: a sync takes at most 5 %
of the full ingest.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from superbiz._text import load_segmenter
from superbiz.config import AdvancedSettings, Settings, VectorSettings
from superbiz.evaluation.ingest import _WORDS
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.sources.git_sources import GitSources
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle

TARGET_RATIO = 0.05
#: sections of the long page a sync adds and then edits in one place (``_long_page``)
LONG_SECTIONS = 300
_DOMAINS = ("payment", "login", "deploy", "database", "network", "storage", "alerts", "billing")
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "superbiz-eval",
    "GIT_AUTHOR_EMAIL": "eval@superbiz.invalid",
    "GIT_COMMITTER_NAME": "superbiz-eval",
    "GIT_COMMITTER_EMAIL": "eval@superbiz.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **_GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def _runbook(rng: random.Random, number: int) -> str:
    sections = []
    for heading in ("Symptoms", "Diagnosis", "Fix"):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(60, 140)))
        sections.append(f"## {heading}\n\n{words}\n")
    return f"# Runbook {number}\n\n" + "\n".join(sections)


def make_repository(root: Path, files: int, seed: int = 7) -> tuple[Path, Path]:
    """A working repository with ``files`` runbooks under ``docs/`` and its bare remote."""
    rng = random.Random(seed)
    work, bare = root / "work", root / "remote.git"
    work.mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    _git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    for number in range(files):
        file = work / "docs" / _DOMAINS[number % len(_DOMAINS)] / f"runbook-{number:04d}.md"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(_runbook(rng, number), encoding="utf-8")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "runbooks")
    _git(work, "push", "-q", str(bare), "main")
    return work, bare


def benchmark_sync(settings: Settings, *, files: int = 400, changes: int = 3) -> dict[str, Any]:
    """Full ingest of a generated repository, then ``changes`` syncs of one edited file."""
    with tempfile.TemporaryDirectory(prefix="superbiz-eval-sync-") as scratch:
        work, bare = make_repository(Path(scratch) / "origin", files)
        scratch_settings = Settings(
            data_dir=Path(scratch) / "data",
            database_url=None,
            vector=VectorSettings(),
            embedding=settings.embedding,
            advanced=AdvancedSettings(embedding=settings.advanced.embedding),
            ingest=settings.ingest,
        )
        kb = KnowledgeBase(scratch_settings)
        try:
            # what a running service has loaded already is not timed (model, stores, jieba)
            _ = kb.embedder.dimension
            _ = kb.store
            load_segmenter()
            git = DocumentLifecycle(kb).git()
            started = time.perf_counter()
            first = git.add(f"file://{bare}", subdir="docs")
            full = time.perf_counter() - started
            chunks = sum(doc.chunk_count for doc in kb.documents.all())
            syncs, fetches, unchanged = [], [], []
            for change in range(changes):
                edited = work / "docs" / _DOMAINS[change % len(_DOMAINS)]
                target = sorted(edited.glob("*.md"))[change]
                with target.open("a", encoding="utf-8") as out:
                    out.write(f"\n## Note {change}\n\nEscalate to the on-call lead.\n")
                _git(work, "commit", "-q", "-am", f"edit {change}")
                _git(work, "push", "-q", str(bare), "main")
                started = time.perf_counter()
                fetched = git.fetch(first.source.name)
                fetched_at = time.perf_counter()
                result = git.apply(fetched)
                syncs.append(time.perf_counter() - started)
                fetches.append(fetched_at - started)
                if result.counts()["updated"] != 1:
                    raise RuntimeError(f"expected one updated document: {result.summary()}")
            started = time.perf_counter()
            git.sync(first.source.name)
            unchanged.append(time.perf_counter() - started)
            long_page = _long_page(git, work, bare, first.source.name)
        finally:
            kb.close()
    sync = statistics.median(syncs)
    return {
        "files": files,
        "documents": len(first.report.added),
        "chunks": chunks,
        "embedder": scratch_settings.embedding.model,
        "full_ingest_seconds": round(full, 3),
        "sync_one_changed_seconds": [round(s, 3) for s in syncs],
        "sync_one_changed_median_seconds": round(sync, 3),
        "fetch_median_seconds": round(statistics.median(fetches), 3),
        "sync_nothing_changed_seconds": round(unchanged[0], 3),
        "ratio": round(sync / full, 4) if full else None,
        "target_ratio": TARGET_RATIO,
        "meets_target": bool(full) and sync / full <= TARGET_RATIO,
        "long_page": long_page,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _long_page(git: GitSources, work: Path, bare: Path, name: str) -> dict[str, Any]:
    """A page of ``LONG_SECTIONS`` sections pushed and synced, then one section edited and
    synced again: the edit embeds the passages whose words it changed, not the page."""
    rng = random.Random(11)
    sections = [
        f"## Procedure {n}\n\n" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(60, 140)))
        for n in range(LONG_SECTIONS)
    ]
    page = work / "docs" / "handbook.md"
    seconds, reports = [], []
    for step in ("add", "edit"):
        if step == "edit":
            sections[LONG_SECTIONS // 2] += "\n\nEscalate to the on-call lead after two retries."
        page.write_text("# Handbook\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", f"handbook: {step}")
        _git(work, "push", "-q", str(bare), "main")
        started = time.perf_counter()
        reports.append(git.sync(name).report)
        seconds.append(time.perf_counter() - started)
    added, edited = reports
    stored = git.kb.documents.get(added.added[0]) if len(added.added) == 1 else None
    if stored is None or edited.updated != added.added:
        raise RuntimeError(f"expected the handbook added, then updated: {edited.summary()}")
    return {
        "sections": LONG_SECTIONS,
        "passages": stored.chunk_count,
        "sync_added_seconds": round(seconds[0], 3),
        "sync_one_section_edited_seconds": round(seconds[1], 3),
        "passages_kept": edited.vectors_reused,
    }


def render_sync_report(report: dict[str, Any], console: Console) -> None:
    verdict = "[green]meets[/]" if report["meets_target"] else "[red]misses[/]"
    console.print(
        f"full ingest of a {report['files']}-file repository ({report['chunks']} chunks): "
        f"{report['full_ingest_seconds']} s; sync with 1 file changed: "
        f"{report['sync_one_changed_median_seconds']} s (median of "
        f"{len(report['sync_one_changed_seconds'])}; fetch "
        f"{report['fetch_median_seconds']} s) → [bold]{report['ratio']:.1%}[/] of the full "
        f"ingest, {verdict} the ≤ {report['target_ratio']:.0%} target"
    )
    page = report["long_page"]
    console.print(
        f"a {page['passages']}-passage page: synced when added in {page['sync_added_seconds']} s, "
        f"with one section edited in {page['sync_one_section_edited_seconds']} s "
        f"({page['passages_kept']} passages kept their vectors)"
    )
    console.print(
        f"[dim]sync with nothing changed: {report['sync_nothing_changed_seconds']} s; "
        f"embedder {report['embedder']}; load average {report['load_average_1m']} on "
        f"{report['cpus']} CPUs[/]"
    )
