"""Settings from ``superbiz.yaml`` and ``SUPERBIZ_*`` variables: spellings, precedence,
``null`` from the environment, and clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from superbiz.config import CONFIG_ENV, load_settings
from superbiz.exceptions import ConfigError
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_takes_hyphens_and_the_environment_wins_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path / "superbiz.yaml",
        "retrieval:\n  max-supplements: 3\n  answers:\n    model: e5\n"
        "advanced:\n  retrieval:\n    answers:\n      head-chars: 300\n",
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    settings = load_settings()
    assert settings.retrieval.max_supplements == 3
    assert settings.retrieval.answers.model == "e5"
    assert settings.advanced.retrieval.answers.head_chars == 300

    monkeypatch.setenv("SUPERBIZ_ADVANCED__RETRIEVAL__ANSWERS__HEAD_CHARS", "200")
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__MAX_SUPPLEMENTS", "1")
    settings = load_settings()
    assert settings.advanced.retrieval.answers.head_chars == 200
    assert settings.retrieval.max_supplements == 1
    # the search's view holds both sections' keys of the answer model
    assert settings.retrieval_config.answers.model == "e5"
    assert settings.retrieval_config.answers.head_chars == 200


def test_null_in_the_environment_unsets_a_number_as_in_yaml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().advanced.retrieval.reference_supplement_margin == 0.1
    monkeypatch.setenv("SUPERBIZ_ADVANCED__RETRIEVAL__REFERENCE_SUPPLEMENT_MARGIN", "null")
    monkeypatch.setenv("SUPERBIZ_EMBEDDING__MAX_TOKENS", "null")
    settings = load_settings()
    assert settings.advanced.retrieval.reference_supplement_margin is None
    assert settings.retrieval_config.reference_supplement_margin is None
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
    """The rule spans a user key and an advanced one."""
    monkeypatch.setenv("SUPERBIZ_ADVANCED__RETRIEVAL__LEVELS", "evidence")
    with pytest.raises(ConfigError, match="reads the answer model"):
        load_settings()
    monkeypatch.setenv("SUPERBIZ_RETRIEVAL__ANSWERS__MODEL", "e5")
    settings = load_settings()
    assert settings.advanced.retrieval.levels == settings.retrieval_config.levels == "evidence"


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


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("retrieval.rrf-k", "advanced.retrieval.rrf-k"),
        ("retrieval.answers.head-chars", "advanced.retrieval.answers.head-chars"),
        ("governance.cap-calls", "advanced.governance.cap-calls"),
        ("planner.map-token-budget", "advanced.planner.map-token-budget"),
        ("session.backend", "advanced.session.backend"),
        ("embedding.batch-size", "advanced.embedding.batch-size"),
        ("gaps.max-questions", "advanced.gaps.max-questions"),
    ],
)
def test_a_key_at_its_old_place_names_its_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    """In the file, in either spelling, and in the environment: an error naming where the
    key went, never ignored or taken."""
    *sections, key = old.split(".")
    nested = "".join(f"{'  ' * depth}{name}:\n" for depth, name in enumerate(sections))
    value = "memory" if key == "backend" else "250"
    config = tmp_path / "superbiz.yaml"
    monkeypatch.setenv(CONFIG_ENV, str(config))
    for spelled in (key, key.replace("-", "_")):
        write_config(config, f"{nested}{'  ' * len(sections)}{spelled}: {value}\n")
        with pytest.raises(ConfigError, match=rf"{re.escape(old)} is now {re.escape(new)}"):
            load_settings()
    config.unlink()
    monkeypatch.delenv(CONFIG_ENV)
    variable = "SUPERBIZ_" + old.replace("-", "_").replace(".", "__").upper()
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=rf"{re.escape(new)} \(environment: SUPERBIZ_ADVANCED__"):
        load_settings()
    monkeypatch.delenv(variable)
    monkeypatch.setenv(variable.replace("SUPERBIZ_", "SUPERBIZ_ADVANCED__"), value)
    advanced = load_settings().advanced
    for name in [*sections, key.replace("-", "_")]:
        advanced = getattr(advanced, name)
    assert str(advanced) == value


def test_the_distance_bound_is_no_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(
        tmp_path / "superbiz.yaml", "retrieval:\n  normalization:\n    max-l2-distance: 2.0\n"
    )
    monkeypatch.setenv(CONFIG_ENV, str(config))
    with pytest.raises(ConfigError, match=r"max-l2-distance: .* a constant"):
        load_settings()


def test_advanced_keys_from_the_environment_reach_the_components(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SUPERBIZ_ADVANCED__RETRIEVAL__RRF_K", "30")
    monkeypatch.setenv("SUPERBIZ_ADVANCED__GOVERNANCE__MODE", "cap")
    monkeypatch.setenv("SUPERBIZ_GOVERNANCE__MAX_STEPS", "4")
    monkeypatch.setenv("SUPERBIZ_ADVANCED__PLANNER__SCOPE", "never")
    monkeypatch.setenv("SUPERBIZ_ADVANCED__EMBEDDING__THREADS", "2")
    monkeypatch.setenv("SUPERBIZ_ADVANCED__GAPS__CLUSTER_SIMILARITY", "0.5")
    settings = load_settings()
    assert settings.retrieval_config.rrf_k == 30
    governance = settings.governance_config
    assert (governance.mode, governance.max_steps, governance.enabled) == ("cap", 4, True)
    assert settings.planner_config.scope == "never"
    assert settings.planner_config.max_domains == settings.planner.max_domains
    assert settings.embedding_config.threads == 2
    assert settings.embedding_config.model == settings.embedding.model
    assert settings.gap_config.cluster_similarity == 0.5


def test_a_user_section_holds_no_advanced_key() -> None:
    """The split itself: no key is in a user section and its advanced one."""
    settings = load_settings()
    for name, advanced in settings.advanced:
        user = getattr(settings, name, None)
        if user is not None:
            assert not set(type(user).model_fields) & (
                set(type(advanced).model_fields) - {"answers"}
            ), name
