"""The base of every settings section: hyphens and underscores alike, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


def _hyphenate(name: str) -> str:
    return name.replace("_", "-")


class _Section(BaseModel):
    """A settings section: accepts ``some-key`` and ``some_key`` alike, rejects unknown keys."""

    model_config = ConfigDict(
        alias_generator=_hyphenate, populate_by_name=True, extra="forbid", frozen=True
    )
