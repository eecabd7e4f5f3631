"""The HTTP service: JSON and SSE chat, documents, the knowledge map, a web page.

It sits on top of the agents (``Runtime``); nothing below it knows it exists.
"""

from superbiz.api.app import create_app

__all__ = ["create_app"]
