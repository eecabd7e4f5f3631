"""Bilingual texts and prompts as data: both languages carry the same keys with the same
``{placeholders}``, checked when the loading module is first imported; every key the code
asks for exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from superbiz._messages import LANGUAGES, load_messages, localized
from superbiz.agents.prompts import load_prompt, load_prompts
from superbiz.exceptions import ConfigError
from superbiz.governance.verdicts import Situation
from superbiz.retrieval.relevance import RelevanceLevel

SRC = Path(__file__).resolve().parents[1] / "src" / "superbiz"
PACKAGED = SRC / "messages"


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def test_every_literal_key_in_the_code_exists_in_both_languages() -> None:
    used = {
        key
        for path in SRC.rglob("*.py")
        for key in re.findall(r'localized\(\s*"([^"{}]+)"', path.read_text(encoding="utf-8"))
    }
    assert len(used) >= 15
    for language in LANGUAGES:
        for key in used:
            assert localized(key, language)


def test_every_situation_and_level_has_its_text() -> None:
    for language in LANGUAGES:
        for situation in Situation:
            assert localized(f"decision.breaker.{situation}", language)
        for level in RelevanceLevel:
            assert localized(f"relevance.hint.{level.lower()}", language)


def test_an_unknown_key_names_the_file() -> None:
    with pytest.raises(KeyError, match=r"no message 'lookup\.nope' in en\.yaml"):
        localized("lookup.nope", "en")


def test_the_packaged_tables_load() -> None:
    tables = load_messages(PACKAGED)

    assert set(tables["zh"]) == set(tables["en"])
    assert tables["en"]["lookup.found"] == "Found {n} document(s): {titles}"


@pytest.mark.parametrize(
    ("zh", "en", "problem"),
    [
        (
            "a:\n  b: 一\n  c: 二\n",
            "a:\n  b: one\n",
            "messages do not match across languages: en lacks 'a.c'",
        ),
        (
            "a: 找到 {n} 篇\n",
            "a: Found {count}\n",
            "'a' has placeholders {n} in zh but {count} in en",
        ),
        ("a: [1, 2]\n", "a: x\n", "zh.yaml: 'a' must be a text, not list"),
        ("- a\n", "a: x\n", "zh.yaml: the file must be a mapping of texts"),
        ("a: '\n", "a: x\n", "zh.yaml is not valid YAML"),
    ],
)
def test_mismatched_tables_fail_clearly(tmp_path: Path, zh: str, en: str, problem: str) -> None:
    directory = write(tmp_path, {"zh.yaml": zh, "en.yaml": en})

    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_messages(directory)


def test_a_missing_language_file_fails(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"message file en\.yaml is missing"):
        load_messages(write(tmp_path, {"zh.yaml": "a: 一\n"}))


def test_a_broken_table_stops_the_first_import(tmp_path: Path) -> None:
    write(tmp_path / "messages", {"zh.yaml": "a: 一\nb: 二\n", "en.yaml": "a: one\n"})
    code = (
        "import pathlib, importlib.resources as r\n"
        "files = r.files\n"
        f"r.files = lambda p: pathlib.Path({str(tmp_path)!r}) if p == 'superbiz' else files(p)\n"
        "import superbiz._messages\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}

    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )

    assert run.returncode == 1
    assert "ConfigError: messages do not match across languages: en lacks 'b'" in run.stderr


# -- prompts ---------------------------------------------------------------------------------


def test_every_packaged_prompt_exists_in_both_languages() -> None:
    prompts = load_prompts(SRC / "agents" / "prompts")

    assert (
        set(prompts["zh"])
        == set(prompts["en"])
        == {
            "chat-executor-prompt",
            "chat-planner-prompt",
        }
    )
    assert load_prompt("chat-planner-prompt", "en") == prompts["en"]["chat-planner-prompt"]


def test_an_unknown_prompt_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no prompt 'nope'; known: chat-executor-prompt"):
        load_prompt("nope", "zh")


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        (
            {"p.zh.md": "中文", "q.en.md": "x"},
            "prompts do not match across languages: zh lacks 'q'; en lacks 'p'",
        ),
        ({"p.zh.md": "{map}", "p.en.md": "{kmap}"}, "'p' has placeholders {map} in zh but {kmap}"),
        ({"p.zh.md": "x", "p.en.md": "x", "p.fr.md": "x"}, "prompt p.fr.md names no known"),
    ],
)
def test_mismatched_prompts_fail_clearly(
    tmp_path: Path, files: dict[str, str], problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_prompts(write(tmp_path, files))


def test_escaped_braces_in_a_prompt_are_not_placeholders(tmp_path: Path) -> None:
    files = {"p.zh.md": '{{"a": 1}} {n}', "p.en.md": "{n} {{}}"}

    assert load_prompts(write(tmp_path, files))["en"]["p"] == "{n} {{}}"
