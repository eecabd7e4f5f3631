"""``superbiz calibrate``: the level thresholds this KB measured, and which ones lookups use.

Every change of documents measures them again (``superbiz.knowledge.kb.statistics``; how:
``superbiz.retrieval.calibration``). This command shows the stored measurement, how it
was derived (probes, their cosines, the precision it aimed at) and, per threshold, where
the one in use comes from: the settings, the measurement, or the shipped per-embedder
number (a KB too small to measure). ``--measure`` measures again now (a KB ingested
before measurements were stored is measured on first use of this command).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.statistics import refresh_statistics
from superbiz.retrieval.calibration import MIN_PROBES, MIN_SUPPORT
from superbiz.retrieval.relevance import DEFAULT_THRESHOLDS, FALLBACK_THRESHOLDS


def calibrate(kb: KnowledgeBase, *, measure: bool = False) -> dict[str, Any]:
    kb.check_index()
    measured_now = measure or kb.calibration is None
    if measured_now:
        with kb.write_lock.held():
            refresh_statistics(kb, whole=True)
    stored = kb.calibration
    shipped = DEFAULT_THRESHOLDS.get(kb.embedder.name, FALLBACK_THRESHOLDS)
    measured = kb.measured_thresholds
    norm = kb.settings.retrieval.normalization
    in_use = kb.thresholds

    def source(configured: float | None, stored_value: float | None) -> str:
        if configured is not None:
            return "settings"
        return "measured" if measured is not None and stored_value is not None else "shipped"

    return {
        "embedder": kb.embedder.name,
        "measured_now": measured_now,
        "stored": asdict(stored) if stored else None,
        "proposed": {
            "highly-relevant-threshold": stored.highly_relevant if stored else None,
            "reference-threshold": stored.reference if stored else None,
            "highly-relevant-lead": stored.highly_relevant_lead if stored else None,
        },
        "shipped": {
            "highly-relevant-threshold": shipped.highly_relevant,
            "reference-threshold": shipped.reference,
        },
        "in_use": {
            "highly-relevant-threshold": in_use.highly_relevant,
            "reference-threshold": in_use.reference,
            "highly-relevant-lead": in_use.highly_relevant_lead,
            "source": {
                "highly-relevant-threshold": source(
                    norm.highly_relevant_threshold, stored.highly_relevant if stored else None
                ),
                "reference-threshold": source(
                    norm.reference_threshold, stored.reference if stored else None
                ),
            },
        },
        "random_pairs": asdict(stored.random_pairs) if stored and stored.random_pairs else None,
    }


def render_calibration(report: dict[str, Any], console: Console) -> None:
    stored = report["stored"] or {}
    what = "measured now" if report["measured_now"] else "stored by the last change"
    console.print(
        f"{report['embedder']} on {stored.get('documents', 0)} documents, "
        f"{stored.get('probes', 0)} probes (titles and distinct headings), {what}"
    )
    if stored.get("gold_pairs") and stored.get("random_pairs"):
        table = Table(title="probe cosines")
        for column in ("pairs", "p5", "median", "p95"):
            table.add_column(column)
        for name in ("gold_pairs", "random_pairs"):
            row = stored[name]
            table.add_row(
                name.replace("_", " "), *(f"{row[k]:.3f}" for k in ("p5", "median", "p95"))
            )
        console.print(table)
        console.print(
            f"nearest document is the probe's own: {stored['top1_precision']}; "
            f"HIGHLY_RELEVANT = the (cosine, lead) rule admitting the most probes at "
            f"{stored['target_precision']} precision (at least {MIN_SUPPORT}); "
            "reference = 95th percentile of random pairs"
        )
    if stored.get("highly_relevant") is not None and stored.get("reference") is None:
        console.print(
            f"[yellow]random pairs reach {stored['random_pairs']['p95']:.3f} 19 times in 20, "
            f"at or above the median of the probes with their own document "
            f"({stored['gold_pairs']['median']:.3f}): this KB's documents are about one "
            "subject, no other document is unrelated; the shipped reference is used[/]"
        )
    if stored and stored.get("highly_relevant") == 1.0:
        console.print(
            "[yellow]no cosine reaches that precision on this KB: nothing is HIGHLY_RELEVANT "
            "on its cosine alone[/]"
        )
    if stored.get("probes", 0) < MIN_PROBES:
        console.print(
            f"[yellow]only {stored.get('probes', 0)} probes: too few for thresholds to trust "
            f"(at least {MIN_PROBES}); the shipped numbers are used for a KB this small[/]"
        )
    in_use, shipped = report["in_use"], report["shipped"]
    table = Table(title="thresholds lookups use")
    for column in ("setting", "in use", "from", "measured", "shipped"):
        table.add_column(column)
    for key in ("highly-relevant-threshold", "reference-threshold"):
        table.add_row(
            key,
            str(in_use[key]),
            in_use["source"][key],
            str(report["proposed"][key]),
            str(shipped[key]),
        )
    table.add_row(
        "highly-relevant-lead",
        str(in_use["highly-relevant-lead"]),
        "measured" if in_use["highly-relevant-lead"] else "-",
        str(report["proposed"]["highly-relevant-lead"]),
        "0.0",
    )
    console.print(table)
    console.print(
        "settings (superbiz.yaml retrieval.normalization) override the measured values",
        highlight=False,
    )
