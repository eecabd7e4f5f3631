"""The ``eval`` benchmarks: each prints numbers (and writes JSON)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from superbiz.cli._common import (
    DataDir,
    JsonFlag,
    OutputFile,
    _errors,
    _progress,
    _publish,
    _settings,
    _Tracking,
    _tracking,
    err,
)

if TYPE_CHECKING:
    from superbiz.config import Settings


def eval_retrieval(
    dataset_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Folders with corpus/ and queries.jsonl; several are also shown side by side."
        ),
    ],
    data_dir: DataDir = None,
    k: Annotated[int, typer.Option("--k", help="Ranking depth.")] = 10,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N queries.")] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
    access_probe: Annotated[
        bool,
        typer.Option(
            "--access-probe",
            help="Also time lookups through a permission filter (every other domain "
            "restricted): p50 unrestricted, filtered reading all, filtered reading half.",
        ),
    ] = False,
) -> None:
    """Recall@1/5/10, MRR@10, level precision and lookup latency on a dataset."""
    from superbiz.evaluation.retrieval import evaluate_retrieval, render_reports

    report = _each_dataset(
        dataset_dirs,
        data_dir,
        lambda path, settings, tracking: evaluate_retrieval(
            path, settings, k=k, limit=limit, access_probe=access_probe, **tracking
        ),
    )
    _publish(report, output, as_json, render_reports)


def eval_levels(
    dataset_dir: Annotated[Path, typer.Argument(help="Folder with corpus/ and queries.jsonl.")],
    data_dir: DataDir = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Fit advanced.retrieval.levels: evidence on a labelled dataset (needs the answer model)."""
    from superbiz.evaluation.levels import calibrate_levels, render_levels

    with _errors():
        report = calibrate_levels(dataset_dir, _settings(_eval_home(dataset_dir, data_dir)))
    _publish(report, output, as_json, render_levels)


def eval_fit_ranker(
    dataset_dirs: Annotated[
        list[Path], typer.Argument(help="Labelled folders (corpus/ and queries.jsonl) to fit on.")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Where the ranker file goes (advanced.retrieval.ranker-file reads it)."
        ),
    ],
    data_dir: DataDir = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="linear: the listwise linear model over the first round's 18 features; "
            "trees: LambdaMART's small trees over all 27 (needs the ranker extra).",
        ),
    ] = "linear",
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Fit the learned ranker (advanced.retrieval.ranker: learned) on labelled datasets;
    with retrieval.answers.model on, the model that reads the answer model too."""
    from superbiz.evaluation.fit_ranker import fit_rankers, render_fit
    from superbiz.exceptions import SuperbizError

    with _errors():
        if model not in ("linear", "trees"):
            raise SuperbizError(f"--model {model}: linear or trees")
        several = len(dataset_dirs) > 1
        models, report = fit_rankers(
            [
                (path, _settings(_eval_home(path, data_dir, several=several)))
                for path in dataset_dirs
            ],
            model="trees" if model == "trees" else "linear",
        )
        out.write_text(models.to_json(), encoding="utf-8")
        report["written"] = str(out)
    _publish(report, output, as_json, render_fit)


def eval_agent(
    dataset_dir: Annotated[Path, typer.Argument(help="Folder with corpus/ and queries.jsonl.")],
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            "-p",
            help="obedient | over_cautious | domain_hopper | iss003_replay | defiant",
        ),
    ] = "obedient",
    governance: Annotated[
        str,
        typer.Option(
            "--governance",
            help="on: governed loop; off: plain ReAct baseline; cap:N: the frameworks' plain "
            "cap of N lookups per turn. Several, comma-separated (on,cap:3,off), run over the "
            "same plans as one table.",
        ),
    ] = "on",
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="profile: the --profile plays the agent; llm: the configured "
            "OpenAI-compatible model plans and plays it.",
        ),
    ] = "profile",
    data_dir: DataDir = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N queries.")] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Lookups, blocked calls, redundancy, steps, evidence recall, grounded answers and
    tokens under a profile or the configured model."""
    from superbiz.config import GovernanceConfig
    from superbiz.evaluation.agent import (
        evaluate_agent,
        governance_settings,
        render_agent_report,
    )
    from superbiz.evaluation.profiles import PROFILES
    from superbiz.exceptions import ConfigError

    if profile not in PROFILES:
        err.print(f"[bold red]error:[/] unknown profile {profile!r}; choose {', '.join(PROFILES)}")
        raise typer.Exit(2)
    if model not in ("profile", "llm"):
        err.print("[bold red]error:[/] --model must be 'profile' or 'llm'")
        raise typer.Exit(2)
    variants = [v.strip() for v in governance.split(",") if v.strip()]
    try:
        for variant in variants or [""]:
            governance_settings(variant, GovernanceConfig())
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] --governance: {escape(str(exc))}")
        raise typer.Exit(2) from None
    with _errors(), _progress() as progress:
        task = progress.add_task("llm" if model == "llm" else profile, total=None, item="")
        report = evaluate_agent(
            dataset_dir,
            _settings(_eval_home(dataset_dir, data_dir)),
            profile=profile,
            governance=variants[0] if len(variants) == 1 else variants,
            use_llm=model == "llm",
            limit=limit,
            **_tracking(progress, task),
            on_notice=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
        )
    _publish(report, output, as_json, render_agent_report)


def eval_service(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Knowledge base to serve (the example KB is ingested when it is empty) "
            "\\[default: ./.superbiz/eval/service].",
        ),
    ] = None,
    clients: Annotated[int, typer.Option("--clients", help="Concurrent clients.", min=1)] = 10,
    requests: Annotated[
        int, typer.Option("--requests", help="Turns per concurrent phase.", min=1)
    ] = 100,
    sequential: Annotated[
        int, typer.Option("--sequential", help="Turns of the one-client phases.", min=1)
    ] = 20,
    model_latency_ms: Annotated[
        float,
        typer.Option(
            "--model-latency-ms",
            help="Serve a simulated model: the extractive policy, each call delayed this long.",
            min=0,
        ),
    ] = 0,
    urls: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="A running replica to drive instead of an in-process server (repeat it: "
            "round robin, a session's turns alternating between replicas).",
        ),
    ] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Turn latency (p50/p95), turns/s and errors at one and N concurrent clients, time to
    the first SSE event, and an audit of every session (recorded calls, governance cap,
    cross-session leaks, second turns)."""
    from superbiz.evaluation.service import (
        benchmark_service,
        default_data_dir,
        render_service_report,
    )

    with _errors():
        report = benchmark_service(
            _settings(data_dir or default_data_dir()),
            clients=clients,
            requests=requests,
            sequential=sequential,
            model_latency_ms=model_latency_ms,
            urls=urls,
            on_notice=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
        )
    _publish(report, output, as_json, render_service_report)
    if not report["audit"]["ok"]:
        raise typer.Exit(1)


def eval_sync(
    files: Annotated[
        int, typer.Option("--files", help="Files in the generated repository.", min=1)
    ] = 400,
    changes: Annotated[
        int, typer.Option("--changes", help="Syncs timed, one edited file each.", min=1)
    ] = 3,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """A Git source's sync with one of FILES files changed, against its full ingest (a
    generated repository and a temporary KB; target ≤ 5 %)."""
    from superbiz.evaluation.sync import benchmark_sync, render_sync_report

    with _errors():
        report = benchmark_sync(_settings(None), files=files, changes=changes)
    _publish(report, output, as_json, render_sync_report)


def eval_gaps(
    lookups: Annotated[
        int, typer.Option("--lookups", help="Recorded lookups to generate.", min=1)
    ] = 100_000,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url", help="A database to write into (default: temporary SQLite)."
        ),
    ] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Time the knowledge-gaps report on a generated record of --lookups lookups."""
    from superbiz.evaluation.gaps import benchmark_gaps, render_gaps_benchmark

    with _errors():
        report = benchmark_gaps(_settings(None), lookups=lookups, database_url=database_url)
    _publish(report, output, as_json, render_gaps_benchmark)


def eval_ingest(
    path: Annotated[
        Path | None, typer.Argument(help="Files or a folder to ingest (or --synthetic-mb).")
    ] = None,
    synthetic_mb: Annotated[
        float | None,
        typer.Option(
            "--synthetic-mb", help="Ingest one generated single-line file this big.", min=0.001
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """Chunks per second and peak memory of an ingest from scratch into a temporary KB
    (the configured embedder; SQLite and Milvus Lite in a temporary folder)."""
    from superbiz.evaluation.ingest import benchmark_ingest, render_ingest_report

    if (path is None) == (synthetic_mb is None):
        err.print("[bold red]error:[/] give a PATH or --synthetic-mb, not both")
        raise typer.Exit(2)
    with _errors():
        report = benchmark_ingest(_settings(None), path, synthetic_mb=synthetic_mb)
    _publish(report, output, as_json, render_ingest_report)


def eval_bombs(
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Comma-separated, of pdf_bomb, pdf_2000_pages, docx_bomb, html_entity_bomb.",
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """Peak memory of `superbiz ingest` over generated files that inflate (a PDF stream
    bomb, a .docx bomb, an HTML entity bomb) and a 2,000-page PDF, each above the same
    command's peak over one small Markdown file (bound: 500 MB)."""
    from superbiz.evaluation.hostile import BOMBS, benchmark_bombs, render_bombs_report

    names = [n.strip() for n in only.split(",")] if only else None
    unknown = [n for n in names or [] if n not in BOMBS]
    if unknown:
        err.print(f"[bold red]error:[/] unknown file {unknown[0]!r} (known: {', '.join(BOMBS)})")
        raise typer.Exit(2)
    with _errors():
        report = benchmark_bombs(_settings(None), names)
    _publish(report, output, as_json, render_bombs_report)


def eval_upload(
    pages: Annotated[int, typer.Option("--pages", help="Pages of the uploaded PDF.", min=1)] = 2000,
    alone: Annotated[int, typer.Option("--alone", help="Chats timed alone.", min=1)] = 5,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """A chat's latency alone and while a generated PDF of PAGES pages is uploaded to the
    same server (one run): the upload must not hold the chats (target: within 2 s)."""
    from superbiz.evaluation.hostile import benchmark_upload, render_upload_report

    with _errors():
        report = benchmark_upload(_settings(None), pages=pages, alone=alone)
    _publish(report, output, as_json, render_upload_report)


def eval_telemetry(
    runs: Annotated[int, typer.Option("--runs", help="Runs of each variant.", min=1)] = 3,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """`superbiz ask` with no OTLP collector, one that refuses connections and one that
    never answers, alternating: the wall time of each and what it printed."""
    from superbiz.evaluation.hostile import benchmark_telemetry, render_telemetry_report

    with _errors():
        report = benchmark_telemetry(_settings(None), runs=runs)
    _publish(report, output, as_json, render_telemetry_report)


def eval_formats(
    dataset_dir: Annotated[
        Path, typer.Argument(help="A folder with corpus/ (Markdown) and queries.jsonl.")
    ],
    formats: Annotated[
        str, typer.Option("--formats", help="Comma-separated, of html, docx, pdf.")
    ] = "html,docx,pdf",
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the rendered corpora here; a later run reuses them."),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """The dataset rendered to HTML, DOCX and PDF by pandoc and LibreOffice (installed
    apart), each ingested: R@5, MRR@10, level counts and chunks/s beside Markdown's."""
    import tempfile

    from superbiz.evaluation.formats import default_jobs, evaluate_formats, render_formats_report

    wanted = [f.strip() for f in formats.split(",") if f.strip()]
    with _errors(), tempfile.TemporaryDirectory(prefix="superbiz-eval-formats-") as scratch:
        report = evaluate_formats(
            dataset_dir,
            _settings,
            work or Path(scratch),
            formats=wanted,
            jobs=default_jobs(),
            on_progress=lambda step: err.print(f"[dim]{step}[/]"),
        )
    _publish(report, output, as_json, render_formats_report)


def _each_dataset(
    dataset_dirs: list[Path],
    data_dir: Path | None,
    evaluate: Callable[[Path, Settings, _Tracking], dict[str, Any]],
) -> dict[str, Any]:
    """``evaluate`` on each dataset in its own knowledge base, with a progress bar; one
    report, or several as ``{"datasets": [...]}`` (rendered side by side)."""
    reports = []
    with _errors(), _progress() as progress:
        for dataset_dir in dataset_dirs:
            task = progress.add_task(dataset_dir.name, total=None, item="")
            home = _eval_home(dataset_dir, data_dir, several=len(dataset_dirs) > 1)
            reports.append(evaluate(dataset_dir, _settings(home), _tracking(progress, task)))
    return reports[0] if len(reports) == 1 else {"datasets": reports}


def _eval_dir(dataset_dir: Path) -> Path:
    """Each dataset gets its own knowledge base under ``./.superbiz/eval/``."""
    import hashlib

    digest = hashlib.sha1(str(dataset_dir.resolve()).encode()).hexdigest()[:8]
    return Path(".superbiz") / "eval" / f"{dataset_dir.resolve().name}-{digest}"


def _eval_home(dataset_dir: Path, data_dir: Path | None, *, several: bool = False) -> Path:
    """Where a dataset's knowledge base lives: ``--data-dir`` itself for one dataset, a
    folder in it per dataset for several (one corpus must not rank in another's), and
    ``_eval_dir`` without one."""
    own = _eval_dir(dataset_dir)
    if data_dir is None:
        return own
    return data_dir / own.name if several else data_dir


def eval_answers(
    dataset_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Folders with corpus/ and queries.jsonl; several are also shown side by side."
        ),
    ],
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            "-p",
            help="A behaviour profile of `eval agent` plays the executor (default: the "
            "configured assistant: extractive without an LLM).",
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option("--model", help="default: as configured; llm: the configured model."),
    ] = "default",
    data_dir: DataDir = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N queries.")] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """What the user reads: gold in the answer, first quoted document gold, share of
    quoted documents that are gold, documents quoted per answer; by language and turn."""
    from superbiz.evaluation.answers import evaluate_answers, render_reports
    from superbiz.evaluation.profiles import PROFILES

    if profile is not None and profile not in PROFILES:
        err.print(f"[bold red]error:[/] unknown profile {profile!r}; choose {', '.join(PROFILES)}")
        raise typer.Exit(2)
    if model not in ("default", "llm") or (model == "llm" and profile is not None):
        err.print("[bold red]error:[/] --model must be 'default' or 'llm' (not with --profile)")
        raise typer.Exit(2)
    report = _each_dataset(
        dataset_dirs,
        data_dir,
        lambda path, settings, tracking: evaluate_answers(
            path, settings, profile=profile, use_llm=model == "llm", limit=limit, **tracking
        ),
    )
    _publish(report, output, as_json, render_reports)


def eval_scale(
    dataset_dirs: Annotated[
        list[Path], typer.Argument(help="Seed sets (corpus/ and queries.jsonl each).")
    ],
    max_documents: Annotated[
        int, typer.Option("--max-documents", help="The largest size measured.", min=1)
    ] = 50_000,
    profile: Annotated[
        str, typer.Option("--profile", help="embedded (SQLite + Milvus Lite) or server.")
    ] = "embedded",
    database_url: Annotated[
        str,
        typer.Option("--database-url", help="PostgreSQL of the server profile (a schema is made)."),
    ] = "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the generated corpus (and the KB) here; reused."),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """One KB grown from the seed sets to --max-documents documents (distinct generated
    copies): ingest rate against the embedder's, peak RSS, disk, lookup latency and recall,
    the planner's map and latency, and the gaps report at each size. With -o the JSON is
    written after every size."""
    import json
    import tempfile

    from superbiz.evaluation.scale import benchmark_scale, render_scale_report

    if profile not in ("embedded", "server"):
        err.print("[bold red]error:[/] --profile must be 'embedded' or 'server'")
        raise typer.Exit(2)

    def partial(report: dict[str, object]) -> None:
        if output:
            output.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")

    with _errors(), tempfile.TemporaryDirectory(prefix="superbiz-eval-scale-") as scratch:
        report = benchmark_scale(
            dataset_dirs,
            _settings(None),
            work or Path(scratch),
            profile="server" if profile == "server" else "embedded",
            max_documents=max_documents,
            database_url=database_url,
            on_size=partial,
            on_notice=lambda text: err.print(f"[dim]{escape(text)}[/]"),
        )
    _publish(report, output, as_json, render_scale_report)
