"""The settings root, ``Settings``: the sections, ``advanced``, and where they are read
from (arguments, ``SUPERBIZ_*`` variables, ``superbiz.yaml``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from superbiz.config._section import _hyphenate, _Section
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
    SourcesSettings,
)
from superbiz.config.retrieval import (
    AdvancedEmbeddingSettings,
    AdvancedRetrievalSettings,
    EmbeddingConfig,
    EmbeddingSettings,
    RetrievalConfig,
    RetrievalSettings,
    VectorSettings,
)
from superbiz.config.service import (
    AccessSettings,
    AuthSettings,
    DatabasePoolSettings,
    ServiceSettings,
    TelemetrySettings,
)
from superbiz.exceptions import ConfigError

CONFIG_ENV = "SUPERBIZ_CONFIG"
DEFAULT_CONFIG_FILE = "superbiz.yaml"


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
    read from the source of the module that declares the key, not at import); a key under
    ``advanced`` starts it with why it is there (Tuning, Fitted, Baseline, Internal)."""

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
