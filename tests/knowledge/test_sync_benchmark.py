"""``superbiz eval sync``: a generated repository ingested in full, then synced with one
file changed; the report says what was stored and the ratio of the two times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from superbiz.cli import app


def test_cli_benchmarks_a_sync_against_the_full_ingest_and_writes_json(
    tmp_path: Path,
) -> None:
    out = tmp_path / "sync.json"
    result = CliRunner().invoke(
        app, ["eval", "sync", "--files", "12", "--changes", "2", "--json", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert (report["files"], report["documents"]) == (12, 12)
    assert len(report["sync_one_changed_seconds"]) == 2
    ratio = report["sync_one_changed_median_seconds"] / report["full_ingest_seconds"]
    assert report["ratio"] == pytest.approx(ratio, rel=0.02, abs=0.001)
    assert report["meets_target"] == (report["ratio"] <= 0.05)
    # a long page's one edited section is all its second sync embeds
    page = report["long_page"]
    assert page["sections"] == 300 and page["passages"] >= 300
    assert page["passages_kept"] == page["passages"] - 1
    assert not (tmp_path / ".superbiz").exists()  # the configured KB is never touched
