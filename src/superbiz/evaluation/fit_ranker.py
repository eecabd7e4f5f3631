"""``superbiz eval fit-ranker``: fit the learned ranker on labelled datasets.

The dataset recipe: each set's corpus is ingested (``prepare_dataset``), each question of
its ``queries.jsonl`` gathers its candidates as a lookup does (``Retriever.candidates``),
and every candidate becomes one row of ``candidate_features`` labelled gold or not. With
the answer model on, each question gives two lists, without it (the ``plain`` model) and
with it (the ``answers`` model), each fitted on its own.

The linear model (``model="linear"``, the first round's 18 features) is listwise: a
softmax over each question's candidates, the loss the negative log of the probability its
gold documents get, L2-regularised on standardised features and minimised by Newton steps
on a bound of the Hessian (the softmax covariance), which decrease the loss at every step.
The L2 strength is chosen by 5-fold cross-validation over the training questions
(MRR@10), never on the sets held out. The trees (``model="trees"``, every feature) are
LambdaMART's, fitted by LightGBM and chosen the same way (``_lambdamart``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rich.console import Console
from rich.table import Table

from superbiz.config import Settings
from superbiz.evaluation._lambdamart import fit_trees
from superbiz.evaluation.metrics import scored_reciprocal_rank as reciprocal_rank
from superbiz.evaluation.retrieval import load_queries, prepare_dataset
from superbiz.exceptions import SuperbizError
from superbiz.retrieval.ranker import (
    ANSWER_FEATURES,
    FEATURES,
    LINEAR_FEATURES,
    LinearRanker,
    Ranker,
    RankerModels,
    candidate_features,
    feature_columns,
)

L2_CHOICES = (0.01, 0.1, 1.0, 10.0)
FOLDS = 5
SEED = 7
#: fewer questions with a gold candidate than this cannot be fitted
MIN_QUESTIONS = 50


@dataclass(frozen=True, slots=True)
class Question:
    """One question's candidates: their features (rows, fused order: every feature of
    ``candidate_features``) and which are gold."""

    dataset: str
    features: np.ndarray
    gold: np.ndarray  # bool, one per row
    text: str = ""

    @property
    def usable(self) -> bool:
        return bool(self.gold.any()) and len(self.gold) > 1


def collect_questions(
    dataset_dir: Path, settings: Settings
) -> tuple[list[Question], list[Question]]:
    """Each question of ``dataset_dir`` without the answer model, and with it when
    ``retrieval.answers.model`` is on (else an empty list)."""
    kb = prepare_dataset(dataset_dir, settings)
    name = dataset_dir.name
    plain: list[Question] = []
    answered: list[Question] = []
    try:
        retriever = kb.retriever
        searcher = kb.searcher
        for query in load_queries(dataset_dir):
            matches, _, ranked = retriever.candidates(query.query)
            gold = set(query.gold)
            if any(doc.answer is not None for doc in ranked):
                answered.append(_question(name, query.query, ranked, matches, gold, answers=True))
                _, ranked = searcher.search(query.query, answers=False)
            plain.append(_question(name, query.query, ranked, matches, gold, answers=False))
    finally:
        kb.close()
    return plain, answered


def _question(
    dataset: str,
    query: str,
    ranked: Sequence[Any],
    matches: Sequence[Any],
    gold: set[str],
    *,
    answers: bool,
) -> Question:
    return Question(
        dataset,
        candidate_features(query, ranked, matches, answers=answers),
        np.array([doc.doc_path in gold for doc in ranked], dtype=bool),
        query,
    )


def fit_listwise(
    groups: Sequence[tuple[np.ndarray, np.ndarray]], l2: float, steps: int = 100
) -> np.ndarray:
    """Weights minimising ``Σ −log Σ_gold softmax(x·w) + l2/2 |w|²`` over the groups
    (standardised rows, gold mask): Newton steps on the softmax covariance, halved until
    the loss falls (correlated features make a full step overshoot).

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> w = fit_listwise([(x, np.array([True, False, False]))] * 5, 0.1)
    >>> bool(w[0] > w[1])
    True
    """
    width = groups[0][0].shape[1]
    weights = np.zeros(width)
    loss = _loss(groups, weights, l2)
    for _ in range(steps):
        gradient = l2 * weights
        hessian = l2 * np.eye(width)
        for x, gold in groups:
            z = x @ weights
            p = _softmax(z)
            # the gold documents' share of p, computed on its own (p may underflow there)
            q = np.zeros_like(p)
            q[gold] = _softmax(z[gold])
            gradient += x.T @ (p - q)
            centred = x - p @ x
            hessian += (centred.T * p) @ centred
        step = np.linalg.solve(hessian, gradient)
        for _ in range(30):
            trial = _loss(groups, weights - step, l2)
            if trial <= loss:
                break
            step /= 2
        else:
            break
        weights = weights - step
        if loss - trial < 1e-9 * max(1.0, loss):
            break
        loss = trial
    return weights


def _loss(groups: Sequence[tuple[np.ndarray, np.ndarray]], weights: np.ndarray, l2: float) -> float:
    total = 0.5 * l2 * float(weights @ weights)
    for x, gold in groups:
        z = x @ weights
        total += _logsumexp(z) - _logsumexp(z[gold])
    return total


def _logsumexp(z: np.ndarray) -> float:
    top = float(z.max())
    return top + float(np.log(np.exp(z - top).sum()))


def standardise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each feature's mean and scale (its standard deviation; 1 for a constant one)."""
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    return mean, np.where(scale > 1e-9, scale, 1.0)


def fit_model(
    questions: Sequence[Question],
    features: tuple[str, ...],
    *,
    min_questions: int = MIN_QUESTIONS,
) -> tuple[LinearRanker, dict[str, float]]:
    """The model fitted on every usable question at the L2 strength cross-validation
    prefers, and each strength's cross-validated MRR@10."""
    usable = _usable(questions, min_questions)
    order = list(range(len(usable)))
    random.Random(SEED).shuffle(order)
    folds = [order[i::FOLDS] for i in range(FOLDS)]
    cross: dict[str, float] = {}
    for l2 in L2_CHOICES:
        total = 0.0
        for held in folds:
            held_set = set(held)
            train = [usable[i] for i in order if i not in held_set]
            model = _fit(train, features, l2)
            total += sum(
                reciprocal_rank(model.scores(usable[i].features), usable[i].gold) for i in held
            )
        cross[str(l2)] = round(total / len(usable), 4)
    best = max(L2_CHOICES, key=lambda l2: (cross[str(l2)], -l2))
    return _fit(usable, features, best), cross


def _usable(questions: Sequence[Question], min_questions: int) -> list[Question]:
    """The questions with a gold candidate among several; too few is a clear error."""
    usable = [q for q in questions if q.usable]
    if len(usable) < min_questions:
        raise SuperbizError(
            f"{len(usable)} questions have a gold document among their candidates: at least "
            f"{min_questions} are needed to fit the ranker"
        )
    return usable


def _fit(questions: Sequence[Question], features: tuple[str, ...], l2: float) -> LinearRanker:
    columns = feature_columns(features)
    mean, scale = standardise(np.vstack([q.features[:, columns] for q in questions]))
    groups = [((q.features[:, columns] - mean) / scale, q.gold) for q in questions]
    return LinearRanker(features, mean, scale, fit_listwise(groups, l2))


def fit_rankers(
    datasets: Sequence[tuple[Path, Settings]],
    *,
    model: Literal["linear", "trees"] = "linear",
    min_questions: int = MIN_QUESTIONS,
) -> tuple[RankerModels, dict[str, Any]]:
    """The models fitted on ``datasets`` (each with the settings of its own KB) and a
    report: per set, MRR@10 and R@1 of the fused order and of the fitted model over the
    candidates (in-sample), and the cross-validation. ``model``: the first round's linear
    model over its 18 features, or LambdaMART's trees over all of them."""
    plain: list[Question] = []
    answered: list[Question] = []
    for dataset_dir, settings in datasets:
        without, with_answers = collect_questions(dataset_dir, settings)
        plain += without
        answered += with_answers
    fitted: dict[str, Any] = {"datasets": [path.name for path, _ in datasets]}
    report: dict[str, Any] = {"datasets": fitted["datasets"], "models": {}}
    models: dict[str, Ranker | None] = {"plain": None, "answers": None}
    base = FEATURES if model == "trees" else LINEAR_FEATURES
    for name, questions, features in (
        ("plain", plain, base),
        ("answers", answered, base + ANSWER_FEATURES),
    ):
        if not questions:
            continue
        ranker: Ranker
        if model == "trees":
            ranker, chosen = fit_trees(_usable(questions, min_questions), features)
            fitted[name] = {"questions": len(questions), "model": "trees", **chosen}
            described = {"trees": chosen["chosen"]}
        else:
            ranker, cross = fit_model(questions, features, min_questions=min_questions)
            best_l2 = max(cross, key=lambda key: (cross[key], -float(key)))
            fitted[name] = {"questions": len(questions), "l2": float(best_l2), "cross_mrr": cross}
            weights = np.round(ranker.weights, 4).tolist()
            described = {"weights": dict(zip(features, weights, strict=True))}
        models[name] = ranker
        report["models"][name] = {
            **fitted[name],
            **described,
            "by_dataset": _in_sample(questions, ranker),
        }
    return RankerModels(models["plain"], models["answers"], fitted), report


def _in_sample(questions: Sequence[Question], model: Ranker) -> dict[str, dict[str, float]]:
    by_set: dict[str, dict[str, list[float]]] = {}
    for q in questions:
        fused = reciprocal_rank(np.arange(len(q.gold), 0, -1, dtype=float), q.gold)
        learned = reciprocal_rank(model.scores(q.features), q.gold)
        rows = by_set.setdefault(q.dataset, {"fused": [], "learned": []})
        rows["fused"].append(fused)
        rows["learned"].append(learned)
    return {
        name: {
            "questions": len(rows["fused"]),
            "fused_mrr": round(float(np.mean(rows["fused"])), 4),
            "learned_mrr": round(float(np.mean(rows["learned"])), 4),
            "fused_r1": round(float(np.mean([r == 1.0 for r in rows["fused"]])), 4),
            "learned_r1": round(float(np.mean([r == 1.0 for r in rows["learned"]])), 4),
        }
        for name, rows in by_set.items()
    }


def render_fit(report: dict[str, Any], console: Console) -> None:
    for name, model in report["models"].items():
        chosen = f"trees {model['trees']}" if "trees" in model else f"L2 {model['l2']}"
        table = Table(
            title=f"ranker {name}: {model['questions']} questions of "
            f"{', '.join(report['datasets'])} · {chosen} "
            f"(5-fold MRR@10 {model['cross_mrr']})"
        )
        for column in ("set", "n", "fused R@1", "learned R@1", "fused MRR", "learned MRR"):
            table.add_column(column, justify="left" if column == "set" else "right")
        for dataset, row in model["by_dataset"].items():
            table.add_row(
                dataset,
                str(row["questions"]),
                *(
                    f"{row[key]:.3f}"
                    for key in ("fused_r1", "learned_r1", "fused_mrr", "learned_mrr")
                ),
            )
        console.print(table)
        if "weights" in model:
            console.print(
                "weights (standardised features): "
                + ", ".join(f"{k} {v:+.2f}" for k, v in model["weights"].items())
            )
    if "written" in report:
        console.print(f"written: {report['written']}")


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    result: np.ndarray = e / e.sum()
    return result
