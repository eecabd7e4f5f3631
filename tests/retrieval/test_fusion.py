"""Fusion of ranked lists: min-max score fusion and reciprocal-rank fusion."""

from __future__ import annotations

import random

import pytest

from superbiz.retrieval.fusion import (
    lexical_reach,
    minmax_fusion,
    minmax_normalize,
    rrf_fusion,
)


def _random_scores(rng: random.Random, n: int, prefix: str = "c") -> dict[str, float]:
    return {f"{prefix}{i}": rng.uniform(-50, 50) for i in range(n)}


def test_minmax_normalize_range_and_ends() -> None:
    rng = random.Random(5)
    for _ in range(50):
        scores = _random_scores(rng, rng.randint(2, 30))
        norm = minmax_normalize(scores)
        assert norm.keys() == scores.keys()
        assert all(0.0 <= v <= 1.0 for v in norm.values())
        assert norm[max(scores, key=scores.__getitem__)] == 1.0
        assert norm[min(scores, key=scores.__getitem__)] == 0.0


def test_minmax_normalize_keeps_the_order() -> None:
    rng = random.Random(6)
    scores = _random_scores(rng, 40)
    norm = minmax_normalize(scores)
    assert sorted(scores, key=scores.__getitem__) == sorted(norm, key=norm.__getitem__)


def test_minmax_normalize_is_invariant_to_positive_affine_maps() -> None:
    rng = random.Random(7)
    scores = _random_scores(rng, 20)
    shifted = {k: 3.5 * v - 12.0 for k, v in scores.items()}
    a, b = minmax_normalize(scores), minmax_normalize(shifted)
    assert all(a[k] == pytest.approx(b[k]) for k in a)


def test_minmax_normalize_degenerate_inputs() -> None:
    assert minmax_normalize({}) == {}
    assert minmax_normalize({"only": -3.0}) == {"only": 1.0}
    assert minmax_normalize({"a": 0.4, "b": 0.4}) == {"a": 1.0, "b": 1.0}


def test_minmax_fusion_weights() -> None:
    dense = {"a": 0.9, "b": 0.5, "c": 0.1}
    sparse = {"c": 12.0, "b": 6.0, "d": 1.0}
    only_dense = minmax_fusion(dense, sparse, dense_weight=1.0)
    only_sparse = minmax_fusion(dense, sparse, dense_weight=0.0)
    assert only_dense == {**minmax_normalize(dense), "d": 0.0}
    assert only_sparse == {**minmax_normalize(sparse), "a": 0.0}
    half = minmax_fusion(dense, sparse)
    for key in half:
        assert half[key] == pytest.approx(0.5 * only_dense[key] + 0.5 * only_sparse[key])


def test_minmax_fusion_properties() -> None:
    rng = random.Random(8)
    for _ in range(30):
        dense = _random_scores(rng, rng.randint(1, 20), "d")
        sparse = _random_scores(rng, rng.randint(1, 20), "d")  # overlapping ids
        weight = rng.random()
        fused = minmax_fusion(dense, sparse, weight)
        assert fused.keys() == dense.keys() | sparse.keys()
        assert all(-1e-12 <= v <= 1.0 + 1e-12 for v in fused.values())
        # an id at the top of both lists has the maximum possible score
        top = "top"
        fused = minmax_fusion({**dense, top: 1e9}, {**sparse, top: 1e9}, weight)
        assert fused[top] == pytest.approx(1.0)
        assert max(fused.values()) == fused[top]


def test_minmax_fusion_missing_id_scores_zero_there() -> None:
    fused = minmax_fusion({"a": 1.0, "b": 0.0}, {"c": 5.0, "d": 1.0}, dense_weight=0.3)
    assert fused == pytest.approx({"a": 0.3, "b": 0.0, "c": 0.7, "d": 0.0})


def test_minmax_fusion_empty_lists() -> None:
    assert minmax_fusion({}, {}) == {}
    assert minmax_fusion({"a": 0.2}, {}) == {"a": 0.5}
    assert minmax_fusion({}, {"b": 7.0}, dense_weight=0.25) == {"b": 0.75}


def test_minmax_fusion_scales_the_sparse_side_by_the_reach() -> None:
    dense, sparse = {"a": 0.9, "b": 0.5}, {"b": 12.0, "c": 6.0, "d": 1.0}
    full = minmax_fusion(dense, sparse, dense_weight=0.4)
    quarter = minmax_fusion(dense, sparse, dense_weight=0.4, reach=0.25)
    assert quarter == pytest.approx({"a": 0.4, "b": 0.15, "c": 0.15 * 5 / 11, "d": 0.0})
    assert max(full, key=full.__getitem__) == "b"
    assert max(quarter, key=quarter.__getitem__) == "a"  # the dense side decides
    assert minmax_fusion(dense, sparse, 0.4, reach=0.0) == {"a": 0.4, "b": 0.0, "c": 0.0, "d": 0.0}


def test_lexical_reach_counts_the_terms_in_a_script_the_hits_use() -> None:
    english = ["pip install --cert", "Clearing the cache"]
    assert lexical_reach("pip 安装时证书校验失败怎么办？", english) == 0.2  # 1 of 5
    assert lexical_reach("证书校验失败", english) == 0.0
    # however few of its words the hits contain, a question in their script is visible
    assert lexical_reach("redis pool exhausted", ["nothing alike"]) == 1.0
    assert lexical_reach("连接池耗尽", ["Redis 超时"]) == 1.0
    # Latin words over Chinese hits without a Latin letter
    assert lexical_reach("refund 退款", ["退款处理指南"]) == 0.5
    assert lexical_reach("pip", []) == 0.0
    # no key term (stop words, one-letter words): nothing to scale
    assert lexical_reach("的 a", english) == 1.0
    # an identifier the hits contain names its document in any language
    alert = ["Alert Name: CICDTooManyPendingJobsPerNamespace", "Pending jobs"]
    assert lexical_reach("CICDTooManyPendingJobsPerNamespace 告警了，要怎么排查？", alert) == 1.0
    assert lexical_reach("max_connections 该设多大？", ["Raise max_connections"]) == 1.0
    # one the hits do not contain, or a plain word, is one term as before
    assert lexical_reach("KubePodCrashLooping 告警了，要怎么排查？", alert) == 1 / 3
    assert lexical_reach("Pending 告警了，要怎么排查？", alert) == 1 / 3
    # an abbreviation or a version number is no identifier
    assert lexical_reach("升级到 v1.2 后报错 e.g. 日志", ["v1.2 e.g. release notes"]) < 1.0


def test_rrf_formula() -> None:
    fused = rrf_fusion(["a", "b", "c"], ["c", "a"], k=60)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_properties() -> None:
    rng = random.Random(9)
    ids = [f"x{i}" for i in range(30)]
    for _ in range(30):
        first = rng.sample(ids, rng.randint(1, 30))
        second = rng.sample(ids, rng.randint(1, 30))
        fused = rrf_fusion(first, second, k=60)
        assert fused.keys() == set(first) | set(second)
        assert fused == pytest.approx(rrf_fusion(second, first, k=60))  # order of lists
        assert all(0 < v <= 2 / 61 for v in fused.values())
        # within one list, a better rank never scores less
        single = rrf_fusion(first, k=60)
        assert [single[i] for i in first] == sorted(single.values(), reverse=True)


def test_rrf_first_in_both_wins() -> None:
    fused = rrf_fusion(["a", "b", "c"], ["a", "c", "b"])
    assert max(fused, key=fused.__getitem__) == "a"


def test_rrf_k_flattens_the_curve() -> None:
    sharp = rrf_fusion(["a", "b"], k=1)
    flat = rrf_fusion(["a", "b"], k=1000)
    assert sharp["a"] / sharp["b"] > flat["a"] / flat["b"] > 1.0


def test_rrf_of_nothing() -> None:
    assert rrf_fusion() == {}
    assert rrf_fusion([], []) == {}
