"""Commands that build and inspect the knowledge base: ``ingest``, ``sources``, ``map``,
``calibrate``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from superbiz.cli._common import (
    AsGroup,
    DataDir,
    JsonFlag,
    _knowledge_base,
    _print_json,
    _progress,
    _publish,
    _reader,
    _settings,
    _tracking,
    console,
    err,
)


def ingest(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Markdown files or folders (or --git URL).")
    ] = None,
    data_dir: DataDir = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Drop documents whose files are gone.")
    ] = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop the index and ingest everything anew.")
    ] = False,
    git: Annotated[
        str | None,
        typer.Option(
            "--git",
            help="A Git repository's URL: cloned into the data dir and ingested; again: "
            "only what changed since the last sync.",
        ),
    ] = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="With --git: the branch \\[default: HEAD's].")
    ] = None,
    subdir: Annotated[
        str | None, typer.Option("--subdir", help="With --git: only this folder of it.")
    ] = None,
    domain: Annotated[
        str | None,
        typer.Option("--domain", help="With --git: the domain (folder) its documents go in."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    from superbiz.knowledge.coverage.domains import DomainService
    from superbiz.knowledge.documents.metadata import LLMMetadataWriter
    from superbiz.knowledge.sources.lifecycle import DocumentLifecycle
    from superbiz.llm import make_chat_model

    settings = _settings(data_dir)
    paths = paths or []
    if bool(git) == bool(paths):
        err.print("[bold red]error:[/] give PATH... or --git URL (one of them)")
        raise typer.Exit(2)
    if not git and (branch or subdir or domain):
        err.print("[bold red]error:[/] --branch, --subdir and --domain go with --git URL")
        raise typer.Exit(2)
    # a mistyped path is an error, not a skipped file: a CI job must not pass on it
    if problems := [problem for path in paths if (problem := _unreachable(path))]:
        err.print(f"[bold red]error:[/] {escape('; '.join(problems))}")
        raise typer.Exit(2)
    with _knowledge_base(settings) as kb:
        model = make_chat_model(settings.llm)
        lifecycle = DocumentLifecycle(
            kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=DomainService(kb, model),
        )
        if git:
            synced = lifecycle.add_git(git, branch=branch, subdir=subdir, domain=domain)
            report = synced.report
        else:
            with _progress() as progress:
                task = progress.add_task("ingesting", total=None, item="")
                report = lifecycle.ingest(
                    paths,
                    prune=prune,
                    rebuild=rebuild,
                    **_tracking(progress, task),
                )
    if as_json:
        _print_json(synced.as_dict() if git else report.as_dict())
        return
    for path, reason in _by_reason(report.skipped):
        err.print(f"[yellow]skipped[/] {escape(path)}: {escape(reason)}")
    for where, reason in _by_reason(report.metadata_failures):
        err.print(f"[yellow]metadata derived[/] {escape(where)}: {escape(reason)}")
    for where, reason in _by_reason(report.metadata_warnings):
        err.print(f"[yellow]metadata warning[/] {escape(where)}: {escape(reason)}")
    for note in report.notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    if git:
        for old, new in synced.renamed:
            err.print(f"renamed {escape(old)} → {escape(new)}")
        console.print(f"sync: {escape(synced.summary())}")
        return
    console.print(f"ingest: {report.summary()}")


#: files named one by one under one metadata note; more share one line (``--json`` has all)
_NAMED_FILES = 3


def _by_reason(notes: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Skips and metadata notes as printed: each reason once, after the files it holds
    for, named up to ``_NAMED_FILES`` of them. A site's own frontmatter key on each of its
    91 pages printed 91 identical warnings, a Sphinx build's copied sources a line each.

    >>> _by_reason([("a.md", "x"), ("b.md", "y"), ("c.md", "x")])
    [('a.md', 'x'), ('c.md', 'x'), ('b.md', 'y')]
    >>> _by_reason([(f"{n}.md", "x") for n in range(5)])
    [('5 files (0.md, 1.md, 2.md, …)', 'x')]
    """
    files: dict[str, list[str]] = {}
    for path, reason in notes:
        files.setdefault(reason, []).append(path)
    lines: list[tuple[str, str]] = []
    for reason, paths in files.items():
        if len(paths) <= _NAMED_FILES:
            lines += [(path, reason) for path in paths]
        else:
            named = ", ".join(paths[:_NAMED_FILES])
            lines.append((f"{len(paths)} files ({named}, …)", reason))
    return lines


def sources(
    data_dir: DataDir = None,
    sync: Annotated[
        bool,
        typer.Option("--sync", help="Fetch every Git source first and ingest what changed."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Every source documents came from (folders, Git repositories) and its last sync."""
    from superbiz.exceptions import SourceError
    from superbiz.knowledge.coverage.domains import DomainService
    from superbiz.knowledge.documents.metadata import LLMMetadataWriter
    from superbiz.knowledge.sources.lifecycle import DocumentLifecycle
    from superbiz.knowledge.sources.source_list import SourceList
    from superbiz.llm import make_chat_model
    from superbiz.storage.sources import GIT

    settings = _settings(data_dir)
    failed = False
    with _knowledge_base(settings) as kb:
        model = make_chat_model(settings.llm) if sync else None
        lifecycle = DocumentLifecycle(
            kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=DomainService(kb, model),
        )
        for source in lifecycle.list_sources() if sync else []:
            if source.kind != GIT:
                continue
            try:
                synced = lifecycle.sync(source.name)
                err.print(f"sync: {escape(synced.summary())}")
            except SourceError as exc:  # recorded on the source; the others go on
                failed = True
                err.print(f"[bold red]error:[/] {escape(source.name)}: {escape(str(exc))}")
        records = lifecycle.list_sources()
    if as_json:
        shown = SourceList.of(records, settings.sources.sync_interval_s)
        _print_json(shown.model_dump(mode="json", include={"sources"}))
        raise typer.Exit(1 if failed else 0)
    if not records:
        console.print("no sources yet: `superbiz ingest PATH` or `superbiz ingest --git URL`")
        return
    table = Table("name", "kind", "location", "commit", "last sync", "counts", "error")
    for r in records:
        where = r.location + (f" @ {r.branch}" if r.branch else "")
        where += f" /{r.subdir}" if r.subdir else ""
        counts = ", ".join(f"{n} {k}" for k, n in r.counts.items())
        table.add_row(
            escape(r.name),
            r.kind,
            escape(where),
            (r.commit or "")[:12],
            r.synced_at.strftime("%Y-%m-%d %H:%M:%S UTC") if r.synced_at else "never",
            counts,
            Text(r.error or "", style="red"),
        )
    console.print(table)
    if failed:
        raise typer.Exit(1)


def _unreachable(path: Path) -> str | None:
    """Why ``path`` cannot be ingested at all, or None (a folder above it that cannot be
    read is said as such, not as a traceback)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return f"no such file or directory: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


def knowledge_map(
    data_dir: DataDir = None,
    budget: Annotated[
        int | None, typer.Option("--budget", help="Token budget \\[default: planner setting].")
    ] = None,
    as_group: AsGroup = None,
) -> None:
    """Print the knowledge map the Planner sees (YAML); with --as-group, that group's."""
    from superbiz.knowledge.coverage.map import build_map, map_for

    settings = _settings(data_dir)
    reader = _reader(as_group)
    with _knowledge_base(settings) as kb:
        kmap = map_for(build_map(kb), kb.view(reader))
        text = kmap.to_yaml(budget or settings.advanced.planner.map_token_budget)
    sys.stdout.write(text)


def calibrate(
    data_dir: DataDir = None,
    measure: Annotated[
        bool, typer.Option("--measure", help="Measure again now and store the result.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The level thresholds measured on this KB (after every change of documents), how
    they were derived, and which ones lookups use (settings override them)."""
    from superbiz.evaluation.calibrate import calibrate as run_calibration
    from superbiz.evaluation.calibrate import render_calibration

    with _knowledge_base(_settings(data_dir)) as kb:
        report = run_calibration(kb, measure=measure)
    _publish(report, None, as_json, render_calibration)
