"""``superbiz eval fit-ranker``: the listwise fit on questions whose answer is known, and
the whole recipe on a real KB (USE + Milvus Lite + SQLite, the example corpus)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from superbiz.config import Settings
from superbiz.evaluation._lambdamart import TREE_SIZES, fit_trees, grouped_folds
from superbiz.evaluation.fit_ranker import (
    L2_CHOICES,
    Question,
    fit_listwise,
    fit_model,
    fit_rankers,
    reciprocal_rank,
)
from superbiz.evaluation.retrieval import evaluate_retrieval
from superbiz.exceptions import SuperbizError
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.ranker import FEATURES, LINEAR_FEATURES, TreeRanker, load_rankers

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "superbiz" / "examples"


def synthetic(count: int, seed: int = 1) -> list[Question]:
    """Questions of 6 candidates where the gold one has the highest ``bm25`` and a random
    ``hybrid``: a ranker that learns anything must learn to read ``bm25``."""
    rng = np.random.default_rng(seed)
    questions = []
    for _ in range(count):
        rows = rng.normal(size=(6, len(FEATURES)))
        gold = np.zeros(6, dtype=bool)
        gold[int(np.argmax(rows[:, FEATURES.index("bm25")]))] = True
        questions.append(Question("synthetic", rows, gold, f"question {seed}.{len(questions)}"))
    return questions


def test_the_listwise_fit_learns_the_feature_that_finds_the_gold() -> None:
    model, cross = fit_model(synthetic(120), FEATURES)
    weights = dict(zip(FEATURES, model.weights, strict=True))
    assert max(weights, key=lambda name: abs(weights[name])) == "bm25"
    assert weights["bm25"] > 0
    assert set(cross) == {str(l2) for l2 in L2_CHOICES}
    # held out, the learned order finds the gold first far more often than chance (1/6)
    held = synthetic(200, seed=2)
    assert np.mean([reciprocal_rank(model.scores(q.features), q.gold) for q in held]) > 0.9


def test_lambdamart_trees_learn_the_feature_and_run_without_lightgbm() -> None:
    """The trees fitted by LightGBM, written out and walked by numpy, score every row as
    LightGBM does, and rank held-out questions by the feature that finds the gold."""
    lightgbm = pytest.importorskip("lightgbm")
    questions = synthetic(150)
    trees, report = fit_trees(questions, FEATURES)
    assert isinstance(trees, TreeRanker)
    assert set(report["cross_mrr"]) == {f"{a}/{b}" for a, b in TREE_SIZES}
    chosen = report["chosen"]
    assert report["cross_mrr"][f"{chosen['leaves']}/{chosen['min_leaf']}"][0] == chosen["trees"]
    assert trees.feature.shape[0] == chosen["trees"]
    used = {trees.features[i] for i in trees.feature[trees.left != trees.right].tolist()}
    assert "bm25" in used
    held = synthetic(200, seed=2)
    assert np.mean([reciprocal_rank(trees.scores(q.features), q.gold) for q in held]) > 0.9

    # the same trees refitted by LightGBM itself predict what the numpy walk scores
    from superbiz.evaluation._lambdamart import _params

    data = lightgbm.Dataset(
        np.vstack([q.features for q in questions]),
        np.concatenate([q.gold for q in questions]).astype(int),
        group=[len(q.gold) for q in questions],
    )
    booster = lightgbm.train(
        _params(chosen["leaves"], chosen["min_leaf"]), data, num_boost_round=chosen["trees"]
    )
    rows = np.vstack([q.features for q in held])
    assert np.allclose(trees.scores(rows), booster.predict(rows), atol=1e-9)


def test_folds_keep_a_question_asked_twice_together() -> None:
    questions = synthetic(40)
    texts = [Question("a", q.features, q.gold, f"q{i % 15}") for i, q in enumerate(questions)]
    folds = grouped_folds(texts)
    assert sorted(i for fold in folds for i in fold) == list(range(40))
    for fold in folds:
        inside = {texts[i].text for i in fold}
        assert not inside & {texts[i].text for other in folds if other is not fold for i in other}


def test_a_question_without_gold_candidates_carries_no_signal() -> None:
    x = np.eye(3)
    with_gold = fit_listwise([(x, np.array([False, True, False]))] * 3, 0.1)
    assert with_gold[1] > with_gold[0]
    empty = [Question("s", np.ones((4, len(FEATURES))), np.zeros(4, dtype=bool))] * 80
    with pytest.raises(SuperbizError, match="0 questions have a gold document"):
        fit_model(empty, FEATURES)


def test_reciprocal_rank_keeps_the_earlier_row_first_among_equals() -> None:
    gold = np.array([False, True, False])
    assert reciprocal_rank(np.array([1.0, 1.0, 0.0]), gold) == 0.5
    assert reciprocal_rank(np.array([0.0, 1.0, 0.0]), gold) == 1.0
    assert reciprocal_rank(np.array([1.0, 0.0, 2.0]), gold, depth=2) == 0.0


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)
        yield


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """The example KB with its 16 labelled questions, as a dataset."""
    root = tmp_path / "examples"
    shutil.copytree(EXAMPLES / "corpus", root / "corpus")
    shutil.copy(EXAMPLES / "queries.jsonl", root / "queries.jsonl")
    return root


def test_the_recipe_fits_on_a_real_kb_and_a_lookup_runs_the_file(
    examples: Path, tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(SuperbizError, match="at least 50 are needed"):
        fit_rankers([(examples, settings)])
    models, report = fit_rankers([(examples, settings)], min_questions=10)
    assert models.answers is None  # the answer model is off: no model reads it
    assert models.plain is not None and models.plain.features == LINEAR_FEATURES
    fitted = report["models"]["plain"]
    assert fitted["questions"] == 16
    assert fitted["by_dataset"]["examples"]["questions"] == 16
    path = tmp_path / "ranker.json"
    path.write_text(models.to_json(), encoding="utf-8")
    assert json.loads(path.read_text())["fitted"]["datasets"] == ["examples"]
    assert load_rankers(path).plain is not None

    advanced = {"retrieval": {"ranker": "learned", "ranker_file": str(path)}}
    learned = evaluate_retrieval(examples, make_settings(tmp_path, advanced=advanced))
    # in-sample, the model ranks the KB's own questions at least as well as the fusion did
    fused = evaluate_retrieval(examples, settings)
    assert learned["overall"]["mrr@10"] >= fused["overall"]["mrr@10"]
    assert learned["overall"]["mrr@10"] == pytest.approx(
        fitted["by_dataset"]["examples"]["learned_mrr"], abs=0.07
    )
