"""Settings from ``superbiz.yaml`` and ``SUPERBIZ_*`` variables: spellings, precedence,
``null`` from the environment, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from superbiz.config import CONFIG_ENV, load_settings
from superbiz.exceptions import ConfigError
from superbiz.knowledge.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_takes_hyphens_and_the_environment_wins_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path / "superbiz.yaml",
        "retrieval:\n  reference-supplement-margin: 0.05\n  answers:\n    model: e5\n"
        "    head-chars: 300\n",
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    settings = load_settings()
    assert settings.retrieval.reference_supplement_margin == 0.05
    assert settings.retrieval.answers.model == "e5" and settings.retrieval.answers.head_chars == 300

    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__HEAD_CHARS", "200")
    assert load_settings().retrieval.answers.head_chars == 200


def test_null_in_the_environment_unsets_a_number_as_in_yaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().retrieval.reference_supplement_margin == 0.1
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__REFERENCE_SUPPLEMENT_MARGIN", "null")
    monkeypatch.setenv("SUPERBIZ_EMBEDDING__MAX_TOKENS", "null")
    settings = load_settings()
    assert settings.retrieval.reference_supplement_margin is None
    assert settings.embedding.max_tokens is None
    # the answer model's "none" is a value of its own, not an unset
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL", "none")
    assert load_settings().retrieval.answers.model == "none"


def test_a_bad_value_or_an_unknown_key_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL", "bge")
    with pytest.raises(ConfigError, match=r"answers\.model"):
        load_settings()
    monkeypatch.delenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL")
    config = write_config(tmp_path / "superbiz.yaml", "retrieval:\n  answer:\n    model: e5\n")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    with pytest.raises(ConfigError, match="answer"):
        load_settings()


def test_each_setting_lives_in_one_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service setting written under another section is refused, not silently ignored."""
    config = tmp_path / "superbiz.yaml"
    monkeypatch.setenv(CONFIG_ENV, str(config))
    for section in ("embedding", "llm"):
        write_config(config, f"{section}:\n  max-concurrent-turns: 8\n")
        with pytest.raises(ConfigError, match=rf"{section}\.max_concurrent_turns"):
            load_settings()
    write_config(config, "service:\n  max-concurrent-turns: 8\n")
    assert load_settings().service.max_concurrent_turns == 8


def test_evidence_levels_without_the_answer_model_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__LEVELS", "evidence")
    with pytest.raises(ConfigError, match="reads the answer model"):
        load_settings()
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL", "e5")
    assert load_settings().retrieval.levels == "evidence"


def test_thresholds_in_the_wrong_order_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_embedder: Embedder
) -> None:
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__NORMALIZATION__HIGHLY_RELEVANT_THRESHOLD", "0.2")
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__NORMALIZATION__REFERENCE_THRESHOLD", "0.4")
    with pytest.raises(ConfigError, match=r"reference-threshold 0\.4 exceeds"):
        load_settings()
    # one set against the embedder's default for the other: found when the KB opens
    monkeypatch.delenv("SUPERBIZ_RETRIEVAL__NORMALIZATION__REFERENCE_THRESHOLD")
    kb = KnowledgeBase(load_settings(data_dir=tmp_path / "data"), embedder=use_embedder)
    try:
        with pytest.raises(ConfigError, match=r"the defaults for use-multilingual-v3 are 0\.6"):
            _ = kb.thresholds
    finally:
        kb.close()


def test_one_setting_written_both_ways_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path / "superbiz.yaml", "retrieval:\n  bm25-candidates: 10\n  bm25_candidates: 20\n"
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    with pytest.raises(ConfigError, match="'bm25-candidates' and 'bm25_candidates' set the same"):
        load_settings()
