"""Knowledge documents: a Markdown file with optional YAML frontmatter.

A file that cannot become a document raises ``DocumentError`` with the reason; the
caller reports it and goes on with the rest.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from superbiz.exceptions import DocumentError

DEFAULT_DOMAIN = "general"
_KNOWN_KEYS = ("title", "category", "covers", "when_to_retrieve", "tags")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One parsed knowledge document; ``path`` (relative, POSIX) is its identity."""

    path: str
    title: str
    domain: str
    body: str
    content_hash: str
    size_bytes: int
    covers: tuple[str, ...] = ()
    when_to_retrieve: str | None = None
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    #: where ``covers`` and ``when_to_retrieve`` came from: frontmatter, llm or derived
    origin: dict[str, str] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """What the relational store keeps besides the columns."""
        return {
            "covers": list(self.covers),
            "when_to_retrieve": self.when_to_retrieve,
            "tags": list(self.tags),
            "aliases": list(self.aliases),
            "extra": self.extra,
            "origin": self.origin,
        }


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_document(file: Path, root: Path, max_bytes: int) -> SourceDocument:
    """Read and parse ``file``; ``root`` decides its relative path and default domain."""
    relative = PurePosixPath(file.resolve().relative_to(root.resolve()).as_posix())
    label = str(relative)
    size = file.stat().st_size
    if size > max_bytes:
        raise DocumentError(label, f"too large: {size} bytes exceeds the {max_bytes}-byte limit")
    data = file.read_bytes()
    return parse_document(data, relative)


def parse_document(data: bytes, relative: PurePosixPath) -> SourceDocument:
    """Parse raw bytes of a document whose path relative to the KB root is ``relative``."""
    label = str(relative)
    if not data.strip():
        raise DocumentError(label, "empty file")
    if b"\x00" in data[:8192]:
        raise DocumentError(label, "binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(label, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    front, body = split_frontmatter(text, label)
    if not body.strip():
        raise DocumentError(label, "no content after the frontmatter")

    title = _str_field(front, "title", label) or first_heading(body) or relative.stem
    domain = _str_field(front, "category", label) or (
        relative.parts[0] if len(relative.parts) > 1 else DEFAULT_DOMAIN
    )
    aliases = _list_field(front, "aliases", label)
    return SourceDocument(
        path=label,
        title=title.strip(),
        domain=normalize_domain(domain),
        body=body,
        content_hash=content_hash(data),
        size_bytes=len(data),
        covers=_list_field(front, "covers", label),
        when_to_retrieve=_str_field(front, "when_to_retrieve", label),
        tags=_list_field(front, "tags", label),
        aliases=(*aliases, relative.stem) if relative.stem not in aliases else aliases,
        extra=_json_safe({k: v for k, v in front.items() if k not in (*_KNOWN_KEYS, "aliases")}),
    )


def normalize_domain(domain: str) -> str:
    """Domains are compared lower-case with inner spaces as hyphens: ``Payment Ops`` →
    ``payment-ops``."""
    return "-".join(domain.strip().lower().split()) or DEFAULT_DOMAIN


def split_frontmatter(text: str, label: str = "<text>") -> tuple[dict[str, Any], str]:
    """``(frontmatter, body)``; a document without frontmatter has ``{}``.

    >>> split_frontmatter("---\\ntitle: A\\n---\\n# Body\\n")
    ({'title': 'A'}, '# Body\\n')
    """
    if not text.startswith("---\n") and text.strip() != "---":
        return {}, text
    lines = text.split("\n")
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        raise DocumentError(label, "malformed frontmatter: no closing '---' line")
    raw = "\n".join(lines[1:end])
    try:
        front = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        raise DocumentError(label, f"malformed frontmatter: {_yaml_problem(exc)}") from exc
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise DocumentError(label, "malformed frontmatter: expected a mapping of keys")
    return {str(k): v for k, v in front.items()}, "\n".join(lines[end + 1 :])


def first_heading(body: str) -> str | None:
    in_fence = False
    for line in body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and (match := _HEADING.match(line)):
            return match.group(1)
    return None


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """YAML gives dates and other non-JSON values; the store keeps their text form."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    return f"{problem} (line {mark.line + 2})" if mark is not None else str(problem)


def _str_field(front: dict[str, Any], key: str, label: str) -> str | None:
    value = front.get(key)
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value).strip() or None
    raise DocumentError(
        label, f"frontmatter field {key!r} must be text, got {type(value).__name__}"
    )


def _list_field(front: dict[str, Any], key: str, label: str) -> tuple[str, ...]:
    value = front.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        items = [part for part in re.split(r"[,，;；]", value)]
    elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        items = [str(v) for v in value]
    else:
        raise DocumentError(label, f"frontmatter field {key!r} must be a list of texts")
    return tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
