"""The permission probe on the command line: ``--as-group`` on lookup, ask, trace, map,
gaps and feedback export, after a reader of everything used the session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from access_probe import PROBES, RECON_DOC, RECON_TITLE, assert_nothing_hidden, write_access_kb
from superbiz.cli import app
from superbiz.config import CONFIG_ENV
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.db import open_database
from superbiz.storage.feedback import FeedbackRepository

runner = CliRunner()
BOB = ("--as-group", "sre")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, use_embedder: Embedder) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("cli-access")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        data = root / "data"
        assert invoke("ingest", write_access_kb(root / "kb"), "--data-dir", data).exit_code == 0
        yield data


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def test_as_group_the_cli_shows_nothing_of_what_the_group_may_not_read(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "superbiz.yaml"
    config.write_text("access:\n  domains:\n    hr: [hr-team]\n", encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(config))  # each test starts without SUPERBIZ_*
    session = "cli-shared"
    everyone = invoke("ask", RECON_TITLE, "--session", session, "--data-dir", data_dir, "--json")
    assert everyone.exit_code == 0 and RECON_DOC in everyone.stdout
    engine = open_database(f"sqlite:///{data_dir / 'superbiz.db'}")
    try:
        FeedbackRepository(engine).rate(session, 1, "up", None)
    finally:
        engine.dispose()
    whole = invoke("trace", session, "--data-dir", data_dir, "--json")
    assert RECON_DOC in whole.stdout
    seen = {
        "trace": invoke("trace", session, "--data-dir", data_dir, "--json", *BOB).stdout,
        "map": invoke("map", "--data-dir", data_dir, *BOB).stdout,
        "gaps": invoke("gaps", "--data-dir", data_dir, "--json", *BOB).stdout,
    }
    assert_nothing_hidden(seen)
    assert json.loads(seen["trace"]) == []  # the one turn used what bob may not read
    for query in PROBES:
        found = invoke("lookup", query, "-s", session, "--data-dir", data_dir, "--json", *BOB)
        assert found.exit_code == 0, found.output
        assert_nothing_hidden(found.stdout, said=[query])
    out = tmp_path / "export"
    exported = invoke("feedback", "export", "--out", out, "--data-dir", data_dir, "--json", *BOB)
    assert exported.exit_code == 0, exported.output
    files = {str(p): p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file()}
    assert_nothing_hidden({"summary": exported.stdout, "files": files})
    full = invoke("feedback", "export", "--out", tmp_path / "all", "--data-dir", data_dir)
    assert full.exit_code == 0 and (tmp_path / "all" / "corpus" / RECON_DOC).is_file()
    bad = invoke("lookup", "x", "--data-dir", data_dir, "--as-group", "*")
    assert bad.exit_code == 2 and "no group a reader can be in" in bad.output
