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

One module per group of sections (``retrieval``, ``agent``, ``service``, ``knowledge``)
and the root with its loading (``settings``); import every name from here.
"""

from __future__ import annotations

from superbiz.config.agent import (
    AdvancedGovernanceSettings,
    AdvancedPlannerSettings,
    ChatSettings,
    GovernanceConfig,
    GovernanceSettings,
    LLMSettings,
    PlannerConfig,
    PlannerSettings,
    SessionSettings,
)
from superbiz.config.knowledge import (
    AdvancedGapSettings,
    GapConfig,
    GapSettings,
    IngestSettings,
    SourceLinkSettings,
    SourcesSettings,
)
from superbiz.config.retrieval import (
    AdvancedAnswerSettings,
    AdvancedEmbeddingSettings,
    AdvancedRetrievalSettings,
    AnswerConfig,
    AnswerSettings,
    EmbeddingConfig,
    EmbeddingSettings,
    EvidenceLevelSettings,
    NormalizationSettings,
    RetrievalConfig,
    RetrievalSettings,
    VectorSettings,
)
from superbiz.config.service import (
    AccessSettings,
    AuthSettings,
    DatabasePoolSettings,
    OidcSettings,
    ServiceSettings,
    TelemetrySettings,
)
from superbiz.config.settings import (
    CONFIG_ENV,
    DEFAULT_CONFIG_FILE,
    AdvancedSettings,
    Settings,
    load_settings,
)

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "AccessSettings",
    "AdvancedAnswerSettings",
    "AdvancedEmbeddingSettings",
    "AdvancedGapSettings",
    "AdvancedGovernanceSettings",
    "AdvancedPlannerSettings",
    "AdvancedRetrievalSettings",
    "AdvancedSettings",
    "AnswerConfig",
    "AnswerSettings",
    "AuthSettings",
    "ChatSettings",
    "DatabasePoolSettings",
    "EmbeddingConfig",
    "EmbeddingSettings",
    "EvidenceLevelSettings",
    "GapConfig",
    "GapSettings",
    "GovernanceConfig",
    "GovernanceSettings",
    "IngestSettings",
    "LLMSettings",
    "NormalizationSettings",
    "OidcSettings",
    "PlannerConfig",
    "PlannerSettings",
    "RetrievalConfig",
    "RetrievalSettings",
    "ServiceSettings",
    "SessionSettings",
    "Settings",
    "SourceLinkSettings",
    "SourcesSettings",
    "TelemetrySettings",
    "VectorSettings",
    "load_settings",
]
