"""Fixtures for the chat-model tests: a fresh strict fake OpenAI server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server
