"""A run's real paths (``RealPaths``) are ``os.path.realpath``'s, on a real tree of
folders, links to folders and files, dangling links, ``..`` and missing files."""

from __future__ import annotations

import os
from pathlib import Path

from superbiz.knowledge.ingest.discovery import RealPaths


def test_every_path_is_what_realpath_says(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "ops" / "deep").mkdir(parents=True)
    (docs / "ops" / "deep" / "a.md").write_text("# A\n")
    (docs / "b.md").write_text("# B\n")
    (tmp_path / "linked").symlink_to(docs / "ops")  # a link to a folder
    (docs / "c.md").symlink_to(docs / "b.md")  # a link to a file
    (docs / "gone.md").symlink_to(tmp_path / "nowhere.md")  # dangling
    (docs / "ops" / "up").symlink_to("..", target_is_directory=True)  # relative, upwards
    paths = [
        tmp_path / "linked" / "deep" / "a.md",
        tmp_path / "linked" / ".." / "b.md",  # the link's parent: docs, not tmp_path
        docs / "c.md",
        docs / "gone.md",
        docs / "missing" / "x.md",
        docs / "ops" / "up" / "b.md",
        docs / "ops" / "up" / "ops" / "deep" / "." / "a.md",
        docs / "b.md",
        tmp_path / "linked",
        Path("/"),
    ]
    real = RealPaths()
    for path in [*paths, *paths]:  # the second time from what it found
        assert real(path) == os.path.realpath(path), path


def test_a_stored_documents_root_is_pathlibs(tmp_path: Path) -> None:
    """``stored_root`` on strings gives what its pathlib form gave, for paths that hold
    a document and paths that do not."""
    from superbiz.knowledge.ingest.discovery import stored_root

    def by_pathlib(real: Path, doc_path: str) -> Path | None:
        parts = len(Path(doc_path).parts)
        if not 0 < parts < len(real.parts):
            return None
        root = real.parents[parts - 1]
        return root if real.relative_to(root).as_posix() == doc_path else None

    reals = [Path("/kb/ops/disk.md"), Path("/x.md"), Path("/kb/运维/磁盘.md"), tmp_path / "a.md"]
    docs = [
        "ops/disk.md",
        "disk.md",
        "x.md",
        "kb/ops/disk.md",
        "运维/磁盘.md",
        "a.md",
        "",
        ".",
        "ops/./disk.md",
        "/ops/disk.md",
        "ops//disk.md",
        "api/disk.md",
        "s.md",
    ]
    for real in reals:
        for doc in docs:
            assert stored_root(real, doc) == by_pathlib(real, doc), (real, doc)
