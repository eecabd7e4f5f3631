"""The ``git`` binary, run as a subprocess: never a prompt, always a timeout, never a
credential in what is returned.

Credentials come from the environment or Git's own configuration (a credential helper,
``GIT_ASKPASS``, SSH keys); a URL's ``user:password@`` is removed from everything this
module hands back (``redact``), so no message, log line or stored row carries it. A
repository is kept bare: files are written from its objects by the caller, so nothing in
a repository (hooks, filters, symlinks) runs or is followed.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from superbiz.exceptions import SourceError

#: a URL's userinfo (``https://user:token@host``): removed before anything is kept or shown
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")
#: where a repository's fetched branch is kept (no remote is configured: no URL is stored)
_REF = "refs/superbiz/branch"
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"
ZERO = "0" * 40


def redact(text: str) -> str:
    """``text`` with the user and password of every URL in it removed.

    >>> redact("fatal: https://bob:s3cret@git.example.com/x.git not found")
    'fatal: https://git.example.com/x.git not found'
    """
    return _USERINFO.sub(r"\1", text)


#: the transports a source may use: ``git`` itself refuses any other (a remote helper
#: such as ``fd::17`` waited out the whole timeout; ``ext::`` runs a command)
TRANSPORTS = ("https", "http", "ssh", "git", "file")
#: ``scheme://`` at the start of a URL
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_url(url: str) -> None:
    """Refuse, before Git runs, a URL whose transport is not one of ``TRANSPORTS``:
    ``https://``, ``http://``, ``ssh://`` (or ``user@host:path``), ``git://``, and a
    local path or ``file://``.

    >>> check_url("https://git.example.com/ops.git"), check_url("git@host:ops/kb.git")
    (None, None)
    >>> check_url("/srv/git/kb.git"), check_url("file:///srv/git/kb.git")
    (None, None)
    >>> check_url("fd::17")
    Traceback (most recent call last):
    ...
    superbiz.exceptions.SourceError: unsupported Git URL 'fd::17': ...
    """
    problem = None
    scheme = _SCHEME.match(url)
    if not url.strip():
        problem = "it is empty"
    elif url.startswith("-"):
        problem = "it starts with '-' (read as an option)"
    elif any(ch in url for ch in "\x00\r\n"):
        problem = "it contains a control character"
    elif scheme is not None:
        name = scheme.group(1).lower()
        if name.replace("git+ssh", "ssh").replace("ssh+git", "ssh") not in TRANSPORTS:
            problem = f"the transport {name}:// is not one superbiz fetches over"
    elif "::" in url.split("/", 1)[0]:
        helper = url.split("::", 1)[0]
        problem = f"{helper}:: is a Git remote helper, which superbiz never runs"
    if problem is not None:
        raise SourceError(
            f"unsupported Git URL {redact(url)!r}: {problem}; use https://, http://, ssh:// "
            "(or user@host:path), git://, file:// or a local path"
        )


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_ALLOW_PROTOCOL=":".join(TRANSPORTS),  # and no other, whatever the URL
        GIT_TERMINAL_PROMPT="0",  # no username/password prompt: fail instead
        GCM_INTERACTIVE="never",
        LC_ALL="C",  # messages parsed and shown as Git writes them in English
        LANGUAGE="C",
    )
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def run_git(
    args: list[str], *, cwd: Path | None = None, timeout: float, stdin: bytes | None = None
) -> bytes:
    """``git args`` → its stdout; a ``SourceError`` with Git's own (redacted) message."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            env=_environment(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SourceError(
            f"git {args[0]} took longer than {timeout:g} s (sources.git-timeout-s)"
        ) from exc
    except FileNotFoundError as exc:
        raise SourceError("the git program is not installed") from exc
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.decode("utf-8", "replace").splitlines()]
        said = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(("fatal:", "error:"))]
        message = "; ".join(dict.fromkeys(said)) or next(
            (ln for ln in reversed(lines) if ln and not ln.startswith("hint:")),
            f"exit status {done.returncode}",
        )
        raise _GitFailed(done.returncode, redact(f"git {args[0]}: {message}"))
    return done.stdout


class _GitFailed(SourceError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Entry:
    """A file of a commit's tree: its mode (``100644``, ``120000`` a symlink…), blob, path."""

    mode: str
    blob: str
    path: str


@dataclass(frozen=True, slots=True)
class Change:
    """One line of a diff between two commits: ``status`` is A, M, D, T or R (renamed
    from ``old_path``); ``mode``/``blob`` are the new side's."""

    status: str
    path: str
    mode: str
    blob: str
    old_path: str | None = None


class BareRepository:
    """A bare repository at ``path`` holding one branch of a remote, fetched by URL."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        return run_git(list(args), cwd=self.path, timeout=self.timeout, stdin=stdin)

    @staticmethod
    def default_branch(url: str, timeout: float) -> str:
        """The branch the remote's HEAD names (what ``git clone`` would check out)."""
        out = run_git(["ls-remote", "--symref", "--", url, "HEAD"], timeout=timeout)
        for line in out.decode("utf-8", "replace").splitlines():
            if line.startswith("ref: refs/heads/"):
                return line.split("\t")[0].removeprefix("ref: refs/heads/")
        raise SourceError(f"{redact(url)} has no default branch (an empty repository?)")

    @staticmethod
    def branches(url: str, timeout: float) -> list[str]:
        out = run_git(["ls-remote", "--heads", "--", url], timeout=timeout)
        return sorted(
            line.split("\t")[1].removeprefix("refs/heads/")
            for line in out.decode("utf-8", "replace").splitlines()
            if "\t" in line
        )

    def init(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._git("init", "--bare", "--quiet")

    def fetch(self, url: str, branch: str) -> str:
        """Fetch ``branch`` of ``url`` (history rewritten or not); its commit.

        ``--update-shallow``: a shallow remote (a CI checkout, ``clone --depth 1``) is
        fetched as deep as it is. Without it Git refused the branch with only a warning
        ("shallow roots are not allowed to be updated") and exited 0."""
        self._git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--force",
            "--update-shallow",
            "--",
            url,
            f"+refs/heads/{branch}:{_REF}",
        )
        return self._git("rev-parse", "--verify", f"{_REF}^{{commit}}").decode().strip()

    def is_shallow(self) -> bool:
        """Whether the history fetched stops short (the remote was a shallow clone)."""
        return self._git("rev-parse", "--is-shallow-repository").strip() == b"true"

    def has_commit(self, commit: str) -> bool:
        try:
            self._git("cat-file", "-e", f"{commit}^{{commit}}")
        except SourceError:
            return False
        return True

    def is_ancestor(self, old: str, new: str) -> bool:
        """True when ``old`` is in ``new``'s history (not so after a force-push)."""
        try:
            self._git("merge-base", "--is-ancestor", old, new)
        except _GitFailed as exc:
            if exc.code == 1:
                return False
            raise
        return True

    def tree(self, commit: str, subdir: str) -> list[Entry]:
        """Every file of ``commit`` under ``subdir`` (paths relative to it)."""
        spec = f"{commit}:{subdir}" if subdir else commit
        try:
            out = self._git("ls-tree", "-r", "-z", spec)
        except _GitFailed as exc:
            raise SourceError(f"no folder {subdir!r} in commit {commit[:12]}") from exc
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, blob = meta.decode().split(" ")
            entries.append(Entry(mode, blob, path.decode("utf-8", "surrogateescape")))
        return entries

    def entries(self, commit: str, paths: Sequence[str]) -> dict[str, Entry]:
        """The files of ``commit`` at exactly ``paths`` (from the repository's root), by
        path; a path that is no file there is left out."""
        if not paths:
            return {}
        out = self._git("ls-tree", "-z", "--full-tree", commit, "--", *paths)
        found: dict[str, Entry] = {}
        for record in out.split(b"\0"):
            meta, _, path = record.partition(b"\t")
            fields = meta.decode().split(" ")
            if len(fields) == 3 and fields[1] == "blob":
                name = path.decode("utf-8", "surrogateescape")
                found[name] = Entry(fields[0], fields[2], name)
        return found

    def diff(self, old: str, new: str, subdir: str) -> list[Change]:
        """What changed under ``subdir`` from ``old`` to ``new``, renames found."""
        args = ["diff-tree", "-r", "-z", "-M", "--no-commit-id", "--no-ext-diff"]
        if subdir:
            args.append(f"--relative={subdir}/")
        fields = self._git(*args, old, new).split(b"\0")
        changes, i = [], 0
        while i < len(fields) and fields[i]:
            _old_mode, mode, _old_blob, blob, status = fields[i].decode().lstrip(":").split(" ")
            path = fields[i + 1].decode("utf-8", "surrogateescape")
            if status[0] in "RC":
                target = fields[i + 2].decode("utf-8", "surrogateescape")
                old_path = path if status[0] == "R" else None
                changes.append(Change(status[0] if old_path else "A", target, mode, blob, old_path))
                i += 3
            else:
                changes.append(Change(status[0], path, mode, blob))
                i += 2
        return changes

    def sizes(self, ids: list[str]) -> dict[str, int]:
        """The size in bytes of each blob of ``ids``, read in one ``cat-file --batch-check``
        (nothing is read of the blobs themselves)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        out = self._git("cat-file", "--batch-check", stdin=("\n".join(unique) + "\n").encode())
        sizes: dict[str, int] = {}
        for line in out.decode().splitlines():
            fields = line.split(" ")
            if len(fields) == 3 and fields[2].isdigit():
                sizes[fields[0]] = int(fields[2])
        return sizes

    def blobs(self, ids: list[str]) -> dict[str, bytes]:
        """The contents of the blobs ``ids``, read in one ``cat-file --batch``."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        out = self._git("cat-file", "--batch", stdin=("\n".join(unique) + "\n").encode())
        found: dict[str, bytes] = {}
        at = 0
        for blob in unique:
            end = out.index(b"\n", at)
            header = out[at:end].decode().split(" ")
            if len(header) < 3:  # "<id> missing"
                raise SourceError(f"object {blob} is missing from the repository")
            size = int(header[2])
            found[blob] = out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        return found
