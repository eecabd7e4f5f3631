"""What Lite does at ingest, made cheaper on one store's own objects: the jieba analysis of
each inserted text through a cache of blocks, a new ASCII block cut without jieba's
dictionary walk (``cache_analysis``, checked by ``self_check``), and a memtable flushed
column by column in Arrow (``columnar_flush``, which falls back to Lite's own code on
anything unexpected).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from superbiz._text import block_words, cut_without_dictionary

#: the gate logs under one name, whichever of its modules speaks
log = logging.getLogger(__package__)


#: jieba blocks whose term ids one analyzer remembers (a few MB); emptied when full
ANALYSIS_CACHE_SIZE = 50_000


def analyzers(collection: Any) -> list[Any]:
    """The analyzers ``collection`` runs at ingest (its BM25 function) and at query time."""
    found = list(collection._bm25_analyzers.values())
    chain = collection._ingestion_chain
    for operator in chain.operators if chain is not None else []:
        analyzer = getattr(getattr(operator, "_expr", None), "_analyzer", None)
        if analyzer is not None:
            found.append(analyzer)
    return found


def cache_analysis(analyzer: Any) -> None:
    """Make one Lite jieba analyzer analyse a text a block at a time through a cache of
    each block's term ids.

    jieba cuts a text at its regular expression ``re_han_default`` (runs of CJK,
    Latin letters, digits and ``+#&._%-``, and what lies between them) and segments
    each block on its own; Lite's analyzer then strips, lowercases, drops stop words
    and hashes token by token. So a text's ids are its blocks' ids in order, and a
    block seen before costs a dictionary lookup; a new block in ASCII is cut as jieba
    cuts it without jieba's dictionary walk (``block_words``: half the analysis of
    English runbooks). Other analyzers are left alone.
    """
    if type(analyzer).__name__ != "JiebaAnalyzer" or "analyze" in vars(analyzer):
        return
    import jieba
    from milvus_lite.analyzer.hash import term_to_id

    split = jieba.re_han_default.split
    analyze_text: Callable[[str], list[int]] = analyzer.analyze  # Lite's own, bound
    stop_words: frozenset[str] = analyzer._stop_words
    cache: dict[str, list[int]] = {}

    def analyze_block(block: str) -> list[int]:
        if not cut_without_dictionary(block):
            return analyze_text(block)
        tokens = (token.strip().lower() for token in block_words(block))
        return [term_to_id(t) for t in tokens if t and t not in stop_words]

    def analyze(text: str) -> list[int]:
        ids: list[int] = []
        for block in split(text):
            if not block:
                continue
            found = cache.get(block)
            if found is None:
                if len(cache) >= ANALYSIS_CACHE_SIZE:
                    cache.clear()
                found = cache[block] = analyze_block(block)
            ids += found
        return ids

    analyzer.analyze = analyze


def columnar_flush(memtable: Any) -> None:
    """Make one Lite memtable build its flushed table column by column in Arrow.

    ``MemTable._build_data_table(rows)`` gathers the live ``(batch, row)`` pairs in
    their order into a table of the data schema. The record batches already hold
    those columns with those types, so Arrow's ``take`` over them gives the same
    table without a Python object per value. Anything unexpected (another layout,
    another schema) falls back to Lite's own code.
    """
    if "_build_data_table" in vars(memtable):
        return
    build_by_value = memtable._build_data_table  # Lite's own, bound

    def build(rows: list[tuple[int, int]]) -> Any:
        try:
            table = _taken_rows(memtable, rows)
        except Exception:  # Lite reorganised: its own way still works
            log.debug("Milvus Lite columnar flush unavailable", exc_info=True)
            table = None
        return build_by_value(rows) if table is None else table

    memtable._build_data_table = build


def _taken_rows(memtable: Any, rows: list[tuple[int, int]]) -> Any | None:
    """The data-schema table of ``rows`` taken from ``memtable``'s batches, or None."""
    import pyarrow as pa  # type: ignore[import-untyped]

    schema = memtable._data_schema
    if not rows:
        return None
    batches, starts, total = [], {}, 0
    for index in sorted({batch for batch, _ in rows}):
        batch = memtable._insert_batches[index].select(schema.names)
        starts[index] = total
        total += batch.num_rows
        batches.append(batch)
    if any(batch.schema.types != schema.types for batch in batches):
        return None
    positions = np.fromiter((starts[batch] + row for batch, row in rows), np.int64, len(rows))
    table = pa.Table.from_batches(batches)
    if len(positions) != total or np.any(positions != np.arange(total)):
        table = table.take(pa.array(positions))  # some rows replaced or deleted: a copy
    # else every row of the batches, in order: the batches' own buffers, no copy
    return pa.Table.from_arrays(table.columns, schema=schema)
