"""``DocumentMirror``: the stored documents brought up to date by difference, and not read
at all where the knowledge version says nothing was written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from superbiz.knowledge.kb._mirror import DocumentMirror
from superbiz.storage.db import open_database
from superbiz.storage.repository import DocumentRepository, StoredDocument


def document(n: int, title: str = "Runbook") -> StoredDocument:
    return StoredDocument(f"ops/{n}.md", f"{title} {n}", "ops", "h", 1, 1, f"/kb/ops/{n}.md", {})


def test_a_refresh_with_nothing_written_reads_nothing_and_a_write_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_database(f"sqlite:///{tmp_path}/kb.db")
    writer, reader = DocumentRepository(engine), DocumentRepository(engine)
    writer.save_all(document(n) for n in range(3))
    mirror = DocumentMirror(reader)
    fingerprints = reader.fingerprints
    reads: list[int] = []
    monkeypatch.setattr(reader, "fingerprints", lambda: reads.append(1) or fingerprints())

    first = mirror.refresh()
    assert list(first) == ["ops/0.md", "ops/1.md", "ops/2.md"] and len(reads) == 1
    assert mirror.refresh() is first and len(reads) == 1  # nothing written: nothing read

    writer.save(dataclasses.replace(document(1), title="Renamed"))  # another writer
    after = mirror.refresh()
    assert len(reads) == 2 and mirror.rows_read == 4  # the three, then the one changed
    assert after["ops/1.md"].title == "Renamed" and after["ops/0.md"] is first["ops/0.md"]

    writer.delete(["ops/2.md"])
    assert list(mirror.refresh()) == ["ops/0.md", "ops/1.md"] and len(reads) == 3
