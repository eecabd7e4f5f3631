"""The documentation site above a Git source's folder, written beside its tree.

A source of one folder of a repository (``--subdir docs``) writes that folder out alone,
and a MkDocs site keeps its configuration beside it: ``mkdocs.yml`` next to ``docs/``.
Walking up from the written folder found nothing, so every page of PagerDuty's docs added
so was titled by its file name. The configuration is read from the commit instead, as
far above the folder as a folder's ingest looks on disk (``LEVELS_ABOVE_ROOT``), and the
titles its ``nav`` gives the folder's pages are written beside the tree as an
``mkdocs.yml`` of its own, whose ``docs_dir`` is the tree: every read of the tree's
files (a sync, a folder's ingest reading again what an older reader made) finds it as
it finds any site (``site_titles``), and a sync that changes it reads every page again.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import yaml

from superbiz.knowledge.documents.site_titles import (
    CONFIG_MAX_BYTES,
    CONFIG_NAMES,
    LEVELS_ABOVE_ROOT,
    nav_titles,
    unread,
)
from superbiz.knowledge.sources.git import BareRepository


def configs_above(subdir: str) -> list[str]:
    """Where a site's configuration above the repository folder ``subdir`` may be, nearest
    first.

    >>> configs_above("docs/zh")
    ['docs/mkdocs.yml', 'docs/mkdocs.yaml', 'mkdocs.yml', 'mkdocs.yaml']
    >>> configs_above("")
    []
    """
    if not subdir:
        return []
    folders = [posixpath.dirname(subdir)]
    while folders[-1] and len(folders) < LEVELS_ABOVE_ROOT:
        folders.append(posixpath.dirname(folders[-1]))
    return [posixpath.join(folder, name) for folder in folders for name in CONFIG_NAMES]


def nav_above(repo: BareRepository, commit: str, subdir: str) -> tuple[dict[str, str], list[str]]:
    """The ``nav`` titles of the nearest site above ``subdir`` in ``commit`` that lists
    pages of that folder, by their paths relative to it; with what could not be read on
    the way (for the sync's notes)."""
    problems: list[str] = []
    configs = configs_above(subdir)
    found = repo.entries(commit, configs)
    sizes = repo.sizes([entry.blob for entry in found.values()])
    for path in configs:
        if (entry := found.get(path)) is None:
            continue
        if (size := sizes.get(entry.blob, 0)) > CONFIG_MAX_BYTES:
            problems.append(unread(path, f"{size} bytes, over {CONFIG_MAX_BYTES}"))
            continue
        try:
            docs_dir, titles = nav_titles(repo.blobs([entry.blob])[entry.blob].decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(unread(path, "not UTF-8 text"))
            continue
        except ValueError as exc:
            problems.append(unread(path, str(exc)))
            continue
        docs = posixpath.normpath(posixpath.join(posixpath.dirname(path), docs_dir))
        pages = {
            page[len(subdir) + 1 :]: title
            for listed, title in titles.items()
            if (page := posixpath.normpath(posixpath.join(docs, listed))).startswith(f"{subdir}/")
        }
        if pages:
            return pages, problems
    return {}, problems


def write_site(folder: Path, docs_dir: str, titles: dict[str, str]) -> bool:
    """Write ``titles`` (pages relative to ``docs_dir``, a folder under ``folder``) as the
    ``mkdocs.yml`` of ``folder``, or remove it when there are none; whether it changed.

    >>> import tempfile; folder = Path(tempfile.mkdtemp())
    >>> write_site(folder, "tree/ops", {"oncall.md": "Being On-Call"})
    True
    >>> nav_titles((folder / "mkdocs.yml").read_text())
    ('tree/ops', {'oncall.md': 'Being On-Call'})
    >>> write_site(folder, "tree/ops", {"oncall.md": "Being On-Call"})
    False
    """
    config = folder / CONFIG_NAMES[0]
    before = config.read_text(encoding="utf-8") if config.is_file() else None
    if not titles:
        config.unlink(missing_ok=True)
        return before is not None
    text = "# the nav of the site above this source's folder in its repository\n" + yaml.safe_dump(
        {"docs_dir": docs_dir, "nav": [{title: page} for page, title in titles.items()]},
        allow_unicode=True,
        sort_keys=False,
    )
    if text == before:
        return False
    config.write_text(text, encoding="utf-8")
    return True
