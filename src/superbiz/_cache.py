"""The user's folder where superbiz keeps what every process start would redo: the
embedded model's files parsed (``retrieval._use_files``) and the Milvus Lite gate's
passed self-checks (``retrieval._lite.checks``).
"""

from __future__ import annotations

import os
from pathlib import Path

#: this variable's folder ("" turns keeping off), else ``$XDG_CACHE_HOME/superbiz``,
#: else ``~/.cache/superbiz``
CACHE_VARIABLE = "SUPERBIZ_MODEL_CACHE"


def cache_root() -> Path | None:
    """Where kept files live; None when keeping is off. Raises ``RuntimeError`` where
    there is no home to find (``Path.home``)."""
    configured = os.environ.get(CACHE_VARIABLE)
    if configured == "":
        return None
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "superbiz"


def private(path: Path) -> bool:
    """Whether only this user can have written ``path`` (what is read from it is trusted:
    a pickle is code to load, a kept check lets a test be skipped)."""
    if not hasattr(os, "getuid"):
        return True
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & 0o022
