"""The reference pages of the documentation site, generated from the code so they cannot
drift: every setting from the settings model, every command from the Typer app, the HTTP
API from the app's OpenAPI document and the MCP tools from their schemas.

Each generator returns Markdown (MyST, as the site reads it); the site's Sphinx extension
(``docs/_ext/superbiz_docs.py``) puts it where a page says
``<!-- reference: NAME -->``; ``GENERATORS`` names them.
"""

from __future__ import annotations

from collections.abc import Callable

from superbiz.reference.commands import commands_markdown
from superbiz.reference.http import http_markdown
from superbiz.reference.mcp import mcp_markdown
from superbiz.reference.settings import (
    advanced_settings_markdown,
    settings_yaml,
    user_settings_markdown,
)

#: the markers a page may hold, and what fills each
GENERATORS: dict[str, Callable[[], str]] = {
    "settings": user_settings_markdown,
    "settings-yaml": settings_yaml,
    "settings-advanced": advanced_settings_markdown,
    "commands": commands_markdown,
    "http": http_markdown,
    "mcp": mcp_markdown,
}


__all__ = ["GENERATORS"]
