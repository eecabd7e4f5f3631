"""What one sync of a Git source did, as the CLI, the HTTP service and the source's row
report it."""

from __future__ import annotations

from dataclasses import dataclass, field

from superbiz.knowledge.ingest.report import IngestReport
from superbiz.knowledge.sources.source_list import SourceView
from superbiz.storage.sources import SourceRecord


@dataclass(slots=True)
class SyncResult:
    """What one sync of a Git source did."""

    source: SourceRecord
    report: IngestReport
    #: ``(old, new)`` document paths whose file was renamed
    renamed: list[tuple[str, str]] = field(default_factory=list)
    #: ``incremental``, ``full`` (first sync or after a force-push) or ``unchanged``
    mode: str = "incremental"
    note: str | None = None

    def counts(self) -> dict[str, int]:
        r = self.report
        return {
            "added": len(r.added),
            "updated": len(r.updated),
            "renamed": len(self.renamed),
            "removed": len(r.removed),
            "unchanged": len(r.unchanged),
            "skipped": len(r.skipped),
        }

    def summary(self) -> str:
        c = self.counts()
        head = f"{self.source.name} at {(self.source.commit or '')[:12]} ({self.mode})"
        body = ", ".join(f"{n} {k}" for k, n in c.items())
        return f"{head}: {body}" + (f"; {self.note}" if self.note else "")

    def as_dict(self) -> dict[str, object]:
        return {
            "source": SourceView.of(self.source).model_dump(mode="json"),
            "mode": self.mode,
            "note": self.note,
            "renamed": [{"from": a, "to": b} for a, b in self.renamed],
            "report": self.report.as_dict(),
        }
