"""``superbiz eval formats``: does a knowledge base kept as HTML, Word, PDF or AsciiDoc
retrieve as well as the same knowledge base in Markdown, and how fast is each ingested?

The dataset's Markdown is rendered by real converters, installed apart and never
committed: pandoc writes HTML (standalone, as a static-site export is), DOCX and
AsciiDoc (Asciidoctor's syntax, with its document header), and LibreOffice turns each
DOCX into a PDF, as a person exporting their Word runbook would.
Each rendering becomes a dataset of its own (the same folders, so the same domains;
the gold paths renamed to the new extension) and goes through ``eval retrieval`` and
``eval ingest``; the report sets R@5, MRR@10 and the relevance-level counts of each
format beside the Markdown original's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.config import Settings
from superbiz.evaluation.ingest import benchmark_ingest
from superbiz.evaluation.retrieval import evaluate_retrieval
from superbiz.exceptions import SuperbizError

FORMATS = ("html", "docx", "pdf", "adoc")
#: the issue's targets: R@5 and MRR within this of Markdown's, level counts within this
#: share of the queries, PDF ingest at least this share of Markdown's chunks/s
SCORE_TOLERANCE = 0.01
LEVEL_TOLERANCE = 0.02
PDF_SPEED_SHARE = 0.5
_TOOLS = {
    "pandoc": "apt-get install pandoc",
    "soffice": "apt-get install --no-install-recommends libreoffice-writer-nogui",
}


def converter_versions(formats: Sequence[str]) -> dict[str, str]:
    """The converters' versions, or ``SuperbizError`` naming the one that is missing and
    how to install it."""
    needed = ["pandoc"] + (["soffice"] if "pdf" in formats else [])
    versions = {}
    for tool in needed:
        if shutil.which(tool) is None:
            raise SuperbizError(f"{tool} is not installed: `{_TOOLS[tool]}` (Debian)")
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
        versions[tool] = (out.stdout.strip().splitlines() or ["?"])[0]
    return versions


def render_dataset(dataset_dir: Path, target: Path, fmt: str, jobs: int = 2) -> dict[str, Any]:
    """Render ``dataset_dir``'s corpus into ``target`` as ``fmt`` (html, docx, pdf, adoc),
    with ``queries.jsonl`` pointing at the rendered files. Reused when already there."""
    sources = sorted((dataset_dir / "corpus").rglob("*.md"))
    corpus = target / "corpus"
    rendered = sorted(corpus.rglob(f"*.{fmt}")) if corpus.is_dir() else []
    started = time.perf_counter()
    reused = len(rendered) == len(sources)
    if not reused:
        shutil.rmtree(target, ignore_errors=True)
        corpus.mkdir(parents=True)
        if fmt == "pdf":
            failed = _render_pdf(dataset_dir / "corpus", corpus, sources, jobs)
        else:
            failed = _render_pandoc(dataset_dir / "corpus", corpus, sources, fmt, jobs)
        (target / "failed.json").write_text(json.dumps(failed, ensure_ascii=False, indent=1))
    _rewrite_queries(dataset_dir, target, fmt)
    readme = dataset_dir / "README.md"
    if readme.is_file():  # its title says whether the set is answer-only
        shutil.copyfile(readme, target / "README.md")
    made = sorted(corpus.rglob(f"*.{fmt}"))
    failures = target / "failed.json"
    return {
        "files": len(made),
        "missing": len(sources) - len(made),
        "failed": json.loads(failures.read_text()) if failures.is_file() else {},
        "seconds": round(time.perf_counter() - started, 1),
        "reused": reused,
    }


#: pandoc filter: an image becomes its alt text, as the Markdown reads; the pictures a
#: corpus links to are not in it, and pandoc's DOCX writer stops at a missing one
_ALT_TEXT_FILTER = "function Image(image) return pandoc.Str(pandoc.utils.stringify(image)) end\n"


def _render_pandoc(
    source: Path, corpus: Path, files: list[Path], fmt: str, jobs: int
) -> dict[str, str]:
    """Render ``files`` with pandoc; the error of each file pandoc refused, by path."""
    writer = {
        "html": ["-t", "html5", "--standalone"],
        "docx": ["-t", "docx"],
        "adoc": ["-t", "asciidoctor", "--standalone"],  # pandoc 2 and 3 alike
    }[fmt]
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="superbiz-pandoc-") as scratch:
        images = Path(scratch) / "alt-text.lua"
        images.write_text(_ALT_TEXT_FILTER, encoding="utf-8")

        def one(file: Path) -> None:
            out = (corpus / file.relative_to(source)).with_suffix(f".{fmt}")
            out.parent.mkdir(parents=True, exist_ok=True)
            # through pandoc's JSON: its DOCX writer fetches images before any filter runs
            read = ["pandoc", "-f", "markdown", "-t", "json", f"--lua-filter={images}", str(file)]
            parsed = subprocess.run(read, capture_output=True, check=False)
            done = parsed
            if not parsed.returncode:
                write = ["pandoc", "-f", "json", *writer, "-o", str(out)]
                done = subprocess.run(write, input=parsed.stdout, capture_output=True, check=False)
            if done.returncode:
                error = done.stderr.decode("utf-8", "replace").strip()[:300]
                failed[file.relative_to(source).as_posix()] = error

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, files))
    return failed


def _render_pdf(source: Path, corpus: Path, files: list[Path], jobs: int) -> dict[str, str]:
    """Markdown → DOCX (pandoc) → PDF (LibreOffice, in batches: it starts slowly); the
    files either refused, by path."""
    with tempfile.TemporaryDirectory(prefix="superbiz-formats-") as scratch:
        work = Path(scratch)
        flat = work / "docx"
        flat.mkdir()
        names = {}
        for number, file in enumerate(files):
            names[f"d{number:05d}"] = file.relative_to(source)
        staged = work / "tree"
        failed = _render_pandoc(source, staged, files, "docx", jobs)
        for name, relative in names.items():
            if relative.as_posix() not in failed:
                shutil.move(staged / relative.with_suffix(".docx"), flat / f"{name}.docx")
        pdfs = work / "pdf"
        # LibreOffice stops part-way through a long batch (154 of 401 dev files once, no
        # error): batches of 40, then each file still missing once more on its own
        pending = sorted(flat.glob("*.docx"))
        for size in (40, 1):
            for start in range(0, len(pending), size):
                _soffice(work, pdfs, pending[start : start + size])
            pending = [p for p in pending if not (pdfs / f"{p.stem}.pdf").is_file()]
        for name, relative in names.items():
            made = pdfs / f"{name}.pdf"
            if made.is_file():
                out = (corpus / relative).with_suffix(".pdf")
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(made, out)
            elif relative.as_posix() not in failed:
                failed[relative.as_posix()] = "LibreOffice wrote no PDF"
    return failed


def _soffice(work: Path, out: Path, files: list[Path]) -> None:
    subprocess.run(
        [
            "soffice",
            f"-env:UserInstallation=file://{work / 'profile'}",
            "--headless",
            "--convert-to",
            "pdf",
            "--outdir",
            str(out),
            *map(str, files),
        ],
        capture_output=True,
        check=False,
        timeout=600,
    )


def _rewrite_queries(dataset_dir: Path, target: Path, fmt: str) -> None:
    def renamed(path: str) -> str:
        return path[: -len(".md")] + f".{fmt}" if path.endswith(".md") else path

    lines = []
    for line in (dataset_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            row["gold"] = [renamed(p) for p in row["gold"]]
            if row.get("gold_linked"):
                row["gold_linked"] = [renamed(p) for p in row["gold_linked"]]
            lines.append(json.dumps(row, ensure_ascii=False))
    (target / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def evaluate_formats(
    dataset_dir: Path,
    settings_for: Callable[[Path], Settings],
    work: Path,
    *,
    formats: Sequence[str] = FORMATS,
    jobs: int = 2,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Retrieval and ingest speed of ``dataset_dir`` as Markdown and as each of
    ``formats``; ``settings_for(data_dir)`` gives the settings of one evaluation KB."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise SuperbizError(f"unknown format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    versions = converter_versions(formats)
    rows: dict[str, dict[str, Any]] = {}
    for fmt in ("md", *formats):
        if on_progress:
            on_progress(f"{fmt}: rendering")
        if fmt == "md":
            dataset, rendering = dataset_dir, None
        else:
            dataset = work / fmt / "dataset"
            rendering = render_dataset(dataset_dir, dataset, fmt, jobs)
        if on_progress:
            on_progress(f"{fmt}: retrieval")
        settings = settings_for(work / fmt / "data")
        shutil.rmtree(work / fmt / "data", ignore_errors=True)  # a fresh ingest each run
        retrieval = evaluate_retrieval(dataset, settings)
        if on_progress:
            on_progress(f"{fmt}: ingest speed")
        speed = benchmark_ingest(settings, dataset / "corpus")
        rows[fmt] = _row(retrieval, speed, rendering)
    _compare(rows)
    return {
        "dataset": str(dataset_dir),
        "converters": versions,
        "targets": {
            "score_tolerance": SCORE_TOLERANCE,
            "level_tolerance_share_of_queries": LEVEL_TOLERANCE,
            "pdf_speed_share": PDF_SPEED_SHARE,
        },
        "formats": rows,
    }


def _row(
    retrieval: dict[str, Any], speed: dict[str, Any], rendering: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "rendering": rendering,
        "queries": retrieval["queries"],
        "recall@1": retrieval["overall"]["recall@1"],
        "recall@5": retrieval["overall"]["recall@5"],
        "mrr@10": retrieval["overall"]["mrr@10"],
        "by_lang": {
            lang: {"recall@5": row["recall@5"], "mrr@10": row["mrr@10"]}
            for lang, row in retrieval["by_lang"].items()
        },
        "levels": {name: row["count"] for name, row in retrieval["levels"].items()},
        "documents": speed["documents"],
        "skipped": speed["skipped"],
        "chunks": speed["chunks"],
        "ingest_seconds": speed["seconds"],
        "cpu_seconds": speed["cpu_seconds"],
        "chunks_per_s": speed["chunks_per_s"],
        # what a busy neighbour changes least (README "Ingest throughput")
        "chunks_per_cpu_s": round(speed["chunks"] / speed["cpu_seconds"], 1)
        if speed["cpu_seconds"]
        else None,
        "load_average_1m": speed["load_average_1m"],
    }


def _compare(rows: dict[str, dict[str, Any]]) -> None:
    """Each format's differences from Markdown, and whether it meets the targets."""
    base = rows["md"]
    for fmt, row in rows.items():
        if fmt == "md":
            continue
        names = set(base["levels"]) | set(row["levels"])
        level_gap = max(
            (abs(row["levels"].get(n, 0) - base["levels"].get(n, 0)) for n in names), default=0
        )
        row["delta"] = {
            "recall@5": round(row["recall@5"] - base["recall@5"], 6),
            "mrr@10": round(row["mrr@10"] - base["mrr@10"], 6),
            "largest_level_count_change": level_gap,
            "level_change_share": round(level_gap / base["queries"], 6),
            "speed_share": round(row["chunks_per_s"] / base["chunks_per_s"], 3)
            if base["chunks_per_s"]
            else None,
            "cpu_speed_share": round(row["chunks_per_cpu_s"] / base["chunks_per_cpu_s"], 3)
            if base["chunks_per_cpu_s"] and row["chunks_per_cpu_s"]
            else None,
        }
        delta = row["delta"]
        row["meets_targets"] = (
            not (row["rendering"] or {}).get("missing")  # scores over a partial corpus
            and abs(delta["recall@5"]) <= SCORE_TOLERANCE
            and abs(delta["mrr@10"]) <= SCORE_TOLERANCE
            and delta["level_change_share"] <= LEVEL_TOLERANCE
            and (fmt != "pdf" or (delta["speed_share"] or 0) >= PDF_SPEED_SHARE)
        )


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def render_formats_report(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"formats on {report['dataset']}")
    columns = (
        *("format", "files", "R@5", "ΔR@5", "MRR@10", "ΔMRR", "levels"),
        *("chunks", "chunks/s", "per CPU-s"),
    )
    for column in (*columns, "targets"):
        table.add_column(column, justify="left" if column in ("format", "levels") else "right")
    for fmt, row in report["formats"].items():
        delta = row.get("delta") or {}
        levels = " ".join(f"{name[:4]} {count}" for name, count in sorted(row["levels"].items()))
        table.add_row(
            fmt,
            str(row["documents"]) + (f" (-{row['skipped']})" if row["skipped"] else ""),
            f"{row['recall@5']:.3f}",
            f"{delta['recall@5']:+.3f}" if delta else "",
            f"{row['mrr@10']:.3f}",
            f"{delta['mrr@10']:+.3f}" if delta else "",
            levels,
            str(row["chunks"]),
            f"{row['chunks_per_s']}" + (f" ({delta['speed_share']:.0%})" if delta else ""),
            f"{row['chunks_per_cpu_s']}"
            + (f" ({delta['cpu_speed_share']:.0%})" if delta and delta["cpu_speed_share"] else ""),
            "" if fmt == "md" else ("met" if row["meets_targets"] else "[red]missed[/]"),
        )
    console.print(table)
    tools = ", ".join(report["converters"].values())
    console.print(
        f"[dim]rendered by {tools}; targets: R@5 and MRR within {SCORE_TOLERANCE}, each level "
        f"count within {LEVEL_TOLERANCE:.0%} of the queries, PDF ≥ {PDF_SPEED_SHARE:.0%} of "
        "Markdown's chunks/s[/]"
    )
