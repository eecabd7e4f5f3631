"""Embedders: the real USE model and OpenAI-compatible endpoints (fake servers)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from fakes.openai_server import FakeOpenAIServer, error_reply, fake_embedding
from superbiz.config import EmbeddingConfig
from superbiz.exceptions import EmbeddingError
from superbiz.retrieval.embedders import (
    Embedder,
    OpenAIEmbedder,
    USEEmbedder,
    make_embedder,
    unit_rows,
)

TEXTS = ["支付失败怎么办", "Redis connection pool exhausted", "API 限流 429", "hello"]


def _openai(base_url: str, **settings: Any) -> OpenAIEmbedder:
    values: dict[str, Any] = {"provider": "openai", "base_url": base_url, "model": "fake-embed"}
    return OpenAIEmbedder(EmbeddingConfig(**(values | settings)))


def _assert_unit_rows(rows: np.ndarray, n: int, dim: int) -> None:
    assert rows.dtype == np.float32
    assert rows.shape == (n, dim)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


# -- unit_rows -------------------------------------------------------------------------------


def test_unit_rows_normalises_and_rejects_zero_rows() -> None:
    rows = unit_rows(np.array([[3.0, 4.0], [0.0, 2.0]]))
    _assert_unit_rows(rows, 2, 2)
    np.testing.assert_allclose(rows[0], [0.6, 0.8])
    with pytest.raises(EmbeddingError, match="zero or non-finite"):
        unit_rows(np.array([[0.0, 0.0]]))
    with pytest.raises(EmbeddingError, match="zero or non-finite"):
        unit_rows(np.array([[np.nan, 1.0]]))
    with pytest.raises(EmbeddingError, match="2-d"):
        unit_rows(np.array([1.0, 2.0]))


# -- USE ----------------------------------------------------------------------------------------


def test_use_rows_are_unit_norm_float32_512(use_embedder: USEEmbedder) -> None:
    rows = use_embedder.embed(TEXTS)
    _assert_unit_rows(rows, len(TEXTS), 512)
    assert use_embedder.dimension == 512
    assert use_embedder.name == "use-multilingual-v3"
    assert use_embedder.check() == 512


def test_use_query_vector_and_empty_input(use_embedder: USEEmbedder) -> None:
    query = use_embedder.embed_query("支付失败怎么办")
    assert query.shape == (512,) and query.dtype == np.float32
    np.testing.assert_allclose(query, use_embedder.embed(["支付失败怎么办"])[0], atol=1e-6)
    empty = use_embedder.embed([])
    assert empty.shape == (0, 512) and empty.dtype == np.float32


def test_use_is_cross_lingual(use_embedder: USEEmbedder) -> None:
    zh, en, other = use_embedder.embed(["支付失败", "payment failed", "今天天气很好"])
    assert float(zh @ en) > float(zh @ other)


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


def test_use_in_two_threads_gives_the_rows_of_one_call(use_embedder: USEEmbedder) -> None:
    texts = [f"{text} {i}" for i in range(6) for text in TEXTS]
    alone = use_embedder.embed(texts)
    with ThreadPoolExecutor(max_workers=2) as pool:
        halves = list(pool.map(use_embedder.embed, [texts[:12], texts[12:]]))
    np.testing.assert_allclose(np.concatenate(halves), alone, atol=1e-6)


def test_use_pins_the_process_blas_threads_for_good(use_embedder: USEEmbedder) -> None:
    """No call restores OpenBLAS's thread-per-core default: its idle workers spun between
    calls and doubled the CPU time of an ingest."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        pinned = USEEmbedder(threads=1)
        assert _blas_threads() == 1
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(pinned.embed, [TEXTS, TEXTS[::-1], TEXTS]))
        assert _blas_threads() == 1


def test_make_embedder_defaults_to_use() -> None:
    assert EmbeddingConfig().provider == "use"
    with pytest.raises(EmbeddingError, match="base-url is empty"):
        make_embedder(EmbeddingConfig(provider="openai"))


# -- OpenAI-compatible endpoint: the strict fake server ----------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(embedding_dim=48) as server:
        yield server


def test_openai_base_url_and_model(fake: FakeOpenAIServer) -> None:
    embedder = _openai(fake.base_url, model="bge-m3")
    rows = embedder.embed(TEXTS)
    _assert_unit_rows(rows, len(TEXTS), 48)
    assert embedder.name == "bge-m3"
    [request] = fake.recorded
    assert request.path == "/v1/embeddings"
    assert request.body["model"] == "bge-m3"
    assert request.body["input"] == TEXTS
    assert "dimensions" not in request.body
    for text, row in zip(TEXTS, rows, strict=True):  # rows in input order
        np.testing.assert_allclose(row, fake_embedding(text, 48), atol=1e-6)


def test_openai_dimensions_are_honoured(fake: FakeOpenAIServer) -> None:
    embedder = _openai(fake.base_url, dimensions=24)
    _assert_unit_rows(embedder.embed(TEXTS), len(TEXTS), 24)
    assert embedder.dimension == 24
    assert all(body["dimensions"] == 24 for body in fake.embedding_requests)


def test_openai_batches_over_batch_size(fake: FakeOpenAIServer) -> None:
    texts = [f"text number {i}" for i in range(7)]
    rows = _openai(fake.base_url, batch_size=3).embed(texts)
    _assert_unit_rows(rows, 7, 48)
    assert [body["input"] for body in fake.embedding_requests] == [
        texts[0:3],
        texts[3:6],
        texts[6:7],
    ]
    for text, row in zip(texts, rows, strict=True):
        np.testing.assert_allclose(row, fake_embedding(text, 48), atol=1e-6)


def test_openai_sends_the_api_key() -> None:
    with FakeOpenAIServer(api_key="sk-test", embedding_dim=8) as server:
        assert _openai(server.base_url, api_key="sk-test").embed(["x"]).shape == (1, 8)
        with pytest.raises(EmbeddingError, match="failed"):
            _openai(server.base_url, api_key="wrong").embed(["x"])


def test_openai_server_error_is_an_embedding_error(fake: FakeOpenAIServer) -> None:
    fake.script_embeddings(error_reply(400, "model 'nope' not found"))
    with pytest.raises(EmbeddingError) as info:
        _openai(fake.base_url).embed(["x"])
    message = str(info.value)
    assert fake.base_url in message and "not found" in message


def test_dead_endpoint_is_a_clear_embedding_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    embedder = _openai(base_url, timeout_s=2)
    with pytest.raises(EmbeddingError) as info:
        embedder.embed(["x"])
    message = str(info.value)
    assert message.startswith(f"embedding endpoint {base_url} failed")
    assert "connection" in message.lower()
    with pytest.raises(EmbeddingError):
        _ = embedder.dimension


# -- OpenAI-compatible endpoint: a misbehaving server -----------------------------------------


@contextmanager
def _server(answer: Callable[[list[str]], list[dict[str, Any]]]) -> Iterator[str]:
    """A tiny ``/v1/embeddings`` server whose ``data`` list is ``answer(inputs)``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
            payload = json.dumps(
                {
                    "object": "list",
                    "model": body["model"],
                    "data": answer(inputs),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _items(vectors: list[list[float]]) -> list[dict[str, Any]]:
    return [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]


def test_non_unit_vectors_are_normalised(caplog: pytest.LogCaptureFixture) -> None:
    def scaled_and_shuffled(inputs: list[str]) -> list[dict[str, Any]]:
        vectors = [[3.0 * x for x in fake_embedding(text, 16)] for text in inputs]
        return list(reversed(_items(vectors)))  # out of order: ``index`` decides

    with _server(scaled_and_shuffled) as base_url:
        embedder = _openai(base_url)
        with caplog.at_level(logging.WARNING, logger="superbiz.retrieval.embedders"):
            assert embedder.dimension == 16
        assert "norm 3.0000" in caplog.text and "normalising" in caplog.text
        rows = embedder.embed(TEXTS)
    _assert_unit_rows(rows, len(TEXTS), 16)
    for text, row in zip(TEXTS, rows, strict=True):
        np.testing.assert_allclose(row, fake_embedding(text, 16), atol=1e-6)


def test_wrong_number_of_vectors_is_an_error() -> None:
    with (
        _server(lambda inputs: _items([[1.0, 0.0]])) as base_url,
        pytest.raises(EmbeddingError, match="returned 1 vectors for 3 texts"),
    ):
        _openai(base_url).embed(["a", "b", "c"])


def test_zero_vector_is_an_error() -> None:
    with _server(lambda inputs: _items([[0.0, 0.0, 0.0] for _ in inputs])) as base_url:
        embedder = _openai(base_url)
        with pytest.raises(EmbeddingError, match="zero or non-finite"):
            embedder.embed(["a"])
        with pytest.raises(EmbeddingError, match="zero or non-finite"):
            embedder.check()


def test_ragged_vectors_are_an_error() -> None:
    with (
        _server(lambda inputs: _items([[1.0, 0.0], [1.0, 0.0, 0.0]])) as base_url,
        pytest.raises(EmbeddingError, match="different lengths"),
    ):
        _openai(base_url).embed(["a", "b"])


class _Doubling(Embedder):
    """A minimal custom embedder: the interface normalises whatever ``_embed_raw`` returns."""

    name = "doubling"

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        return np.array([[2.0, float(len(t)), 1.0] for t in texts])


def test_the_interface_normalises_any_embedder() -> None:
    embedder = _Doubling()
    _assert_unit_rows(embedder.embed(["a", "bbb"]), 2, 3)
    assert embedder.dimension == 3
