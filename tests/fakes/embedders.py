"""Deterministic embedders for tests that must not load a real model.

``TableEmbedder`` returns chosen vectors, so a test sets exact cosines;
``KeywordEmbedder`` counts a few keywords, so ingested documents about the same
keyword land close together; ``CountingEmbedder`` wraps a real one and counts what it
embeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from superbiz._text import normalize
from superbiz.retrieval.embedders import Embedder


class TableEmbedder(Embedder):
    """``vectors[text]`` for a known text, else the last axis (orthogonal to the rest)."""

    name = "table-test"

    def __init__(self, vectors: Mapping[str, Sequence[float]], dimension: int) -> None:
        self._vectors = {text: np.asarray(v, dtype=np.float32) for text, v in vectors.items()}
        self._other = np.eye(dimension, dtype=np.float32)[-1]

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors.get(text, self._other) for text in texts])


class KeywordEmbedder(Embedder):
    """One axis per keyword (its occurrences in the text) plus a small constant axis."""

    name = "keyword-test"

    def __init__(self, keywords: Sequence[str], background: float = 0.1) -> None:
        self._keywords = [normalize(k) for k in keywords]
        self._background = background

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        rows = [
            [*(float(normalize(text).count(k)) for k in self._keywords), self._background]
            for text in texts
        ]
        return np.asarray(rows, dtype=np.float32)


class CountingEmbedder:
    """``inner``, counting the texts it embeds (queries are not counted)."""

    def __init__(self, inner: Embedder, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.dimension = inner.dimension
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)
