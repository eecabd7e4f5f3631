"""``superbiz calibrate``: the stored measurement, how it was derived, which thresholds
lookups use and where each comes from (real USE, Milvus Lite, SQLite)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from superbiz.config import Settings
from superbiz.evaluation.calibrate import calibrate, render_calibration
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import LEVEL_CALIBRATION_KEY, KnowledgeBase
from superbiz.retrieval.embedders import Embedder


def _faq(number: int) -> str:
    topics = ["disk", "memory", "network", "backup", "login", "upgrade", "index", "quota"]
    topic = topics[number % len(topics)]
    return (
        f"---\ntitle: Service {number} {topic} guide\n---\n\n"
        f"## Service {number} {topic} alarm fires\n\nCheck the {topic} of service {number}.\n"
    )


def test_calibrate_shows_the_stored_thresholds_and_where_each_in_use_comes_from(
    tmp_path: Path, use_embedder: Embedder
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    for n in range(60):
        (root / f"s{n:02d}.md").write_text(_faq(n), encoding="utf-8")
    kb = KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=use_embedder)
    try:
        Ingestor(kb).ingest([root])
        stored = kb.calibration
        assert stored is not None and stored.complete
        report = calibrate(kb)
    finally:
        kb.close()

    assert report["measured_now"] is False  # the ingest stored it
    assert report["stored"]["probes"] == stored.probes
    assert report["in_use"]["highly-relevant-threshold"] == stored.highly_relevant
    assert report["in_use"]["source"] == {
        "highly-relevant-threshold": "measured",
        "reference-threshold": "measured",
    }
    console = Console(record=True, width=200)
    render_calibration(report, console)
    text = console.export_text()
    assert f"{stored.probes} probes" in text and "thresholds lookups use" in text
    assert "random pairs" in text and "measured" in text

    configured = Settings(
        data_dir=tmp_path / "data", retrieval={"normalization": {"reference-threshold": 0.1}}
    )
    pinned = KnowledgeBase(configured, embedder=use_embedder)
    try:
        pinned.meta.set(LEVEL_CALIBRATION_KEY, "")  # as before measurements were stored
        report = calibrate(pinned)
    finally:
        pinned.close()
    assert report["measured_now"] is True and report["stored"]["probes"] == stored.probes
    assert report["in_use"]["reference-threshold"] == 0.1
    assert report["in_use"]["source"]["reference-threshold"] == "settings"
