"""Links from a document back to its page in its Git repository's web interface
(``sources.<name>.web-url``), for the answers and passages that cite it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.sources.git_sources import SOURCES
from superbiz.storage.sources import GIT, SourceRecord, SourceRepository


def web_link(pattern: str | None, source: SourceRecord, doc_path: str) -> str | None:
    """The link ``pattern`` gives a document of ``source``: ``{commit}``, ``{branch}`` and
    ``{path}`` (its path in the repository)."""
    if not pattern or not source.commit:
        return None
    path = doc_path
    if source.domain:
        path = path.removeprefix(f"{source.domain}/")
    if source.subdir:
        path = f"{source.subdir}/{path}"
    return (
        pattern.replace("{commit}", source.commit)
        .replace("{branch}", source.branch or "")
        .replace("{path}", path)
    )


def web_links(kb: KnowledgeBase, paths: Iterable[str]) -> dict[str, str]:
    """Links to the documents ``paths`` that come from a Git source with a
    ``sources.<name>.web-url`` pattern, at the commit they were synced from. Only
    ``http(s)`` links are given: a pattern is configuration, but a page renders it."""
    settings = kb.settings.sources
    if not settings.model_extra:
        return {}
    patterns = {
        source.name: (source, link.web_url)
        for source in SourceRepository(kb.engine).all()
        if source.kind == GIT
        and (link := settings.link(source.name)) is not None
        and link.web_url
        and link.web_url.startswith(("https://", "http://"))
    }
    if not patterns:
        return {}
    home = (kb.settings.data_dir / SOURCES).resolve()
    links = {}
    for path in dict.fromkeys(paths):
        doc = kb.documents.get(path)
        if doc is None or not Path(doc.source_file).resolve().is_relative_to(home):
            continue
        name = Path(doc.source_file).resolve().relative_to(home).parts[0]
        if name in patterns and (url := web_link(patterns[name][1], patterns[name][0], path)):
            links[path] = url
    return links
