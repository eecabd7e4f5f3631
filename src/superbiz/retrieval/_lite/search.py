"""Lite's dense and BM25 searches and its query over ``LiveRows``: Lite's own indexes,
filters and merge, with the live-row masks instead of Lite's per-row walk. ``search_check``
compares them with Lite's own searches and queries before a store uses them.

One departure: a dense search reads the rows to search (live, and admitted by the filter
of a lookup scoped to a domain or to what a reader may see), when they are ``EXACT_ROWS``
or fewer in all, exactly, by brute force (``exact_segments``), where Lite walks
each segment's HNSW graph (through an id selector, under a filter). The walk misses
neighbours, the more so through a filter, and which ones depends on the graph, so on the
chunks' ids: raising the Markdown reader's version number, which changes every chunk's id
and no text, changed 94 of dev's 476 lookups (24 more HIGHLY_RELEVANT, R@1 0.943 → 0.941),
and once the filtered searches were exact, the next raise still changed 109 of
dev-answer-only's. Exact, a lookup is the same under any ids. Past ``EXACT_ROWS`` the
segments keep their graphs: a scan's cost is its bytes, read from memory.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from superbiz.retrieval._lite.bm25 import segment_scorer
from superbiz.retrieval._lite.graphs import graph_search
from superbiz.retrieval._lite.live_rows import LiveRows
from superbiz.retrieval._lite.projection import Projection, WhileAlive

#: the most rows one dense search reads exactly (a millisecond of numpy from memory);
#: past it, the segments' HNSW graphs
EXACT_ROWS = 10_000


def search_dense(
    live: LiveRows,
    vector: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
    *,
    vector_arrays: bool = False,
) -> list[dict[str, Any]]:
    """Lite's dense search (``Collection.search`` over ``execute_search_with_index``) for
    one query vector, with the live rows of ``live``'s current view: each segment's index
    (or brute force) with the filter and the live mask, the memtable by brute force, the
    hits merged by (distance, source, row) and projected as Lite projects them
    (``vector_arrays``: a stored vector as its float32 row, see ``Projection``)."""
    from milvus_lite.engine.collection import _internal_distance_to_milvus_distance
    from milvus_lite.search.filter import evaluate_mask
    from milvus_lite.search.indexed_filter import evaluate_segment_filter

    collection = live.collection
    collection._require_loaded()
    metric = collection.resolve_search_metric(field, metric)
    view = live.view()
    query = np.asarray([vector], dtype=np.float32)
    compiled = collection._compile_filter(expr) if expr else None
    plan = collection._indexed_filter_plan(compiled)
    sources: list[Any] = []  # the segments with rows, then the memtable
    searched: list[tuple[np.ndarray, np.ndarray, Any, int]] = []
    for seg, alive in zip(view.segments, view.dense, strict=True):
        if seg.num_rows == 0:
            continue
        sources.append(seg)
        vectors, valid = seg.vector_data(field)
        mask = alive if compiled is None else alive & evaluate_segment_filter(seg, compiled, plan)
        mask = mask if valid is None else mask & valid
        if mask.any():
            searched.append((vectors, mask, seg.indexes.get(field), len(sources) - 1))
    exact = exact_segments([(int(np.count_nonzero(m)), i is not None) for _, m, i, _ in searched])
    candidates: list[tuple[float, int, int]] = []
    for (vectors, mask, index, source), brute in zip(searched, exact, strict=True):
        admitted = None if mask.all() else mask
        if brute:
            found = nearest(vectors, query, metric, limit, admitted, squared_norms(vectors))
        else:
            found = graph_search(index, query, limit, admitted)
            if metric == "L2":
                found = exact_distances(found, vectors, query)
        candidates += _ranked(found, source)
    pks, vectors, refs, table, alive = view.memtable_dense(field)
    if pks:
        sources.append(None)
        mask = alive if compiled is None else alive & evaluate_mask(compiled, table)
        if mask.any():
            found = nearest(vectors, query, metric, limit, None if mask.all() else mask)
            candidates += _ranked(found, len(sources) - 1)
    candidates.sort()
    entity = Projection.of(collection, output_fields, vector_arrays=vector_arrays)
    kept = candidates[:limit]
    rows = entity.of_segment_rows(
        [(sources[source], row) for _, source, row in kept if sources[source] is not None]
    )
    hits = []
    for distance, source, row in kept:
        seg = sources[source]
        if seg is None:  # the memtable's row, as Lite materialises it
            record = view.memtable.materialize_row(*refs[row])
            key = record.get(collection._pk_name, pks[row])
            hits.append({"id": key, "distance": distance, "entity": entity.of_record(record)})
        else:
            hits.append({"id": seg.pks[row], "distance": distance, "entity": next(rows)})
    for hit in hits:
        hit["distance"] = _internal_distance_to_milvus_distance(hit["distance"], metric)
    return hits


def exact_segments(segments: list[tuple[int, bool]]) -> list[bool]:
    """Which segments a dense search reads by brute force, given each one's rows to
    search and whether it has a graph: every segment when they hold ``EXACT_ROWS`` rows
    or fewer in all, else only those without a graph. A knowledge base of up to
    ``EXACT_ROWS`` chunks (or a search its filter narrows to that many) is searched
    exactly however Lite has split it; a larger one walks its graphs, whose hits are
    rescored exactly (``exact_distances``). Reading the smallest segments exactly up to
    the budget cost a larger KB a millisecond a lookup and changed no recall (``eval
    scale`` at 11,925 documents: p50 7.5 → 5.9 ms, recall@5 of 403 questions the same).

    >>> exact_segments([(2_062, True), (8_219, True), (33_314, True), (7_847, True)])
    [False, False, False, False]
    >>> exact_segments([(4_000, True), (6_000, True)])
    [True, True]
    >>> exact_segments([(40_000, False), (9_000, True)])
    [True, False]
    """
    if sum(rows for rows, _ in segments) <= EXACT_ROWS:
        return [True] * len(segments)
    return [not indexed for _, indexed in segments]


def nearest(
    vectors: np.ndarray,
    query: np.ndarray,
    metric: str,
    limit: int,
    admitted: np.ndarray | None,
    norms: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``limit`` rows of ``vectors`` (those ``admitted``; None: all) nearest the one
    ``query`` row, exactly, as Lite's brute force returns them: ``(1, limit)`` row numbers
    and distances, padded with -1 and infinity. For L2 one matrix product, ``|v|² − 2 v·q +
    |q|²``, where Lite takes a difference row by row (0.7 ms against 4.8 ms for 3,500 rows
    of 512 on one core); the distances agree to float rounding. ``norms``: the rows' ``|v|²``
    (``squared_norms``: a segment's never change). Rows a filter admits are read in
    place, the others' distances set to infinity, unless they are few
    (``_GATHERED_SHARE``): copying out most of a segment's rows cost more than the product.

    >>> rows = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]], dtype=np.float32)
    >>> nearest(rows, np.array([[0.0, 0.0]], dtype=np.float32), "L2", 4, None)
    (array([[ 0,  2,  1, -1]]), array([[ 0.,  1.,  5., inf]], dtype=float32))
    """
    from milvus_lite.index.brute_force import BruteForceIndex

    if metric != "L2":
        found: tuple[np.ndarray, np.ndarray] = BruteForceIndex.build(vectors, metric).search(
            query, limit, valid_mask=admitted
        )
        return found
    point = np.asarray(query[0], dtype=np.float32)
    count = len(vectors) if admitted is None else int(np.count_nonzero(admitted))
    if admitted is not None and count < _GATHERED_SHARE * len(vectors):
        rows = np.flatnonzero(admitted)
        chosen = vectors[rows]
        squared = np.einsum("ij,ij->i", chosen, chosen) - 2.0 * (chosen @ point) + point @ point
    else:
        rows = np.arange(len(vectors))
        if norms is None:
            norms = np.einsum("ij,ij->i", vectors, vectors)
        squared = norms - 2.0 * (vectors @ point) + point @ point
        if admitted is not None:
            squared[~admitted] = np.inf
    k = min(limit, count)
    part = np.argpartition(squared, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
    order = part[np.argsort(squared[part], kind="stable")]
    ids = np.full((1, limit), -1, dtype=np.int64)
    distances = np.full((1, limit), np.inf, dtype=np.float32)
    ids[0, :k] = rows[order]
    distances[0, :k] = np.sqrt(np.maximum(squared[order], 0.0))
    return ids, distances


def exact_distances(
    found: tuple[np.ndarray, np.ndarray], vectors: np.ndarray, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A graph's L2 hits with their exact distances, nearest first. A Lite file's graph
    holds 8-bit vectors (``milvus_schema.LITE_DENSE_INDEX``) and reports distances between
    those; a lookup's cosines (its levels, its fusion) must not depend on how a segment
    is indexed, and the rows' float vectors are at hand in the segment's table. Worked
    out as ``nearest`` works them out (``|v|² − 2 v·q + |q|²``, ``squared_norms`` kept):
    the same distance for a row whether its segment was walked or scanned (a difference
    per row, as before, agreed to 4e-7 and cost a tenth more).

    >>> rows = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]], dtype=np.float32)
    >>> graph = (np.array([[1, -1, 2]]), np.array([[4.9, np.inf, 1.1]], dtype=np.float32))
    >>> exact_distances(graph, rows, np.array([[0.0, 0.0]], dtype=np.float32))
    (array([[ 2,  1, -1]]), array([[ 1.,  5., inf]], dtype=float32))
    """
    ids, distances = found
    rows = ids[0][ids[0] >= 0]
    point = np.asarray(query[0], dtype=np.float32)
    chosen = vectors[rows]
    squared = squared_norms(vectors)[rows] - 2.0 * (chosen @ point) + point @ point
    exact = np.sqrt(np.maximum(squared, 0.0)).astype(np.float32, copy=False)
    order = np.argsort(exact, kind="stable")
    ids, distances = np.full_like(ids, -1), np.full_like(distances, np.inf)
    ids[0, : len(rows)] = rows[order]
    distances[0, : len(rows)] = exact[order]
    return ids, distances


#: under this share of a segment's rows admitted, ``nearest`` copies them out
_GATHERED_SHARE = 0.25
#: each segment's vectors' ``|v|²``, while the array lives
_NORMS: WhileAlive[np.ndarray] = WhileAlive()


def squared_norms(vectors: np.ndarray) -> np.ndarray:
    """``|v|²`` of each row of a segment's ``vectors`` (Lite keeps one array a segment
    and field, never changed), worked out on its first search, not on every one: they
    were a third of an exact search's time."""
    return _NORMS.get(vectors, partial(np.einsum, "ij,ij->i", vectors, vectors))


def _ranked(found: tuple[np.ndarray, np.ndarray], source: int) -> list[tuple[float, int, int]]:
    """One source's hits (one query) as (distance, source, row), up to the padding."""
    ids, distances = found
    out = []
    for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
        if row < 0:
            break
        out.append((float(distance), source, row))
    return out


def search_bm25(
    live: LiveRows,
    text: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
    *,
    vector_arrays: bool = False,
) -> list[dict[str, Any]]:
    """Lite's BM25 search (``Collection._search_sparse``) for one query text, with the
    live rows of ``live``'s current view: each segment's cached scorer with the live
    mask and the filter, the memtable scored on its own, one hit per key (its newest
    version), ordered by distance as Lite's stable sort orders them (``vector_arrays``: as
    ``search_dense``)."""
    from milvus_lite.engine.collection import _internal_distance_to_milvus_distance
    from milvus_lite.index.sparse_factory import (
        _search_prepared_sparse_index,
        create_sparse_index,
        sparse_index_matches,
    )
    from milvus_lite.search.filter.eval.python_backend import _eval_row
    from milvus_lite.search.indexed_filter import evaluate_segment_filter

    collection = live.collection
    collection._require_loaded()
    metric = collection.resolve_search_metric(field, metric)
    view = live.view()
    spec = collection._index_specs.get(field)
    params = spec.build_params if spec else {}
    queries = collection._prepare_sparse_queries([text], field)
    compiled = collection._compile_filter(expr) if expr else None
    plan = collection._indexed_filter_plan(compiled)
    # (distance, key, (segment, row) or (record, seq))
    candidates: list[tuple[float, Any, tuple[Any, Any]]] = []
    for seg, alive in zip(view.segments, view.sparse, strict=True):
        if seg.table is None or len(seg.table) == 0:
            continue
        scorer = seg.sparse_indexes.get(field)
        if not sparse_index_matches(scorer, metric, params):
            scorer = seg.sparse_indexes[field] = segment_scorer(seg, field, metric, params)
        mask = alive if compiled is None else alive & evaluate_segment_filter(seg, compiled, plan)
        if not mask.any():
            continue
        ids, distances = _search_prepared_sparse_index(scorer, queries, limit, valid_mask=mask)
        for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
            if row < 0:
                break
            candidates.append((float(distance), seg.pks[row], (seg, row)))
    records = view.memtable_records()
    if records:
        valid = np.ones(len(records), dtype=bool)
        if compiled is not None:
            for i, (_, _, record) in enumerate(records):
                valid[i] = bool(_eval_row(compiled.ast, record))
        scorer = create_sparse_index(metric, params)
        scorer.build(view.memtable_sparse(field), valid_mask=valid)
        ids, distances = _search_prepared_sparse_index(scorer, queries, limit)
        for row, distance in zip(ids[0].tolist(), distances[0].tolist(), strict=True):
            if row < 0:
                break
            pk, seq, record = records[row]
            candidates.append((float(distance), pk, (record, seq)))
    newest: dict[Any, tuple[int, tuple[float, Any, tuple[Any, Any]]]] = {}
    for candidate in candidates:
        where, at = candidate[2]
        seq = int(at) if isinstance(where, dict) else int(where.seqs[at])
        if candidate[1] not in newest or seq > newest[candidate[1]][0]:
            newest[candidate[1]] = (seq, candidate)
    kept = sorted((candidate for _, candidate in newest.values()), key=lambda c: c[0])[:limit]
    entity = Projection.of(collection, output_fields, vector_arrays=vector_arrays)
    rows = entity.of_segment_rows([place for *_, place in kept if not isinstance(place[0], dict)])
    return [
        {
            "id": pk,
            "distance": _internal_distance_to_milvus_distance(distance, metric),
            "entity": entity.of_record(where) if isinstance(where, dict) else next(rows),
        }
        for distance, pk, (where, _) in kept
    ]


def query_live(
    live: LiveRows, expr: str | None, output_fields: list[str], limit: int | None
) -> list[dict[str, Any]]:
    """Lite's query (``Collection.query``) with the live rows of ``live``'s current view:
    each segment's live rows that pass the filter, then the memtable's, in Lite's order,
    projected as Lite projects them, up to ``limit`` (None: all). Lite walks every row of
    every segment in Python for each query: 0.4 s each at 11,925 documents, where an ingest
    compares the whole index with the documents 200 at a time."""
    from milvus_lite.search.filter import evaluate_mask
    from milvus_lite.search.indexed_filter import evaluate_segment_filter

    collection = live.collection
    collection._require_loaded()
    view = live.view()
    compiled = collection._compile_filter(expr) if expr else None
    plan = collection._indexed_filter_plan(compiled)
    entity = Projection.of(collection, output_fields, api="query")
    found: list[dict[str, Any]] = []
    for seg, alive in zip(view.segments, view.dense, strict=True):
        if seg.num_rows == 0:
            continue
        mask = alive if compiled is None else alive & evaluate_segment_filter(seg, compiled, plan)
        found += entity.of_rows(seg, np.flatnonzero(mask)[: _room(limit, found)].tolist())
        if limit is not None and len(found) >= limit:
            return found
    if collection._vector_name is None:  # no dense field: Lite's own query
        return list(collection.query(expr=expr, output_fields=output_fields, limit=limit))
    _, _, refs, table, alive = view.memtable_dense(collection._vector_name)
    if refs:
        mask = alive if compiled is None else alive & evaluate_mask(compiled, table)
        for row in np.flatnonzero(mask)[: _room(limit, found)].tolist():
            found.append(entity.of_record(view.memtable.materialize_row(*refs[row])))
    return found


def _room(limit: int | None, found: list[Any]) -> int | None:
    """How many more rows a query up to ``limit`` takes (None: all)."""
    return None if limit is None else limit - len(found)


def collection_search(
    collection: Any,
    data: list[float] | str,
    field: str,
    metric: str,
    limit: int,
    expr: str | None,
    output_fields: list[str],
) -> list[dict[str, Any]]:
    """Lite's own search of ``collection`` (its row-by-row scan): what the live rows'
    searches stand in for, and what the self-check compares them with."""
    result = collection.search(
        [data],
        top_k=limit,
        metric_type=metric,
        output_fields=output_fields,
        anns_field=field,
        expr=expr,
    )
    return list(result[0])
