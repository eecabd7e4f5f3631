"""The normaliser: exact cosine from backend scores, every cell of the level table, hints."""

from __future__ import annotations

import math

import numpy as np
import pytest

from superbiz.retrieval.relevance import (
    DEFAULT_THRESHOLDS,
    FALLBACK_THRESHOLDS,
    RelevanceLevel,
    Thresholds,
    completeness_hint,
    relevance_level,
    similarity_from_euclidean,
    similarity_from_score,
)

P = RelevanceLevel.PRECISE
HR = RelevanceLevel.HIGHLY_RELEVANT
REF = RelevanceLevel.REFERENCE
DD = RelevanceLevel.DEDUPED


def _unit_pairs(n: int, dim: int, seed: int = 7) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        u, v = rng.normal(size=(2, dim))
        pairs.append((u / np.linalg.norm(u), v / np.linalg.norm(v)))
    return pairs


# -- metric conversions --------------------------------------------------------------------


@pytest.mark.parametrize("dim", [3, 64, 512])
def test_squared_l2_gives_the_exact_cosine(dim: int) -> None:
    for u, v in _unit_pairs(50, dim):
        squared = float(np.sum((u - v) ** 2))  # what Milvus' L2 metric returns
        assert similarity_from_score(squared, "L2") == pytest.approx(float(u @ v), abs=1e-6)
        assert similarity_from_score(squared, "L2_SQUARED") == pytest.approx(float(u @ v), abs=1e-6)


def test_squared_l2_of_near_and_opposite_vectors() -> None:
    rng = np.random.default_rng(1)
    u = rng.normal(size=512)
    u /= np.linalg.norm(u)
    near = u + 0.05 * rng.normal(size=512)
    near /= np.linalg.norm(near)
    for v in (u, near, -u):
        squared = float(np.sum((u - v) ** 2))
        assert similarity_from_score(squared, "L2") == pytest.approx(float(u @ v), abs=1e-6)


def test_euclidean_distance_gives_the_exact_cosine() -> None:
    for u, v in _unit_pairs(50, 64, seed=3):
        distance = float(np.linalg.norm(u - v))
        assert similarity_from_euclidean(distance) == pytest.approx(float(u @ v), abs=1e-6)


def test_orthogonal_pair_is_zero_not_the_seeds_029() -> None:
    u, v = np.eye(8)[0], np.eye(8)[1]
    squared = float(np.sum((u - v) ** 2))
    assert squared == pytest.approx(2.0)
    assert similarity_from_score(squared, "L2") == pytest.approx(0.0, abs=1e-12)
    assert similarity_from_euclidean(math.sqrt(2)) == pytest.approx(0.0, abs=1e-12)
    seed_formula = 1 - min(math.sqrt(2), 2.0) / 2.0
    assert seed_formula == pytest.approx(0.29, abs=0.01)  # what the seed would have said


@pytest.mark.parametrize(
    ("squared", "cosine"),
    [(0.0, 1.0), (0.5, 0.75), (1.0, 0.5), (2.0, 0.0), (3.0, -0.5), (4.0, -1.0)],
)
def test_squared_l2_table(squared: float, cosine: float) -> None:
    assert similarity_from_score(squared, "L2") == pytest.approx(cosine)


@pytest.mark.parametrize("metric", ["IP", "COSINE"])
@pytest.mark.parametrize("value", [-1.0, -0.3, 0.0, 0.42, 0.999, 1.0])
def test_ip_and_cosine_pass_through(metric: str, value: float) -> None:
    assert similarity_from_score(value, metric) == value  # type: ignore[arg-type]


@pytest.mark.parametrize("metric", ["IP", "COSINE"])
def test_ip_and_cosine_are_clamped(metric: str) -> None:
    assert similarity_from_score(1.0000002, metric) == 1.0  # type: ignore[arg-type]
    assert similarity_from_score(-1.5, metric) == -1.0  # type: ignore[arg-type]


def test_squared_l2_is_clamped() -> None:
    assert similarity_from_score(-1e-7, "L2") == 1.0  # float noise below zero
    assert similarity_from_score(4.0000003, "L2") == -1.0
    assert similarity_from_score(100.0, "L2") == -1.0
    assert similarity_from_score(1.0, "L2") == pytest.approx(0.5)


def test_euclidean_is_clamped() -> None:
    assert similarity_from_euclidean(-0.1) == 1.0
    assert similarity_from_euclidean(2.0) == -1.0
    assert similarity_from_euclidean(3.0) == -1.0
    assert similarity_from_euclidean(1.0) == pytest.approx(0.5)


def test_similarity_is_monotone_in_distance() -> None:
    values = [similarity_from_score(s, "L2") for s in np.linspace(0, 4, 41)]
    assert values == sorted(values, reverse=True)


# -- the level table -----------------------------------------------------------------------

T = Thresholds(highly_relevant=0.75, reference=0.5)
SIMILARITIES = {
    "none": None,
    "nan": math.nan,
    "below_reference": 0.2,
    "negative": -0.4,
    "at_reference": 0.5,
    "between": 0.6,
    "just_below_high": math.nextafter(0.75, 0),
    "at_high": 0.75,
    "above_high": 0.93,
}
L1_ONLY = {
    "none": None,
    "nan": None,
    "below_reference": None,
    "negative": None,
    "at_reference": REF,
    "between": REF,
    "just_below_high": REF,
    "at_high": HR,
    "above_high": HR,
}


@pytest.mark.parametrize("case", list(SIMILARITIES))
@pytest.mark.parametrize("l0", [0, 1, 2, 5])
def test_every_cell_of_the_level_table(l0: int, case: str) -> None:
    expected = P if l0 == 1 else L1_ONLY[case]
    assert relevance_level(l0, SIMILARITIES[case], T) is expected


def test_level_uses_the_given_thresholds() -> None:
    use = Thresholds(highly_relevant=0.55, reference=0.3)
    assert relevance_level(0, 0.56, use) is HR
    assert relevance_level(0, 0.31, use) is REF
    assert relevance_level(0, 0.29, use) is None
    assert relevance_level(0, 0.56, T) is REF


def test_equal_thresholds_have_no_reference_band() -> None:
    same = Thresholds(highly_relevant=0.6, reference=0.6)
    assert relevance_level(0, 0.6, same) is HR
    assert relevance_level(0, 0.59, same) is None


def test_negative_l0_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        relevance_level(-1, 0.9, T)


def test_level_values_are_the_seed_strings() -> None:
    assert [level.value for level in RelevanceLevel] == [
        "PRECISE",
        "HIGHLY_RELEVANT",
        "REFERENCE",
        "DEDUPED",
    ]
    assert RelevanceLevel.PRECISE == "PRECISE"


# -- completeness hints --------------------------------------------------------------------

SEED_HINTS_ZH = {
    P: "知识库中不存在比上述结果更精准的文档",
    HR: "当前结果已高度相关，继续检索不太可能找到更精准的文档",
    REF: "当前结果为相关参考，如需更精准信息请明确缺少的具体维度",
}


@pytest.mark.parametrize("level", [P, HR, REF])
def test_chinese_hints_are_the_seeds(level: RelevanceLevel) -> None:
    assert completeness_hint(level, "zh") == SEED_HINTS_ZH[level]


@pytest.mark.parametrize("level", [P, HR, REF, DD, None])
def test_every_level_has_a_hint_in_both_languages(level: RelevanceLevel | None) -> None:
    zh, en = completeness_hint(level, "zh"), completeness_hint(level, "en")
    assert zh and en and zh != en
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    assert en.isascii()


def test_english_hints_say_the_same_as_the_seed() -> None:
    assert "precise" in completeness_hint(P, "en").lower()
    assert "highly relevant" in completeness_hint(HR, "en").lower()
    assert "missing dimension" in completeness_hint(REF, "en").lower()
    assert "already retrieved" in completeness_hint(DD, "en").lower()
    assert "no document" in completeness_hint(None, "en").lower()
    assert "已检索过" in completeness_hint(DD, "zh")
    assert "没有" in completeness_hint(None, "zh")


def test_all_hints_differ() -> None:
    levels: list[RelevanceLevel | None] = [P, HR, REF, DD, None]
    for language in ("zh", "en"):
        hints = [completeness_hint(level, language) for level in levels]  # type: ignore[arg-type]
        assert len(set(hints)) == len(hints)


# -- thresholds ----------------------------------------------------------------------------


def test_thresholds_reject_reference_above_high() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        Thresholds(highly_relevant=0.5, reference=0.6)


def test_thresholds_are_frozen() -> None:
    with pytest.raises(AttributeError):
        T.reference = 0.1  # type: ignore[misc]


def test_default_thresholds() -> None:
    assert Thresholds(0.75, 0.5) == FALLBACK_THRESHOLDS  # the seed's values
    assert DEFAULT_THRESHOLDS["bge-m3"] == Thresholds(0.75, 0.5)
    use = DEFAULT_THRESHOLDS["use-multilingual-v3"]
    # measured gold medians ~0.47 (en) / 0.70 (zh), non-gold ~0.10-0.17: USE needs lower values
    assert 0.17 < use.reference < use.highly_relevant < 0.75
