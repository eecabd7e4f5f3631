"""The gate's self-checks: before a store uses an acceleration, it is compared with Lite's
own code on a small case, once per process.

``self_check`` analyses sample texts both ways (block cache and Lite's jieba analysis)
and scores a tiny segment both ways (``VectorizedBm25`` and Lite's BM25);
``search_check`` builds a small collection through every case the live-row masks must
get right and compares ``search_dense``/``search_bm25``/``query_live`` with Lite's
searches and queries after each change, and Lite's graphs searched through a filter
with ``graph_search``. A disagreement (a Lite upgrade) is said once, and
the gate leaves that work to Lite's own code.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from superbiz import _text
from superbiz._cache import cache_root, private
from superbiz.retrieval._lite.bm25 import SparseInvertedIndex, VectorizedBm25
from superbiz.retrieval._lite.graphs import graph_search
from superbiz.retrieval._lite.ingest import cache_analysis
from superbiz.retrieval._lite.live_rows import LiveRows
from superbiz.retrieval._lite.search import (
    collection_search,
    query_live,
    search_bm25,
    search_dense,
)

#: the gate logs under one name, whichever of its modules speaks
log = logging.getLogger(__package__)


#: the Milvus Lite minor version the self-check and the patches were written for
LITE_SERIES = "3.2"
#: texts the self-check analyses and scores: CJK, Latin, digits, symbols, repeats
CHECK_TEXTS = (
    "## TiKV 如何扩容？是否需要重启，the Region 的 leader 吗",
    "Payment gateway timeout: check the Redis pool (redis-cli info clients); 连接池耗尽时重试。",
    "支付回调超时 支付回调超时 payment-gateway v1.2.3 50% C++ C# a&b 3.14 -- ``` **bold**",
    "libstdc++ AT&T's c#-style x86_64 v1.2% (https://example.com/a?b=c&d=1) 'q' \"dq\" \r\n",
    "Redis 连接池耗尽 redis pool exhausted, 连接池 连接池 重试 retry",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　中文　全角 émigré naïve 🙂 \t\n\n",
    "",
)
CHECK_QUERIES = ("Redis 连接池 耗尽", "支付回调超时 payment", "TiKV 扩容 leader", "无关 words")


#: self-check verdicts by analyzer parameters, each as ``verdict_once`` keeps it
_verdicts: dict[str, list[str | None]] = {}
#: the search check's verdict, once per process (empty: not run yet)
_search_verdict: list[str | None] = []


def self_check(analyzer: dict[str, Any] | None) -> str | None:
    """None when this Lite scores and analyses as the accelerations assume, else what
    differed (logged once per process and analyzer). Run once per analyzer: a store
    that opens again reuses the verdict, and a pass is kept for the next processes of
    the same installation (``_passed_before``): its Lite analysis loaded jieba's
    dictionary, 0.8 s of an ingest that found every file unchanged."""
    key = repr(analyzer)
    return verdict_once(
        _verdicts.setdefault(key, []),
        lambda: _disagreement(analyzer),
        f"Milvus Lite {_lite_version()} differs from what superbiz expects (written for "
        f"{LITE_SERIES}.x): %s; using the pymilvus client only (slower, same results)",
        kept=f"self-{hashlib.sha256(key.encode()).hexdigest()[:8]}",
    )


def verdict_once(
    verdict: list[str | None], check: Callable[[], str | None], warning: str, kept: str
) -> str | None:
    """What ``check`` found, worked out once per process into ``verdict`` (empty until
    then): None where an acceleration does what Lite's own code does, else what differed,
    logged once as ``warning`` (its ``%s`` the difference). A check that fails disagrees:
    Lite's own code still works. A pass is kept for the next processes of the same
    installation under the name ``kept`` (``_passed_before``)."""
    if not verdict and _passed_before(kept):
        verdict.append(None)
    if not verdict:
        try:
            verdict.append(check())
        except Exception as exc:  # Lite reorganised
            verdict.append(f"the check could not run ({type(exc).__name__}: {exc})")
        if verdict[0] is None:
            _keep_pass(kept)
        else:
            log.warning(warning, verdict[0])
    return verdict[0]


def _lite_version() -> str:
    try:
        from importlib.metadata import version

        return version("milvus-lite")
    except Exception:
        return "(unknown version)"


def _disagreement(params: dict[str, Any] | None) -> str | None:
    if SparseInvertedIndex is None:
        return "no SparseInvertedIndex in milvus_lite.index.sparse_inverted"
    from milvus_lite.analyzer.factory import create_analyzer
    from milvus_lite.analyzer.sparse import sparse_to_bytes

    plain, cached = create_analyzer(params), create_analyzer(params)
    cache_analysis(cached)
    for text in (*CHECK_TEXTS, *CHECK_TEXTS, " ".join(CHECK_TEXTS)):  # twice: the cache
        if cached.analyze(text) != plain.analyze(text):
            return f"jieba block cache gives other term ids for {text[:40]!r}"
    corpus = [{int(t): float(n) for t, n in Counter(plain.analyze(t)).items()} for t in CHECK_TEXTS]
    queries = [{int(t): 1.0 for t in plain.analyze(q)} for q in CHECK_QUERIES]
    lite = SparseInvertedIndex()
    lite.build(corpus)
    # from Lite's index, and from the rows as Lite stores them (packed bytes)
    stored: list[bytes | dict[int, float] | None] = [sparse_to_bytes(v) for v in corpus]
    for fast in (
        VectorizedBm25.from_index(lite),
        VectorizedBm25.of_rows(stored, k1=lite.k1, b=lite.b),
    ):
        for valid in (None, np.array([i % 2 == 0 for i in range(len(corpus))])):
            lite_ids, lite_distances = lite.search(queries, len(corpus), valid_mask=valid)
            fast_ids, fast_distances = fast.search(queries, len(corpus), valid_mask=valid)
            if not np.allclose(fast_distances, lite_distances, rtol=1e-6) or not np.array_equal(
                _by_id(fast_ids, fast_distances), _by_id(lite_ids, lite_distances)
            ):
                return "VectorizedBm25 scores a test segment otherwise than Lite's BM25"
    return None


def _by_id(ids: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Each query's (id, rounded distance) pairs in id order: ties may come in any order."""
    rows = []
    for row_ids, row_distances in zip(ids.tolist(), distances.tolist(), strict=True):
        rows.append(sorted(zip(row_ids, np.round(row_distances, 5).tolist(), strict=True)))
    return np.asarray(rows, dtype=np.float64)


def search_check() -> str | None:
    """None when ``search_dense``/``search_bm25``/``query_live`` return what Lite's own
    searches and queries return on a small collection through every case the live-row
    masks must get right, else what differed (logged once per process; searches and
    queries then go through Lite's own code). A pass is kept for the next processes of
    the same installation (``_passed_before``): the check took 0.5 s of every
    ``superbiz ask`` and ``lookup``, about an eighth of it."""
    return verdict_once(
        _search_verdict,
        _search_disagreement,
        f"Milvus Lite {_lite_version()} searches otherwise than superbiz's live-row search "
        f"expects (written for {LITE_SERIES}.x): %s; using Lite's own searches and queries "
        "(slower, same results)",
        kept="search",
    )


def _passed_before(name: str) -> bool:
    """Whether check ``name`` passed on this installation before, in a process of this
    user (a marker in a folder only this user can write: ``superbiz._cache``)."""
    try:
        marker = _pass_marker(name)
        return marker is not None and marker.is_file() and private(marker.parent)
    except (OSError, RuntimeError, metadata.PackageNotFoundError):
        return False


def _keep_pass(name: str) -> None:
    """Leave the marker ``_passed_before`` looks for; a cache that cannot be written
    costs the next process the check, nothing else."""
    try:
        marker = _pass_marker(name)
        if marker is not None:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
    except (OSError, RuntimeError, metadata.PackageNotFoundError) as exc:
        log.debug("the %s check's pass is not kept: %s", name, exc)


def _pass_marker(name: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / f"lite-{name}-check-{_installation()}.passed"


@functools.cache
def _installation() -> str:
    """What a kept pass holds for: Milvus Lite as installed (its RECORD lists every file
    with its hash), this gate's source and ``superbiz._text``'s, the array libraries both
    compute with, jieba (Lite's analyzer cuts with it), Python.

    >>> len(_installation())
    16
    """
    parts = [sys.version]
    for name in ("milvus-lite", "numpy", "pyarrow", "jieba"):
        distribution = metadata.distribution(name)
        parts += [distribution.version, distribution.read_text("RECORD") or ""]
    digest = hashlib.sha256("\0".join(parts).encode())
    # the gate's modules, and the words it cuts without jieba's dictionary (``_text``)
    for source in [*sorted(Path(__file__).parent.glob("*.py")), Path(_text.__file__)]:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def check_schema(*fields: Any) -> Any:
    """The schema of the checks' collections, superbiz's in small: a key, ``fields``, a
    text analysed as the store's BM25 analyses it, a 4-d vector and the text's sparse
    vector."""
    from milvus_lite.schema.types import (
        CollectionSchema,
        DataType,
        FieldSchema,
        Function,
        FunctionType,
    )

    return CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            *fields,
            FieldSchema(
                "text",
                DataType.VARCHAR,
                max_length=512,
                enable_analyzer=True,
                analyzer_params={"tokenizer": "jieba"},
            ),
            FieldSchema("dense", DataType.FLOAT_VECTOR, dim=4),
            FieldSchema("sparse", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
        ],
        functions=[Function("bm25", FunctionType.BM25, ["text"], ["sparse"])],
    )


def _search_disagreement() -> str | None:
    from milvus_lite.engine.collection import Collection
    from milvus_lite.schema.types import DataType, FieldSchema

    problem = _graph_disagreement()
    if problem is not None:
        return problem

    schema = check_schema(FieldSchema("domain", DataType.VARCHAR, max_length=64))
    rng = np.random.default_rng(36)
    probes = rng.standard_normal((4, 4)).astype(np.float32)

    def rows(first: int, last: int, version: int) -> list[dict[str, Any]]:
        # every fifth row repeats a probe: equal distances across segments (ties)
        return [
            {
                "id": f"r{i}",
                "domain": "ab"[i % 2],
                "text": f"{CHECK_TEXTS[i % 4]} {i} v{version}",
                "dense": (probes[i % 4] if i % 5 == 0 else rng.standard_normal(4)).tolist(),
            }
            for i in range(first, last)
        ]

    with tempfile.TemporaryDirectory(prefix="superbiz-lite-check-") as folder:
        collection = Collection("check", folder, schema)
        try:
            # brute force, as ``search_dense`` searches a segment through a filter: Lite's
            # HNSW through a filter is what it replaces (``_lite.search``), not a reference
            collection.create_index("dense", {"index_type": "FLAT", "metric_type": "L2"})
            collection.create_index("domain", {"index_type": "INVERTED"})
            collection.create_index(
                "sparse", {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25"}
            )
            collection.load()
            live = LiveRows(collection)
            steps: list[Callable[[], object]] = [
                lambda: collection.insert(rows(0, 30, 0)),
                collection.flush,
                lambda: collection.insert(rows(20, 45, 1)),  # newer versions, memtable
                lambda: collection.delete(["r3", "r22", "r40"]),  # pending deletes
                collection.flush,
                lambda: collection.insert(rows(40, 55, 2)),
                lambda: collection.delete(["r5", "r44", "r50"]),
            ]
            for number, step in enumerate(steps):
                step()
                # Lite compacts and indexes in the background after a flush: both searches
                # must see the same segments and indexes (a segment searched by brute force
                # by one and by HNSW by the other gives other float roundings)
                collection._wait_for_bg()
                problem = _searches_differ(collection, live, probes, number)
                if problem is not None:
                    return problem
        finally:
            collection.close()
    return None


def _graph_disagreement() -> str | None:
    """What differs between Lite's own search of its graphs through a filter and
    ``graph_search`` (the filter as a bitmap), on a graph of each kind Lite builds for a
    Lite file: a few hundred rows, filters admitting most, half, a few and one of them,
    limits below and above what they admit."""
    from milvus_lite.index.faiss_hnsw import FaissHnswIndex
    from milvus_lite.index.faiss_hnsw_sq import FaissHnswSqIndex

    rng = np.random.default_rng(35)
    rows = rng.standard_normal((300, 8)).astype(np.float32)
    masks = [rng.random(300) < share for share in (0.95, 0.5, 0.02)]
    masks.append(np.arange(300) == 7)
    for kind in (FaissHnswIndex, FaissHnswSqIndex):
        graph = kind.build(rows, "L2", {"M": 8, "efConstruction": 40})
        for mask in masks:
            for limit in (1, 10, 40):
                for query in rows[:3] + 0.1:
                    point = query.reshape(1, -1)
                    ours = graph_search(graph, point, limit, mask)
                    lites = graph.search(point, limit, valid_mask=mask)
                    if not (
                        np.array_equal(ours[0], lites[0])
                        and np.allclose(ours[1], lites[1], 1e-5, 1e-5)
                    ):
                        return f"a filtered graph search differs ({kind.__name__}, {limit})"
    return None


def _same_hits(ours: list[dict[str, Any]], lites: list[dict[str, Any]]) -> bool:
    """The same hits in the same order, distances equal to float rounding (``search_dense``
    computes an L2 distance in one matrix product, Lite row by row)."""
    return [(h["id"], h["entity"]) for h in ours] == [(h["id"], h["entity"]) for h in lites] and (
        np.allclose([h["distance"] for h in ours], [h["distance"] for h in lites], 1e-5, 1e-5)
    )


def _searches_differ(collection: Any, live: LiveRows, probes: np.ndarray, step: int) -> str | None:
    """What differs between Lite's searches and the live-row ones after ``step``."""
    for limit in (3, 60):
        for expr in (None, 'domain == "a"'):
            for probe in probes[:2]:
                args = (probe.tolist(), "dense", "L2", limit, expr, ["domain", "text"])
                if not _same_hits(search_dense(live, *args), collection_search(collection, *args)):
                    return f"a dense search differs after step {step} ({limit}, {expr})"
            for query in CHECK_QUERIES[:2]:
                args = (query, "sparse", "BM25", limit, expr, ["domain", "text", "dense"])
                expected = collection_search(collection, *args)
                if search_bm25(live, *args) != expected:
                    return f"a BM25 search differs after step {step} ({limit}, {expr})"
        for expr in (None, 'domain == "a"', 'id in ["r3", "r21", "r44", "r52"]'):
            for fields in (["domain"], ["id", "text", "dense"]):
                expected = collection.query(expr=expr, output_fields=fields, limit=limit)
                if query_live(live, expr, fields, limit) != expected:
                    return f"a query differs after step {step} ({limit}, {expr}, {fields})"
    for expr in (None, 'domain == "a"'):  # every row (the store reads all it matches)
        if query_live(live, expr, ["id", "dense"], None) != collection.query(
            expr=expr, output_fields=["id", "dense"], limit=None
        ):
            return f"a query of every row differs after step {step} ({expr})"
    return None
