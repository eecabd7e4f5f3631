"""``superbiz eval ingest``: a synthetic single-line file or a folder, ingested from scratch
into a temporary KB; the report counts what was stored."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from superbiz.cli import app
from superbiz.config import Settings
from superbiz.evaluation.ingest import benchmark_ingest, synthetic_file


def test_synthetic_file_is_one_line_of_the_asked_size(tmp_path: Path) -> None:
    file = synthetic_file(tmp_path, 0.02)
    data = file.read_bytes()
    assert 20_000 <= len(data) < 20_100 and b"\n" not in data
    assert file.read_bytes() == synthetic_file(tmp_path, 0.02).read_bytes()  # deterministic


def test_benchmark_ingests_a_synthetic_file_past_the_size_limit(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "real", ingest={"max_file_bytes": 1000})
    report = benchmark_ingest(settings, synthetic_mb=0.004)
    assert (report["documents"], report["skipped"]) == (1, 0)
    assert report["chunks"] >= 5  # 4,000 characters in 800-character chunks
    assert report["chunks_per_s"] > 0 and report["peak_rss_mb"] > 0
    assert report["embedder"] == "use-multilingual-v3" and report["dimension"] == 512
    assert not (tmp_path / "real").exists()  # the configured KB is never touched


def test_cli_benchmarks_a_folder_and_writes_json(tmp_path: Path, small_kb: Path) -> None:
    out = tmp_path / "ingest.json"
    result = CliRunner().invoke(app, ["eval", "ingest", str(small_kb), "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["documents"] == 5 and report["path"] == str(small_kb)
    assert report["chunks"] >= 5


def test_cli_needs_a_path_or_a_synthetic_size(small_kb: Path) -> None:
    assert CliRunner().invoke(app, ["eval", "ingest"]).exit_code == 2
    both = ["eval", "ingest", str(small_kb), "--synthetic-mb", "1"]
    assert CliRunner().invoke(app, both).exit_code == 2
