"""``DocumentRepository.under``: the documents of one folder's files, found by the
database. A Git sync asks it for its own tree's documents; before, it read every row of
the knowledge base twice a sync and kept those whose file was in the tree. Its
complement, ``files_outside``, is what `eval` asks before ingesting a dataset."""

from __future__ import annotations

import os

from superbiz.storage.db import open_database
from superbiz.storage.repository import DocumentRepository, StoredDocument


def _document(path: str, source_file: str) -> StoredDocument:
    return StoredDocument(
        path=path,
        title=path,
        domain="ops",
        content_hash="h",
        size_bytes=1,
        chunk_count=1,
        source_file=source_file,
        metadata={},
    )


def test_the_documents_under_a_folder_are_those_of_its_files_only(database_url: str) -> None:
    sep = os.sep
    tree = f"{sep}kb{sep}src_1{sep}tree"
    files = {
        "ops/a.md": f"{tree}{sep}ops{sep}a.md",
        "b.md": f"{tree}{sep}b.md",
        # a wildcard's reading of the folder's "_" would take this one
        "other.md": f"{sep}kb{sep}srcX1{sep}tree{sep}other.md",
        # the same name continued is another folder
        "next.md": f"{tree}.new{sep}next.md",
        "sibling.md": f"{tree}2{sep}sibling.md",
    }
    engine = open_database(database_url)
    try:
        documents = DocumentRepository(engine)
        documents.save_all(_document(path, source) for path, source in files.items())

        found = sorted(doc.path for doc in documents.under(tree))
        assert found == ["b.md", "ops/a.md"]
        assert sorted(doc.path for doc in documents.under(tree + sep)) == found
        assert documents.under(f"{sep}kb{sep}src%{sep}tree") == []
        assert documents.under(f"{sep}nowhere") == []

        outside = [files[path] for path in ("next.md", "other.md", "sibling.md")]
        assert documents.files_outside(tree) == sorted(outside)
        assert documents.files_outside(f"{sep}kb") == []
        # two documents of one file (a PDF's parts) name it once
        documents.save(_document("b.md#2", files["b.md"]))
        assert documents.files_outside(f"{tree}2") == sorted(
            [files["b.md"], files["ops/a.md"], *outside[:2]]
        )
    finally:
        engine.dispose()
