"""Small trees for the learned ranker: LambdaMART by LightGBM, written out as arrays.

LightGBM (MIT licence, the ``ranker`` extra) is needed to fit, never at lookup time: the
fitted trees become a ``TreeRanker``, which walks them with numpy. The sizes and the number
of trees are chosen by cross-validation over the training questions, the folds grouped by
question text (the English alert texts of a pair's two sets are the same questions: in two
folds, a fold would be judged on questions it was fitted on).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from superbiz.evaluation.metrics import scored_reciprocal_rank
from superbiz.exceptions import SuperbizError
from superbiz.retrieval.ranker import TreeRanker, feature_columns

if TYPE_CHECKING:
    import lightgbm

#: (leaves a tree, candidates a leaf at least): the sizes cross-validation chooses among
TREE_SIZES = ((4, 20), (4, 50), (8, 20), (8, 50))
MAX_TREES = 300
TREE_STEP = 10
LEARNING_RATE = 0.05
FOLDS = 5
SEED = 7


class Labelled(Protocol):
    """One question's candidates: every feature of each (rows) and which are gold."""

    @property
    def text(self) -> str: ...

    @property
    def features(self) -> np.ndarray: ...

    @property
    def gold(self) -> np.ndarray: ...


def _lightgbm() -> Any:
    try:
        import lightgbm
    except ImportError as exc:
        raise SuperbizError(
            "fitting trees needs LightGBM: pip install -e '.[ranker]' (a lookup does not)"
        ) from exc
    return lightgbm


def grouped_folds(questions: Sequence[Labelled], folds: int = FOLDS) -> list[list[int]]:
    """``folds`` lists of question indexes; questions with the same text share a fold.

    >>> class Q:
    ...     def __init__(self, text): self.text = text
    >>> grouped_folds([Q("a"), Q("b"), Q("a"), Q("c")], folds=2)
    [[1, 3], [0, 2]]
    """
    texts = sorted({q.text for q in questions})
    random.Random(SEED).shuffle(texts)
    fold = {text: i % folds for i, text in enumerate(texts)}
    return [[i for i, q in enumerate(questions) if fold[q.text] == f] for f in range(folds)]


def _params(leaves: int, min_leaf: int) -> dict[str, Any]:
    return {
        "objective": "lambdarank",
        "learning_rate": LEARNING_RATE,
        "num_leaves": leaves,
        "min_data_in_leaf": min_leaf,
        "lambdarank_truncation_level": 10,
        "feature_fraction": 1.0,
        "bagging_fraction": 1.0,
        "deterministic": True,
        "force_col_wise": True,
        # one thread: on a shared machine OpenMP's waiting threads cost 20 times the fit
        "num_threads": 1,
        "seed": SEED,
        "verbose": -1,
    }


def _train(
    questions: Sequence[Labelled], columns: np.ndarray, leaves: int, min_leaf: int, trees: int
) -> lightgbm.Booster:
    lgb = _lightgbm()
    data = lgb.Dataset(
        np.vstack([q.features[:, columns] for q in questions]),
        np.concatenate([q.gold for q in questions]).astype(int),
        group=[len(q.gold) for q in questions],
    )
    booster: lightgbm.Booster = lgb.train(_params(leaves, min_leaf), data, num_boost_round=trees)
    return booster


def _mrr(scores: np.ndarray, questions: Sequence[Labelled]) -> float:
    """Σ MRR@10 of ``questions`` whose rows, stacked, scored ``scores``."""
    total, start = 0.0, 0
    for q in questions:
        end = start + len(q.gold)
        total += scored_reciprocal_rank(scores[start:end], q.gold)
        start = end
    return total


def cross_validate(
    questions: Sequence[Labelled], features: tuple[str, ...]
) -> dict[str, tuple[int, float]]:
    """For each size, the number of trees with the best cross-validated MRR@10 and that
    MRR (``"leaves/min_leaf"`` keys)."""
    columns = feature_columns(features)
    # fewer distinct questions than folds leave a fold empty: nothing to judge there
    folds = [fold for fold in grouped_folds(questions) if fold]
    result: dict[str, tuple[int, float]] = {}
    for leaves, min_leaf in TREE_SIZES:
        curve = np.zeros(MAX_TREES // TREE_STEP)
        for held in folds:
            kept = set(held)
            train = [q for i, q in enumerate(questions) if i not in kept]
            booster = _train(train, columns, leaves, min_leaf, MAX_TREES)
            tested = [questions[i] for i in held]
            rows = np.vstack([q.features[:, columns] for q in tested])
            for step in range(len(curve)):
                scores = np.asarray(booster.predict(rows, num_iteration=(step + 1) * TREE_STEP))
                curve[step] += _mrr(scores, tested)
        best = int(np.argmax(curve))
        result[f"{leaves}/{min_leaf}"] = (
            (best + 1) * TREE_STEP,
            round(curve[best] / len(questions), 4),
        )
    return result


def fit_trees(
    questions: Sequence[Labelled], features: tuple[str, ...]
) -> tuple[TreeRanker, dict[str, Any]]:
    """The trees fitted on every question at the size and count cross-validation prefers
    (the smaller of equals), and what it measured."""
    cross = cross_validate(questions, features)
    size = max(cross, key=lambda key: (cross[key][1], -cross[key][0]))
    leaves, min_leaf = (int(v) for v in size.split("/"))
    trees = cross[size][0]
    booster = _train(questions, feature_columns(features), leaves, min_leaf, trees)
    chosen = {"leaves": leaves, "min_leaf": min_leaf, "trees": trees}
    return export_trees(booster, features), {"chosen": chosen, "cross_mrr": cross}


def export_trees(booster: lightgbm.Booster, features: tuple[str, ...]) -> TreeRanker:
    """A LightGBM booster's trees as a ``TreeRanker`` (each node before its children)."""
    keys = ("feature", "threshold", "left", "right", "value")
    trees = []
    for info in booster.dump_model()["tree_info"]:
        nodes: list[tuple[int, float, int, int, float]] = []
        _walk(info["tree_structure"], nodes)
        trees.append({key: [node[i] for node in nodes] for i, key in enumerate(keys)})
    return TreeRanker.from_dict({"features": list(features), "trees": trees})


def _walk(node: dict[str, Any], nodes: list[tuple[int, float, int, int, float]]) -> int:
    """Append ``node`` and its subtree to ``nodes`` (itself first); its index."""
    index = len(nodes)
    nodes.append((0, 0.0, index, index, 0.0))
    if "split_feature" not in node:
        nodes[index] = (0, 0.0, index, index, float(node["leaf_value"]))
        return index
    if node["decision_type"] != "<=":
        raise SuperbizError(f"a split {node['decision_type']} cannot be written out")
    left = _walk(node["left_child"], nodes)
    right = _walk(node["right_child"], nodes)
    nodes[index] = (int(node["split_feature"]), float(node["threshold"]), left, right, 0.0)
    return index
