"""The ``superbiz`` command line end to end on a small KB (real USE, Milvus Lite, SQL).

The CLI loads its embedder through ``make_embedder``; the tests hand it the one real USE
model of the session instead of loading it again for every command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner, Result

import superbiz
from expectations import RESULT_KEYS, SEED_DETAIL_KEYS
from fakes.git_remote import Remote
from superbiz.cli import app
from superbiz.config import CONFIG_ENV, load_settings
from superbiz.retrieval.embedders import Embedder

PAYMENT = "payment/支付失败排查.md"
BROKEN = "payment/broken.md"
RANKING_KEYS = {"recall@1", "recall@5", "recall@10", "mrr@10"}


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


runner = CliRunner()


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def cli_kb(
    tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]
) -> dict[str, Any]:
    """The small KB plus one malformed file, ingested once through the CLI."""
    root = tmp_path_factory.mktemp("cli")
    folder = kb_writer(root / "kb")
    kb_writer(folder, {BROKEN: "---\ntitle: [unclosed\n---\nbody\n"})
    data_dir = root / "data"
    first = invoke("ingest", folder, "--data-dir", data_dir)
    return {"folder": folder, "data_dir": data_dir, "first": first}


def lookup(data_dir: Path, query: str, session: str, *extra: str) -> Result:
    return invoke("lookup", query, "--session", session, "--data-dir", data_dir, *extra)


# -- ingest ------------------------------------------------------------------------------------


def test_ingest_prints_the_summary_and_skipped_reasons(cli_kb: dict[str, Any]) -> None:
    result = cli_kb["first"]
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ingest: 5 added, 0 updated, 0 unchanged, 1 skipped"
    assert f"skipped {BROKEN}: malformed frontmatter:" in one_line(result.stderr)
    assert f"metadata warning {PAYMENT}: unknown frontmatter key 'owner'" in one_line(result.stderr)
    assert "Traceback" not in result.output


def test_second_ingest_says_unchanged(cli_kb: dict[str, Any]) -> None:
    result = invoke("ingest", cli_kb["folder"], "--data-dir", cli_kb["data_dir"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ingest: 0 added, 0 updated, 5 unchanged, 1 skipped"


def test_ingest_json(cli_kb: dict[str, Any]) -> None:
    result = invoke("ingest", cli_kb["folder"], "--data-dir", cli_kb["data_dir"], "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["unchanged"]) == 5 and report["added"] == []
    [skipped] = report["skipped"]
    assert skipped["path"] == BROKEN and skipped["reason"].startswith("malformed frontmatter")
    [warning] = report["metadata_warnings"]
    assert warning["path"] == PAYMENT and "'owner'" in warning["reason"]


def test_ingest_missing_path_is_one_red_line_and_exit_2(tmp_path: Path) -> None:
    """A mistyped path fails the command (a CI job must not pass) and stores nothing."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text("# A\ntext\n", encoding="utf-8")
    data_dir = tmp_path / "data"
    result = invoke("ingest", folder, tmp_path / "nope", "--data-dir", data_dir)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    assert one_line(result.stderr) == f"error: no such file or directory: {tmp_path / 'nope'}"
    assert not data_dir.exists()


def test_ingest_git_then_sources_lists_the_repository_and_the_folder(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    remote = Remote(tmp_path / "origin")
    remote.write({"docs/deploy.md": "# Deploy\n\nRoll out behind the flag.\n"})
    commit = remote.commit("first")
    data_dir = tmp_path / "data"
    first = invoke("ingest", "--git", remote.url, "--subdir", "docs", "--data-dir", data_dir)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == (
        f"sync: remote at {commit[:12]} (full): 1 added, 0 updated, 0 renamed, 0 removed, "
        "0 unchanged, 0 skipped"
    )
    folder = kb_writer(tmp_path / "kb")
    assert invoke("ingest", folder, "--data-dir", data_dir).exit_code == 0
    listed = invoke("sources", "--data-dir", data_dir, "--json")
    assert listed.exit_code == 0, listed.output
    sources = {s["name"]: s for s in json.loads(listed.stdout)["sources"]}
    assert sources["remote"]["kind"] == "git" and sources["remote"]["commit"] == commit
    assert sources["remote"]["counts"]["documents"] == 1
    assert sources["kb"]["kind"] == "folder" and sources["kb"]["counts"]["added"] == 5
    table = invoke("sources", "--data-dir", data_dir)
    assert commit[:12] in table.stdout and "remote" in table.stdout

    remote.write({"docs/rollback.md": "# Rollback\n\nRevert the tag.\n"})
    second = remote.commit("second")
    synced = invoke("sources", "--sync", "--data-dir", data_dir, "--json")
    assert synced.exit_code == 0, synced.output
    assert f"sync: remote at {second[:12]} (incremental): 1 added" in one_line(synced.stderr)
    after = {s["name"]: s for s in json.loads(synced.stdout)["sources"]}
    assert after["remote"]["commit"] == second and after["remote"]["counts"]["documents"] == 2
    shutil.rmtree(remote.bare)
    unreachable = invoke("sources", "--sync", "--data-dir", data_dir)
    assert unreachable.exit_code == 1
    assert "error: remote: git fetch:" in one_line(unreachable.stderr)
    assert "fetch failed" in one_line(unreachable.stdout)  # the table's error column


def test_ingest_git_of_a_missing_repository_is_one_red_line_and_exit_2(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = invoke("ingest", "--git", f"file://{tmp_path}/nope.git", "--data-dir", data_dir)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    assert one_line(result.stderr).startswith("error: git ls-remote: ")
    assert "does not appear to be a git repository" in one_line(result.stderr)
    listed = invoke("sources", "--data-dir", data_dir, "--json")
    assert json.loads(listed.stdout) == {"sources": []}


def test_ingest_needs_paths_or_git_and_git_options_need_git(tmp_path: Path) -> None:
    assert invoke("ingest", "--data-dir", tmp_path).exit_code == 2
    result = invoke("ingest", tmp_path, "--branch", "main", "--data-dir", tmp_path / "d")
    assert result.exit_code == 2 and "go with --git URL" in one_line(result.stderr)


def test_ingest_of_a_path_under_an_unreadable_folder_is_one_red_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a user who is not root gets under a ``chmod 000`` folder (root is not stopped)."""
    locked = tmp_path / "locked" / "inner"
    stat = Path.stat

    def refuse(path: Path, **kwargs: Any) -> Any:
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return stat(path, **kwargs)

    monkeypatch.setattr(Path, "stat", refuse)
    result = invoke("ingest", locked, "--data-dir", tmp_path / "data")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert one_line(result.stderr) == f"error: cannot read {locked}: Permission denied"


# -- lookup ------------------------------------------------------------------------------------


def test_lookup_json_is_one_lookup_result(cli_kb: dict[str, Any]) -> None:
    result = lookup(cli_kb["data_dir"], "支付失败排查", f"s-{uuid.uuid4().hex}", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # exactly one JSON object, nothing else on stdout
    assert set(data) == RESULT_KEYS
    assert data["relevance_level"] == "PRECISE"
    assert data["found"] is True
    assert data["primary"]["path"] == PAYMENT
    assert data["completeness_hint"] == "知识库中不存在比上述结果更精准的文档"
    assert data["retrieved_domains_this_session"] == ["payment"]
    assert "score" not in result.stdout and "similarity" not in result.stdout


def test_lookup_details_add_retrieval_details(cli_kb: dict[str, Any]) -> None:
    result = lookup(
        cli_kb["data_dir"], "支付失败排查", f"s-{uuid.uuid4().hex}", "--json", "--details"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == RESULT_KEYS | {"retrieval_details"}
    details = data["retrieval_details"]
    assert set(details) >= SEED_DETAIL_KEYS
    assert details["relevance_level"] == "PRECISE"
    assert details["l1_top_similarity"] == pytest.approx(1 - details["l1_top_score"] / 2, abs=1e-6)


def test_lookup_plain_output(cli_kb: dict[str, Any]) -> None:
    result = lookup(cli_kb["data_dir"], "支付失败排查", f"s-{uuid.uuid4().hex}")
    assert result.exit_code == 0, result.output
    assert "PRECISE" in result.stdout
    assert "知识库中不存在比上述结果更精准的文档" in result.stdout
    assert "支付失败排查" in result.stdout
    assert "l1_top_score" not in result.stdout


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_second_lookup_in_the_same_session_is_deduped(
    database: str,
    tmp_path: Path,
    small_kb: Path,
    database_factory: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each command is a separate invocation: the SQL tracker carries the session over."""
    if database == "postgresql":
        monkeypatch.setenv("SUPERBIZ_DATABASE_URL", database_factory("postgresql"))
    data_dir = tmp_path / "data"
    assert invoke("ingest", small_kb, "--data-dir", data_dir).exit_code == 0
    first = lookup(data_dir, "支付失败排查", "cli-session", "--json")
    assert json.loads(first.stdout)["relevance_level"] == "PRECISE"

    second = lookup(data_dir, "支付失败排查", "cli-session", "--json")
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert data["relevance_level"] == "DEDUPED"
    assert data["dedup_reason"] == "doc_retrieved"
    assert data["found"] is False and data["primary"] is None
    assert "《支付失败排查》" in data["message"]
    assert data["retrieved_domains_this_session"] == ["payment"]

    other = lookup(data_dir, "支付失败排查", "another-session", "--json")
    assert json.loads(other.stdout)["relevance_level"] == "PRECISE"
    if database == "postgresql":  # nothing was written to the SQLite default
        assert not (data_dir / "superbiz.db").exists()


def test_a_lookup_without_a_session_is_a_new_one_whose_id_continues_it(
    cli_kb: dict[str, Any],
) -> None:
    """One shared default session had made every lookup and question a follow-up of all
    before it: the same lookup a second time found its document withheld as seen."""
    data_dir = cli_kb["data_dir"]
    runs = [invoke("lookup", "支付失败排查", "--data-dir", data_dir, "--json") for _ in "ab"]
    assert all(run.exit_code == 0 for run in runs), runs[-1].output
    assert [json.loads(run.stdout)["relevance_level"] for run in runs] == ["PRECISE"] * 2
    said = [
        re.fullmatch(r"session (\S+) · --session \1 continues it", one_line(run.stderr))
        for run in runs
    ]
    first, second = (match.group(1) if match else None for match in said)
    assert first and second and first != second and first.startswith("lookup-")
    again = lookup(data_dir, "支付失败排查", first, "--json")
    assert json.loads(again.stdout)["relevance_level"] == "DEDUPED"
    assert again.stderr == ""  # a session it was given is not announced


@pytest.mark.parametrize(
    ("session", "problem"),
    [
        (" ", "must not be blank"),
        ("s" * 129, "is longer than 128 characters"),
        ("a/b", "must not hold a control character, '/' or '\\'"),
        ("a\nb", "must not hold a control character, '/' or '\\'"),
    ],
)
def test_a_session_no_store_or_api_could_name_is_one_red_line(
    cli_kb: dict[str, Any], session: str, problem: str
) -> None:
    """The API's rule: SQLite had kept any session id, PostgreSQL refused one over its
    column's 128 characters as a store error, and the page could not reach one with a
    slash."""
    for command in (["lookup", "x"], ["ask", "x"], ["chat"]):
        result = invoke(*command, "--session", session, "--data-dir", cli_kb["data_dir"])
        assert result.exit_code == 2 and result.stdout == "", result.output
        assert one_line(result.stderr) == f"error: --session {problem}"


def test_each_lookup_is_recorded_with_its_scores(cli_kb: dict[str, Any]) -> None:
    """A person's lookup is a turn of its own, recorded like the model's (``origin: user``)."""
    session = f"s-{uuid.uuid4().hex}"
    assert lookup(cli_kb["data_dir"], "支付失败排查", session).exit_code == 0
    assert lookup(cli_kb["data_dir"], "支付失败排查", session).exit_code == 0  # DEDUPED
    failed = lookup(cli_kb["data_dir"], "支付失败排查", session, "--domain", "billing")
    assert failed.exit_code == 2

    records = json.loads(
        invoke("trace", session, "--data-dir", cli_kb["data_dir"], "--json").stdout
    )
    assert [(r["turn"], r["origin"], r["executed"]) for r in records] == [
        (1, "user", True),
        (2, "user", True),
        (3, "user", False),
    ]
    first, second, unknown = records
    assert first["arguments"] == {"query": "支付失败排查"} and first["domain"] == "payment"
    assert first["relevance_level"] == "PRECISE"
    scores = first["retrieval_details"]
    assert scores["l0_titles"] == ["支付失败排查"] and scores["relevance_level"] == "PRECISE"
    assert 0 < scores["l1_top_similarity"] <= 1 and len(scores["l1_fused_scores"]) > 1
    assert second["relevance_level"] == "DEDUPED"
    assert unknown["verdict"] == "error" and "unknown domain 'billing'" in unknown["error"]


def test_unknown_domain_exits_2_without_traceback(cli_kb: dict[str, Any]) -> None:
    result = lookup(cli_kb["data_dir"], "支付失败排查", "s-unknown", "--domain", "billing")
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    assert "Traceback" not in result.output
    assert one_line(result.stderr) == (
        "error: unknown domain 'billing'; known domains: api, general, infrastructure, ops, payment"
    )


def test_errors_are_one_line(cli_kb: dict[str, Any]) -> None:
    result = lookup(cli_kb["data_dir"], "支付失败排查", "s-unknown", "--domain", "billing")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_lookup_without_ingest_reports_no_domains(tmp_path: Path) -> None:
    result = lookup(tmp_path / "empty", "x", "s", "--domain", "payment")
    assert result.exit_code == 2
    assert "none yet: ingest documents first" in one_line(result.stderr)


# -- eval retrieval ------------------------------------------------------------------------------


def test_eval_retrieval_json(tmp_path: Path, kb_writer: Callable[..., Path]) -> None:
    dataset = tmp_path / "dataset"
    kb_writer(dataset / "corpus")
    queries = [
        {"id": "q1", "query": "支付失败排查", "lang": "zh", "gold": [PAYMENT]},
        {
            "id": "q2",
            "query": "Redis 连接池耗尽",
            "lang": "zh",
            "gold": ["infrastructure/redis-pool.md"],
        },
        {
            "id": "q3",
            "query": "how to raise the per-tenant request limit",
            "lang": "en",
            "gold": ["api/rate-limit.md"],
        },
        {
            "id": "q4",
            "query": "repeating a request has the same effect",
            "lang": "en",
            "gold": ["glossary.md"],
        },
    ]
    (dataset / "queries.jsonl").write_text(
        "\n".join(json.dumps(q, ensure_ascii=False) for q in queries) + "\n", encoding="utf-8"
    )
    result = invoke("eval", "retrieval", dataset, "--data-dir", tmp_path / "data", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {"overall", "by_lang", "levels", "latency_ms"} <= set(report)
    assert (report["answers"], report["level_rule"]) == ("none", "cosine")  # what was measured
    assert set(report["overall"]) >= RANKING_KEYS
    assert set(report["by_lang"]) == {"en", "zh"}
    for row in [report["overall"], *report["by_lang"].values()]:
        assert set(row) >= RANKING_KEYS
        assert all(0.0 <= row[key] <= 1.0 for key in RANKING_KEYS)
        assert row["recall@1"] <= row["recall@5"] <= row["recall@10"]
    assert report["by_lang"]["zh"]["recall@1"] == 1.0  # exact titles
    assert report["overall"]["recall@5"] == 1.0
    assert sum(level["count"] for level in report["levels"].values()) == len(queries)
    for level in report["levels"].values():
        assert set(level) >= {"count", "precision"}
        assert level["precision"] is None or 0.0 <= level["precision"] <= 1.0
    assert report["levels"]["PRECISE"]["precision"] == 1.0
    latency = report["latency_ms"]
    assert {"p50", "p95"} <= set(latency) and 0 < latency["p50"] <= latency["p95"]
    # each query's own outcome, consistent with the summary
    rows = {row["id"]: row for row in report["per_query"]}
    assert list(rows) == ["q1", "q2", "q3", "q4"]
    assert rows["q1"]["gold_rank"] == 1 and rows["q1"]["level"] == "PRECISE"
    assert rows["q1"]["shown"][0] == PAYMENT and rows["q1"]["gold_shown"]
    ranks = [row["gold_rank"] for row in rows.values()]
    assert sum(rank == 1 for rank in ranks) / 4 == report["overall"]["recall@1"]
    assert sum(row["gold_shown"] for row in rows.values()) / 4 == report["gold_shown"]
    # a second run reuses the ingested corpus
    again = invoke("eval", "retrieval", dataset, "--data-dir", tmp_path / "data", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["overall"] == report["overall"]


def test_eval_retrieval_reads_several_datasets_side_by_side(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    """Each dataset ranks only its own corpus, though both share one --data-dir."""
    first, second = tmp_path / "first", tmp_path / "second-answer-only"
    kb_writer(first / "corpus")
    kb_writer(
        second / "corpus",
        {"ops/rollback.md": "---\ntitle: Rollback\n---\nRoll back with `deploy undo`.\n"},
    )
    (second / "README.md").write_text("# A set, variant answer-only\n", encoding="utf-8")
    for dataset, gold in ((first, PAYMENT), (second, "ops/rollback.md")):
        query = {"id": "q", "query": "支付失败排查 rollback", "lang": "zh", "gold": [gold]}
        (dataset / "queries.jsonl").write_text(json.dumps(query) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    result = invoke("eval", "retrieval", first, second, "--data-dir", data, "--json")
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)["datasets"]
    assert [Path(r["dataset"]).name for r in reports] == ["first", "second-answer-only"]
    assert [r["answer_only"] for r in reports] == [False, True]
    # the second corpus has one document: nothing of the first ranks there
    assert reports[1]["per_query"][0]["shown"] == ["ops/rollback.md"]
    assert reports[0]["per_query"][0]["gold_rank"] == 1
    text = invoke("eval", "retrieval", first, second, "--data-dir", data)
    assert text.exit_code == 0, text.output
    flat = one_line(text.stdout)
    assert "side by side" in flat and "second-answer-only *" in flat and "gold shown" in flat
    assert flat.count("retrieval on") == 2 and "answer-only: zh R@1 1.000" in flat


PARAPHRASES = {
    "渠道的通知一直没有到达，订单还是未付款": PAYMENT,
    "钱退不回去了怎么办": PAYMENT,
    "获取连接一直超时，应用卡住了": "infrastructure/redis-pool.md",
    "clients get errors when they call us too fast": "api/rate-limit.md",
    "the platform team must lift the per-tenant ceiling": "api/rate-limit.md",
    "what should happen before we ship a release": "ops/notes/deploy-checklist.md",
    "sending the same request twice should do no harm": "glossary.md",
}


def test_eval_levels_fits_settings_that_load_back(
    tmp_path: Path, kb_writer: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = tmp_path / "dataset"
    kb_writer(dataset / "corpus")
    lines = [
        json.dumps({"id": f"q{i}", "query": query, "lang": "en", "gold": [gold]})
        for i, (query, gold) in enumerate(PARAPHRASES.items())
    ]
    (dataset / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = tmp_path / "data"

    refused = invoke("eval", "levels", dataset, "--data-dir", data)
    assert refused.exit_code == 2 and "set retrieval.answers.model" in one_line(refused.stderr)

    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL", "e5")
    too_few = invoke("eval", "levels", dataset, "--data-dir", data)
    assert too_few.exit_code == 2 and "at least 40 are needed" in one_line(too_few.stderr)

    # a dataset this small only shows the command's round trip
    monkeypatch.setattr("superbiz.evaluation.levels.MIN_SAMPLES", 4)
    monkeypatch.setattr("superbiz.evaluation.levels.SUPPORT", 2)
    result = invoke("eval", "levels", dataset, "--data-dir", data, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert 4 <= report["lookups"] <= len(PARAPHRASES)
    assert set(report["highly_relevant"]) == {"cosine", "evidence"}
    printed = invoke("eval", "levels", dataset, "--data-dir", data).stdout
    config = tmp_path / "superbiz.yaml"
    config.write_text(printed[printed.index("advanced:") :], encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    settings = load_settings()
    assert settings.advanced.retrieval.levels == "evidence"
    assert settings.advanced.retrieval.evidence_levels is not None
    assert settings.advanced.retrieval.evidence_levels.model_dump() == report["model"]


def test_eval_retrieval_without_queries_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dataset" / "corpus").mkdir(parents=True)
    result = invoke("eval", "retrieval", tmp_path / "dataset", "--data-dir", tmp_path / "d")
    assert result.exit_code == 2
    assert "does not exist: a dataset needs corpus/ and queries.jsonl" in one_line(result.stderr)
    assert "Traceback" not in result.output


# -- calibrate -----------------------------------------------------------------------------------


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    return set()


def test_calibrate_json(cli_kb: dict[str, Any]) -> None:
    result = invoke("calibrate", "--data-dir", cli_kb["data_dir"], "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert isinstance(report, dict)
    assert {"highly-relevant-threshold", "reference-threshold"} <= _keys(report)


def test_calibrate_warns_that_a_small_kb_gives_noisy_thresholds(cli_kb: dict[str, Any]) -> None:
    result = invoke("calibrate", "--data-dir", cli_kb["data_dir"])
    assert result.exit_code == 0, result.output
    assert "too few for thresholds to trust" in one_line(result.stdout)


# -- the installed console script ------------------------------------------------------------------


def test_console_script_help() -> None:
    script = shutil.which("superbiz") or str(Path(sys.executable).with_name("superbiz"))
    assert Path(script).exists(), "the console script is not installed (pip install -e .)"
    done = subprocess.run(
        [script, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    for command in ("ingest", "lookup", "eval", "calibrate"):
        assert command in done.stdout


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command under ``group``, subcommands of its groups too."""
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def _rendered(text: str) -> str:
    """A help page's text without its boxes, each run of whitespace one space."""
    return one_line(text.replace("│", " "))


_CLI = typer.main.get_command(app)


@pytest.mark.parametrize("command", list(_commands(_CLI)), ids=" ".join)
def test_help_shows_every_option_text_written_in_brackets(command: tuple[str, ...]) -> None:
    """Rich reads ``[default: …]`` as markup and drops it unless it is escaped."""
    target: Any = _CLI
    for name in command:
        target = target.commands[name]
    bracketed = [
        inner
        for param in target.params
        for inner in re.findall(r"\\?\[([^\]]+)\]", getattr(param, "help", None) or "")
    ]
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    shown = _rendered(result.stdout)
    for inner in bracketed:
        assert f"[{one_line(inner)}]" in shown


def test_the_command_list_gives_each_command_its_summary_on_one_line() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if "│ lookup " in line)
    assert line.rstrip(" │").endswith("prints what the model would see.")


@pytest.mark.parametrize("command", [["ingest", "."], ["map"], ["calibrate"], ["lookup", "x"]])
def test_invalid_settings_are_one_line_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    config = tmp_path / "superbiz.yaml"
    config.write_text("advanced:\n  retrieval:\n    candidates: abc\n", encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    result = runner.invoke(app, [*command, "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2 and result.stdout == ""
    assert one_line(result.stderr).startswith("error: invalid settings: 1 validation error")
    assert "advanced.retrieval.candidates" in result.stderr and "Traceback" not in result.output


def test_a_list_in_the_environment_that_is_not_json_says_how_to_write_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERBIZ_INGEST__ENCODINGS", "utf-8,gb18030")
    result = runner.invoke(app, ["ingest", str(tmp_path), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert """SUPERBIZ_INGEST__ENCODINGS='["utf-8", "gb18030"]'""" in one_line(result.stderr)
    monkeypatch.setenv("SUPERBIZ_INGEST__ENCODINGS", '["utf-8", "gb18030"]')
    assert load_settings().ingest.encodings == ("utf-8", "gb18030")


def test_calibrate_proposes_the_same_thresholds_in_every_process(tmp_path: Path) -> None:
    """Headings are probed in a fixed order: a set's order changes with string hashing
    (on the example KB, reference 0.19 in one process and 0.21 in another)."""
    script = shutil.which("superbiz") or str(Path(sys.executable).with_name("superbiz"))
    data_dir = str(tmp_path / "data")  # its own: Milvus Lite serves one process per file

    def run(*args: str, seed: str = "0") -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [script, *args, "--data-dir", data_dir],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("ingest", str(Path(superbiz.__file__).parent / "examples" / "corpus"))
    first, second = (json.loads(run("calibrate", "--json", seed=s)) for s in ("1", "2"))
    assert first["proposed"] == second["proposed"]
    assert first["random_pairs"] == second["random_pairs"]


def test_trace_shows_stored_text_as_text_and_says_why_a_call_failed(
    cli_kb: dict[str, Any],
) -> None:
    session = f"s-esc-{uuid.uuid4().hex[:6]}"
    lookup(cli_kb["data_dir"], "refund\x1b[31m [bold]stuck[/bold]\x07", session)
    lookup(cli_kb["data_dir"], "支付失败排查", session, "--domain", "billing")

    result = invoke("trace", session, "--data-dir", cli_kb["data_dir"])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "refund\\x1b[31m [bold]stuck" in result.stdout  # as stored, markup not applied
    assert re.search(
        r"call \d+ \(turn 2, step 0\): unknown domain 'billing'", one_line(result.stdout)
    )


def test_lookup_with_a_query_that_is_not_utf8_is_one_red_line(cli_kb: dict[str, Any]) -> None:
    query = os.fsdecode("连接池耗尽".encode("gbk"))  # a terminal set to GBK, as argv gives it

    result = lookup(cli_kb["data_dir"], query, "s-gbk")

    assert result.exit_code == 2 and "Traceback" not in result.output
    assert one_line(result.stderr) == (
        "error: the query is not UTF-8 text (byte 0: 0xC1); it looks like GB18030/GBK "
        "Chinese: set the terminal to UTF-8, or convert the text with "
        "`iconv -f GB18030 -t UTF-8`"
    )


def test_a_lookup_query_is_bounded_as_a_question_is(cli_kb: dict[str, Any]) -> None:
    result = lookup(cli_kb["data_dir"], "连接池耗尽" * 840, "s-long")  # 4,200 characters

    assert result.exit_code == 2 and result.stdout == ""
    assert one_line(result.stderr) == (
        "error: 'query' is 4200 characters long; it takes at most 4000"
    )


def test_one_metadata_note_on_many_files_is_one_line(tmp_path: Path) -> None:
    """A site's own frontmatter key on every page is said once, with the count."""
    folder = tmp_path / "kb"
    for n in range(5):
        page = folder / f"page-{n}.md"
        page.parent.mkdir(exist_ok=True)
        page.write_text(f"---\ntitle: Page {n}\nsection: 1\n---\n# Page {n}\n\ntext\n")
    result = invoke("ingest", folder, "--data-dir", tmp_path / "data")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "metadata warning" in line]
    assert len(warnings) == 1, result.stderr
    text = one_line(result.stderr)
    assert "metadata warning 5 files (page-0.md, page-1.md, page-2.md, …):" in text
    assert "unknown frontmatter key 'section'" in text
