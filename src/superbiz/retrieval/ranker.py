"""The learned ranker: a linear score over what the pipeline knows of each candidate.

After the candidates are gathered (L0 exact matches, dense and BM25 chunk hits, the answer
model's cosines when it is on), each (question, document) pair is described by the
``FEATURES`` below and re-scored by a model fitted on labelled questions (``superbiz eval
fit-ranker``, README "The learned ranker"): a linear model fitted listwise over the first
round's 18 features, or small trees fitted by LambdaMART over all of them. Today's fused
hybrid score is one feature among them, so a model starts from the ranking it replaces. The
models ship as data (``ranker.json`` beside this module) and run on numpy alone.

Every feature is scale-free across knowledge bases: cosines as they are, BM25 over the
query's largest, ranks as reciprocals, shares of terms.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from superbiz._text import STOP_WORDS, Language, detect_language, normalize, segmenter
from superbiz.exceptions import ConfigError
from superbiz.retrieval.exact_index import ExactIndex, ExactMatch
from superbiz.retrieval.passages import coverage, passage_score, passage_text, question_terms
from superbiz.retrieval.search import DocHit
from superbiz.retrieval.title_match import title_coverage, title_words

#: what every model reads, in this order (the answer model's two come last when it is on)
FEATURES: tuple[str, ...] = (
    "hybrid",  # today's fused hybrid score
    "dense",  # the best chunk's cosine
    "dense_gap",  # that cosine minus the query's best
    "dense_rr",  # reciprocal rank in the dense list (0: no dense hit)
    "bm25",  # the best chunk's BM25 over the query's largest
    "bm25_rr",  # reciprocal rank in the BM25 list (0: no BM25 hit)
    "bm25_document",  # the sum of its chunks' BM25 over the query's largest sum
    "bm25_section",  # its best section's BM25 (matched chunks under one heading), likewise
    "dense_chunks",  # log(1 + its chunks among the dense hits)
    "bm25_chunks",  # log(1 + its chunks among the BM25 hits)
    "title_coverage",  # the share of its title's Latin words the query names
    "heading_terms",  # the share of the query's key terms in its title and retrieved headings
    "text_terms",  # the share of the query's key terms in its title and retrieved text
    "named",  # an L0 key (title, alias, covers) names it
    "tagged",  # an L0 key matches it, but only as a tag
    "other_language",  # it is written in another language than the query
    "opening",  # its best chunk is its first
    "chunk_length",  # log(1 + characters of its best chunk / 100)
    # added for the trees (issue 35, second round), fixed before any was fitted:
    "hybrid_rr",  # reciprocal rank in the fused order
    "hybrid_gap",  # its fused score minus the query's best
    "passage",  # its best retrieved passage's answer-selection score (``passages``)
    "passage_gap",  # that score minus the query's best
    "passage_terms",  # the share of the question's terms its best-covered passage names
    "title_terms",  # the share of the query's key terms in its title alone
    "chunk_position",  # log(1 + its best chunk's index in the document)
    "query_chinese",  # the query is Chinese (the same for every candidate: for trees)
    "query_length",  # log(1 + the query's key terms) (likewise)
)
#: the features the first round's linear models read (``ranker.json`` of that round)
LINEAR_FEATURES: tuple[str, ...] = FEATURES[:18]
ANSWER_FEATURES: tuple[str, ...] = (
    "answer",  # the answer model's cosine with its opening (0: none)
    "answer_gap",  # that cosine minus the query's best
)

_SHIPPED = "ranker.json"
#: a JSON list of scalars as ``json.dumps(indent=1)`` writes it, one item a line
_SCALARS = re.compile(r"\[\n(\s*[^\[\]{}\n]+(?:,\n\s*[^\[\]{}\n]+)*)\n\s*\]")
_LATIN = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")


def candidate_features(
    query: str,
    ranked: Sequence[DocHit],
    matches: Collection[ExactMatch],
    *,
    answers: bool = False,
) -> np.ndarray:
    """One row of ``FEATURES`` (and ``ANSWER_FEATURES`` with ``answers``) per document of
    ``ranked``, in its order. ``matches``: the query's L0 matches, every field."""
    language = detect_language(query)
    terms = query_terms(query)
    asked = title_words(query)
    question = question_terms(query)
    query_level = [float(language == "zh"), math.log1p(len(terms))]
    naming = {m.doc_path for m in ExactIndex.naming(list(matches))}
    matched = {m.doc_path for m in matches}
    dense_rank = _ranks(ranked, dense=True)
    bm25_rank = _ranks(ranked, dense=False)
    best_similarity = max((d.similarity for d in ranked), default=0.0)
    answered = [d.answer for d in ranked if d.answer is not None]
    best_answer = max(answered, default=0.0)
    rows: list[list[float]] = []
    lexical: list[tuple[float, float, float]] = []
    hybrids = [_fused(doc) for doc in ranked]
    best_hybrid = max(hybrids, default=0.0)
    for position, (doc, hybrid) in enumerate(zip(ranked, hybrids, strict=True)):
        bm25 = [c.raw_bm25 for c in doc.chunks if c.raw_bm25 is not None]
        sections: dict[str, float] = {}
        for chunk in doc.chunks:
            if chunk.raw_bm25 is not None:
                sections[chunk.hit.heading] = sections.get(chunk.hit.heading, 0.0) + chunk.raw_bm25
        lexical.append((max(bm25, default=0.0), sum(bm25), max(sections.values(), default=0.0)))
        heads = {_normalized(c.hit.heading) for c in doc.chunks}
        headings = " ".join([_normalized(doc.title), *heads])
        text = " ".join([headings, *(c.hit.text for c in doc.chunks)]).casefold()
        best = doc.chunks[0].hit if doc.chunks else None
        passages = [_passage_text(doc.title, c.hit.heading, c.hit.text) for c in doc.chunks]
        passage = max(
            (
                passage_score(c.similarity, question, text)
                for c, text in zip(doc.chunks, passages, strict=True)
            ),
            default=0.0,
        )
        row = [
            hybrid,
            doc.similarity,
            doc.similarity - best_similarity,
            1.0 / dense_rank[doc.doc_path] if doc.doc_path in dense_rank else 0.0,
            0.0,  # BM25 shares: filled in below, over the query's largest
            1.0 / bm25_rank[doc.doc_path] if doc.doc_path in bm25_rank else 0.0,
            0.0,
            0.0,
            math.log1p(sum(c.raw_dense is not None for c in doc.chunks)),
            math.log1p(len(bm25)),
            title_coverage(doc.title, asked),
            _share(terms, headings),
            _share(terms, text),
            float(doc.doc_path in naming),
            float(doc.doc_path in matched and doc.doc_path not in naming),
            float(_language(doc.title, best.text if best else "") != language),
            float(best is not None and best.chunk_index == 0),
            math.log1p(len(best.text) / 100) if best is not None else 0.0,
            1.0 / (position + 1),
            hybrid - best_hybrid,
            passage,
            0.0,  # the passage gap: filled in below, over the query's best
            max((coverage(question, text) for text in passages), default=0.0),
            _share(terms, _normalized(doc.title)),
            math.log1p(best.chunk_index) if best is not None else 0.0,
            *query_level,
        ]
        if answers:
            answer = doc.answer if doc.answer is not None else 0.0
            row += [answer, answer - best_answer if doc.answer is not None else -1.0]
        rows.append(row)
    matrix = np.asarray(rows, dtype=np.float64).reshape(len(ranked), -1)
    if len(ranked):
        top = np.asarray(lexical).max(axis=0)
        scale = np.where(top > 0, top, 1.0)
        matrix[:, [4, 6, 7]] = np.asarray(lexical) / scale
        passage = FEATURES.index("passage")
        matrix[:, passage + 1] = matrix[:, passage] - matrix[:, passage].max()
    return matrix


def _fused(doc: DocHit) -> float:
    """The fused hybrid score (before the answer model re-scored the document)."""
    return doc.score if doc.hybrid is None else doc.hybrid


def feature_columns(features: Sequence[str]) -> np.ndarray:
    """Where each of ``features`` is in a row of ``candidate_features``."""
    known = FEATURES + ANSWER_FEATURES
    unknown = [name for name in features if name not in known]
    if unknown or len(set(features)) != len(features) or not features:
        raise ValueError(f"features {list(features)} are not this version's (unknown: {unknown})")
    return np.asarray([known.index(name) for name in features], dtype=np.intp)


@dataclass(frozen=True, slots=True)
class LinearRanker:
    """``score = Σ weight × (feature − mean) / scale``: the model one ``fit-ranker`` run fits
    for one configuration (with or without the answer model)."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    @property
    def answers(self) -> bool:
        return any(name in ANSWER_FEATURES for name in self.features)

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of ``candidate_features`` (every feature; this model's read)."""
        x = matrix[:, feature_columns(self.features)]
        result: np.ndarray = ((x - self.mean) / self.scale) @ self.weights
        return result

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LinearRanker:
        features = tuple(data["features"])
        feature_columns(features)
        arrays = [np.asarray(data[key], dtype=np.float64) for key in ("mean", "scale", "weights")]
        if any(a.shape != (len(features),) for a in arrays) or not np.all(arrays[1] > 0):
            raise ValueError("mean, scale and weights need one number per feature (scale > 0)")
        return cls(features, *arrays)


@dataclass(frozen=True, slots=True)
class TreeRanker:
    """A sum of small regression trees over the features (LambdaMART, fitted by
    ``superbiz eval fit-ranker --model trees`` with LightGBM), evaluated here with numpy:
    the runtime needs no tree library.

    Every tree is stored as arrays over its nodes: an inner node sends a row left when its
    ``feature`` is at most its ``threshold`` (``left`` / ``right``: child nodes); a leaf is
    its own child on both sides and carries its ``value``. All trees walk together, one
    level a step, so a candidate list costs as many numpy steps as the deepest tree has
    levels (7 for the shipped trees of 8 leaves: 0.45 ms for 18 candidates and 210 trees).

    >>> tree = TreeRanker(("bm25",), np.array([[0, 0, 0]]), np.array([[0.5, 0, 0]]),
    ...     np.array([[1, 1, 2]]), np.array([[2, 1, 2]]), np.array([[0.0, -1.0, 1.0]]))
    >>> tree.scores(np.array([[0.0] * 4 + [0.9] + [0.0] * 22, [0.0] * 27])).tolist()
    [1.0, -1.0]
    """

    features: tuple[str, ...]
    #: (trees, nodes): an inner node's feature (index into ``features``) and threshold
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    #: (trees, nodes): a leaf's value (0 for inner nodes)
    value: np.ndarray
    #: the deepest leaf's depth and the nodes of all trees as flat arrays (from the above)
    _walk: tuple[int, tuple[np.ndarray, ...]] = field(init=False, repr=False, compare=False)

    @property
    def answers(self) -> bool:
        return any(name in ANSWER_FEATURES for name in self.features)

    def __post_init__(self) -> None:
        trees, width = self.feature.shape
        roots = np.arange(trees) * width
        depth = np.zeros((trees, width), dtype=np.intp)
        for node in range(width):  # children come after their parent
            inner = np.flatnonzero(self.left[:, node] != node)
            for child in (self.left, self.right):
                depth[inner, child[inner, node]] = depth[inner, node] + 1
        flat = (
            roots,
            self.feature.ravel(),
            self.threshold.ravel(),
            (self.left + roots[:, None]).ravel(),
            (self.right + roots[:, None]).ravel(),
            self.value.ravel(),
        )
        object.__setattr__(self, "_walk", (int(depth.max()), flat))

    def scores(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of ``candidate_features``: the sum of every tree's leaf.
        The trees are walked as one array of nodes, every row and tree a step."""
        x = matrix[:, feature_columns(self.features)]
        steps, (roots, feature, threshold, left, right, value) = self._walk
        rows = np.arange(x.shape[0])[:, None]
        node = np.broadcast_to(roots, (x.shape[0], len(roots)))
        for _ in range(steps):
            node = np.where(x[rows, feature[node]] <= threshold[node], left[node], right[node])
        result: np.ndarray = value[node].sum(axis=1)
        return result

    def to_dict(self) -> dict[str, Any]:
        """Each tree's nodes as lists (thresholds exact: a rounded one may flip a split)."""
        return {
            "kind": "trees",
            "features": list(self.features),
            "trees": [
                {
                    "feature": self.feature[t].tolist(),
                    "threshold": self.threshold[t].tolist(),
                    "left": self.left[t].tolist(),
                    "right": self.right[t].tolist(),
                    "value": [round(float(v), 8) for v in self.value[t]],
                }
                for t in range(self.feature.shape[0])
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TreeRanker:
        features = tuple(data["features"])
        feature_columns(features)
        trees = data["trees"]
        if not trees:
            raise ValueError("a tree model needs at least one tree")
        width = max(len(tree["value"]) for tree in trees)
        arrays: dict[str, np.ndarray] = {}
        for key, kind in (
            ("feature", np.intp),
            ("threshold", np.float64),
            ("left", np.intp),
            ("right", np.intp),
            ("value", np.float64),
        ):
            rows = [list(tree[key]) for tree in trees]
            if any(len(row) != len(tree["value"]) for row, tree in zip(rows, trees, strict=True)):
                raise ValueError(f"every node of a tree needs its {key}")
            # padding: leaves of value 0 that nothing reaches
            pad = list(range(width)) if key in ("left", "right") else [0] * width
            arrays[key] = np.asarray([row + pad[len(row) :] for row in rows], dtype=kind)
        nodes = np.arange(width)
        inner = (arrays["left"] != nodes) | (arrays["right"] != nodes)
        if (
            arrays["feature"].min() < 0
            or arrays["feature"].max() >= len(features)
            or np.any(inner & ((arrays["left"] <= nodes) | (arrays["right"] <= nodes)))
            or max(arrays["left"].max(), arrays["right"].max()) >= width
        ):
            raise ValueError("a node's feature or child is out of range (children come after)")
        return cls(features, **arrays)


#: a fitted model: it scores the rows of ``candidate_features``
Ranker = LinearRanker | TreeRanker


def _ranker(data: dict[str, Any]) -> Ranker:
    kind = data.get("kind", "linear")
    if kind == "trees":
        return TreeRanker.from_dict(data)
    if kind == "linear":
        return LinearRanker.from_dict(data)
    raise ValueError(f"kind {kind!r} is neither linear nor trees")


@dataclass(frozen=True, slots=True)
class RankerModels:
    """The fitted models of one file: ``plain`` for lookups without the answer model,
    ``answers`` for lookups it ranked (either may be missing: the fused ranking stands)."""

    plain: Ranker | None
    answers: Ranker | None
    #: how they were fitted (sets, regularisation, cross-validation): for the record
    fitted: dict[str, Any]

    def for_lookup(self, answered: bool) -> Ranker | None:
        return self.answers if answered else self.plain

    def to_json(self) -> str:
        data = {
            "plain": self.plain.to_dict() if self.plain else None,
            "answers": self.answers.to_dict() if self.answers else None,
            "fitted": self.fitted,
        }
        text = json.dumps(data, indent=1, ensure_ascii=False)
        # a list of numbers or names on one line: a tree is five lines, not five hundred
        return _SCALARS.sub(_one_line, text) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> RankerModels:
        try:
            data = json.loads(text)
            return cls(
                _ranker(data["plain"]) if data.get("plain") else None,
                _ranker(data["answers"]) if data.get("answers") else None,
                dict(data.get("fitted") or {}),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{source} is not a ranker file: {exc}") from exc


def _one_line(match: re.Match[str]) -> str:
    return "[" + ", ".join(item.strip() for item in match[1].split(",\n")) + "]"


def load_rankers(path: Path | None) -> RankerModels:
    """The models in ``path`` (``advanced.retrieval.ranker-file``), else the shipped ones."""
    if path is None:
        return shipped_rankers()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"advanced.retrieval.ranker-file: cannot read {path}: {exc}") from exc
    return RankerModels.from_json(text, str(path))


@cache
def shipped_rankers() -> RankerModels:
    text = resources.files(__package__).joinpath(_SHIPPED).read_text(encoding="utf-8")
    return RankerModels.from_json(text, f"superbiz/retrieval/{_SHIPPED}")


def rerank(
    query: str,
    ranked: list[DocHit],
    matches: Collection[ExactMatch],
    model: Ranker,
) -> list[DocHit]:
    """``ranked`` ordered by ``model``'s scores (the first of equals keeps its place); each
    document's ``score`` becomes the model's and ``hybrid`` keeps the fused hybrid score,
    which the supplements' rule reads."""
    if len(ranked) < 2:
        return ranked
    scores = model.scores(candidate_features(query, ranked, matches, answers=model.answers))
    order = sorted(range(len(ranked)), key=lambda i: -scores[i])
    return [
        replace(
            ranked[i],
            score=float(scores[i]),
            hybrid=ranked[i].score if ranked[i].hybrid is None else ranked[i].hybrid,
        )
        for i in order
    ]


def _ranks(ranked: Sequence[DocHit], *, dense: bool) -> dict[str, int]:
    """Each document's rank (from 1) by its best dense cosine or best BM25 score, among
    the documents the dense or the BM25 search returned."""
    best: dict[str, float] = {}
    for doc in ranked:
        values = [
            c.similarity if dense else c.raw_bm25
            for c in doc.chunks
            if (c.raw_dense if dense else c.raw_bm25) is not None
        ]
        if values:
            best[doc.doc_path] = max(v for v in values if v is not None)
    order = sorted(best, key=lambda path: -best[path])
    return {path: rank for rank, path in enumerate(order, start=1)}


def _share(terms: Sequence[str], text: str) -> float:
    return sum(term in text for term in terms) / len(terms) if terms else 0.0


def query_terms(query: str) -> tuple[str, ...]:
    """The query's words that carry meaning, without repeats: Latin words of three or more
    letters and jieba words of two or more CJK characters, stop words out. jieba cuts
    only the CJK runs: an English alert text costs one regular expression.

    >>> query_terms("Redis 连接池耗尽了 on host-1.example: 10.0.3.17")
    ('redis', 'host-1', 'example', '连接池', '耗尽')
    """
    text = normalize(query)
    latin = [w for w in _LATIN.findall(text) if len(w) >= 3 and w not in STOP_WORDS]
    cjk = [
        word
        for run in _CJK_RUN.findall(text)
        for word in segmenter().cut(run)
        if len(word) >= 2 and word not in STOP_WORDS
    ]
    return tuple(dict.fromkeys([*latin, *cjk]))


@lru_cache(maxsize=4096)
def _normalized(text: str) -> str:
    """``normalize`` of a title or heading: short, and the same ones come back."""
    return normalize(text)


@lru_cache(maxsize=8192)
def _passage_text(title: str, heading: str, text: str) -> str:
    """``passage_text``, remembered: the same chunks come back lookup after lookup."""
    return passage_text(title, heading, text)


@lru_cache(maxsize=4096)
def _language(title: str, text: str) -> Language:
    """``document_language``, remembered: a document's best chunk comes back in lookup
    after lookup, and judging it reads every character."""
    return detect_language(f"{title}\n{text}")
