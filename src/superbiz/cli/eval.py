"""The ``eval`` measures of a labelled dataset (retrieval, levels, the ranker, the agent,
answers, formats), each in its own knowledge base; the system's are in ``bench``."""

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

RunningSessions = Annotated[
    int | None,
    typer.Option(
        "--running",
        min=1,
        help="Ask the questions N to a session, in a seeded shuffle (unrelated questions in "
        "one running session: what a session already holds must not make a turn worse).",
    ),
]


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
    running: RunningSessions = None,
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
            running=running,
            **_tracking(progress, task),
            on_notice=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
        )
    _publish(report, output, as_json, render_agent_report)


def eval_formats(
    dataset_dir: Annotated[
        Path, typer.Argument(help="A folder with corpus/ (Markdown) and queries.jsonl.")
    ],
    formats: Annotated[
        str, typer.Option("--formats", help="Comma-separated, of html, docx, pdf, adoc.")
    ] = "html,docx,pdf,adoc",
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the rendered corpora here; a later run reuses them."),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """The dataset rendered to HTML, DOCX, PDF and AsciiDoc by pandoc and LibreOffice
    (installed apart), each ingested: R@5, MRR@10, level counts and chunks/s beside
    Markdown's."""
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
    running: RunningSessions = None,
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
            path,
            settings,
            profile=profile,
            use_llm=model == "llm",
            limit=limit,
            running=running,
            **tracking,
        ),
    )
    _publish(report, output, as_json, render_reports)
