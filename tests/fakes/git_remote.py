"""Real Git repositories for tests: a working repository and a bare remote over
``file://`` (no network), built with the ``git`` binary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


class Remote:
    """A working repository and the bare remote it pushes to (``url``)."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.bare = root / "remote.git"
        self.work.mkdir(parents=True)
        git(self.work, "init", "-q", "-b", "main")
        git(root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(self.work, "remote", "add", "origin", str(self.bare))

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def write(self, files: dict[str, str]) -> None:
        for path, text in files.items():
            target = self.work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def commit(self, message: str = "change", *, force: bool = False) -> str:
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        git(self.work, "push", "-q", *(["--force"] if force else []), "origin", "main")
        return git(self.work, "rev-parse", "HEAD")
