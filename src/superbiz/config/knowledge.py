"""Settings of the knowledge base's contents: ``ingest``, Git ``sources`` and the
knowledge-``gaps`` report."""

from __future__ import annotations

import codecs

from pydantic import ConfigDict, Field, field_validator, model_validator

from superbiz.config._section import _hyphenate, _Section


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
        ".mdx",
        ".markdown",
        ".txt",
        ".html",
        ".htm",
        ".pdf",
        ".docx",
        ".rst",
        ".adoc",
        ".asciidoc",
    )
    """The files ingested: Markdown (``.mdx`` too: its imports and comments dropped) and
    text as they are; HTML, PDF, Word, reStructuredText and AsciiDoc converted to the same
    structure."""
    encodings: tuple[str, ...] = Field(("utf-8",), min_length=1)
    """Tried in order for a file without a byte-order mark; add `gb18030` to accept GBK files."""
    convert_memory_mb: int = Field(320, ge=64)
    """A converted format (PDF, .docx, HTML, .rst, .adoc) is converted in a child process with at
    most this much memory (its data segment); a file needing more is skipped with the reason."""
    convert_timeout_s: float = Field(120.0, gt=0)
    """The longest one file's conversion may take; a file needing longer is skipped with the
    reason."""
    embedding_processes: int = Field(2, ge=0)
    """Worker processes an ingest of more than 1,024 chunks embeds in (from its first full
    group of 1,024 on) with the embedded model where Milvus Lite runs in the process: about
    200 MB each while the ingest runs, none on a one-core machine; 0: threads of the
    process, which take turns with Lite's Python for the GIL."""

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
