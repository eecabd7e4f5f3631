"""Fixtures for the HTTP service tests: real USE, Milvus Lite, SQLite, extractive model.

``chat_assistant`` serves the small KB read-only for the whole session (tests use fresh
session ids); tests that change documents build their own with ``make_assistant``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import ServiceSettings, Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.base import ChatModel


@pytest.fixture(scope="session")
def make_assistant(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Any, kb_writer: Callable[..., Path]
) -> Iterator[Callable[..., Runtime]]:
    """``make(model=None, **settings)`` → a Runtime over a fresh data dir holding the small
    KB, answering with ``model`` (extractive by default)."""
    opened: list[Runtime] = []

    def make(model: ChatModel | None = None, **overrides: Any) -> Runtime:
        root = tmp_path_factory.mktemp("api-kb")
        folder = kb_writer(root / "kb")
        settings = Settings(data_dir=root / "data", **overrides)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        assistant = open_runtime(settings, kb=kb, model=model or ExtractiveChatModel())
        Ingestor(kb, domains=assistant.domains).ingest([folder])
        opened.append(assistant)
        return assistant

    yield make
    for assistant in opened:
        assistant.close()


@pytest.fixture(scope="session")
def chat_assistant(make_assistant: Callable[..., Runtime]) -> Runtime:
    return make_assistant()


@pytest.fixture(scope="session")
def chat_app(chat_assistant: Runtime) -> FastAPI:
    return create_app(chat_assistant.settings, assistant=chat_assistant, warm_up=False)


@pytest.fixture
def client(chat_app: FastAPI) -> TestClient:
    """Not a context manager: the lifespan (warm-up, close) is not what these test."""
    return TestClient(chat_app, raise_server_exceptions=False)


@pytest.fixture(scope="session")
def with_api_key() -> Callable[[Settings, str], Settings]:
    """``with_api_key(settings, key)`` → the same settings with ``service.api-key`` set."""

    def make(settings: Settings, key: str) -> Settings:
        return settings.model_copy(update={"service": ServiceSettings(api_key=key)})

    return make


@pytest.fixture(scope="session")
def sse_events() -> Callable[[str], list[tuple[str, dict[str, Any], int]]]:
    return parse_sse


def parse_sse(text: str) -> list[tuple[str, dict[str, Any], int]]:
    """``(event, data, id)`` for each block of an SSE body."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            fields[name] = value
        if "event" not in fields:  # a comment (keep-alive)
            continue
        events.append((fields["event"], json.loads(fields["data"]), int(fields["id"])))
    return events
