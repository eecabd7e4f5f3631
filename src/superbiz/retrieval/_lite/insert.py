"""Lite's insert for rows whose vector is a float32 array, its vector column built in Arrow.

Lite's ``Collection.insert`` checks every element of every vector in Python
(``validate_record``: 512 ``isinstance`` calls a row) and builds its write-ahead batch from
the rows' Python lists value by value, so superbiz turned each vector from numpy into 512
Python floats only for Lite to check and convert them back. ``insert_columns`` takes Lite's
own steps (the BM25 function's output, every other field validated by Lite, sequence
numbers, the operation applied, the flush when due) with the vectors checked as one array
and their column made from it (a store's insert of 3,950 chunks of 512 dimensions, their
BM25 analysis included: 1.62–1.68 → 1.22–1.39 s; docs/benchmarks/scale.md).
``insert_check`` writes the same rows both ways into two small collections once per
process; where their batches differ (a Lite upgrade), the gate keeps Lite's own insert.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

import numpy as np

from superbiz.retrieval._lite.checks import check_schema, verdict_once

#: the insert check's verdict, once per process (empty: not run yet)
_verdict: list[str | None] = []


def insert_columns(collection: Any, rows: list[dict[str, Any]]) -> list[Any] | None:
    """Insert ``rows`` into ``collection`` as ``Collection.insert`` does, returning their
    keys; None, having done nothing, where a row's vector is not a float32 array of the
    field's length or the collection is of a shape this does not handle (automatic keys,
    partition keys, dynamic or JSON fields): Lite's own insert then does it, and says
    what is wrong."""
    from milvus_lite.constants import DEFAULT_PARTITION
    from milvus_lite.engine.operation import InsertOp
    from milvus_lite.exceptions import PartitionNotFoundError
    from milvus_lite.schema.types import DataType
    from milvus_lite.schema.validation import validate_record

    schema = collection._schema
    vector = _vector_field(schema)
    if (
        vector is None
        or collection._auto_id
        or collection._partition_key_field is not None
        or schema.enable_dynamic_field
        or any(f.dtype == DataType.JSON for f in schema.fields)
        or not all(_is_vector(row.get(vector.name), vector.dim) for row in rows)
    ):
        return None
    if not rows:
        return []
    collection._validate_bm25_input_ownership(rows)
    records = [dict(row) for row in rows]  # Lite's steps fill in fields: not the caller's
    if collection._ingestion_chain:
        from milvus_lite.function.dataframe import DataFrame

        collection._ingestion_chain.execute(DataFrame.from_records(records))
    matrix = np.stack([record[vector.name] for record in records])
    without = _without_vector(schema)
    for record in records:  # every other field, by Lite's own rules
        record[vector.name] = None
        validate_record(record, without, default_properties=collection._database_properties)
    if not collection._manifest.has_partition(DEFAULT_PARTITION):
        raise PartitionNotFoundError(DEFAULT_PARTITION)
    first = collection._next_seq
    collection._next_seq += len(records)
    batch = _wal_batch(collection, records, vector.name, matrix, DEFAULT_PARTITION, first)
    collection._apply(InsertOp(partition=DEFAULT_PARTITION, batch=batch))
    if collection._should_flush():
        collection._trigger_flush()
    return [record[collection._pk_name] for record in records]


def as_lists(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each array value a list, as Lite's own insert wants them.

    >>> as_lists([{"id": "a", "dense": np.array([0.5, 1.0], dtype=np.float32)}])
    [{'id': 'a', 'dense': [0.5, 1.0]}]
    """
    return [
        {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()} for row in rows
    ]


def _vector_field(schema: Any) -> Any | None:
    from milvus_lite.schema.types import DataType

    found = [f for f in schema.fields if f.dtype == DataType.FLOAT_VECTOR]
    return found[0] if len(found) == 1 and not found[0].nullable and found[0].dim else None


def _is_vector(value: Any, dim: int) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.float32 and value.shape == (dim,)


def _without_vector(schema: Any) -> Any:
    """``schema`` with its vector field nullable, so ``validate_record`` passes over a
    vector of None and checks every other field as it would."""
    from milvus_lite.schema.types import DataType

    fields = [
        dataclasses.replace(f, nullable=True) if f.dtype == DataType.FLOAT_VECTOR else f
        for f in schema.fields
    ]
    return dataclasses.replace(schema, fields=fields)


def _wal_batch(
    collection: Any,
    records: list[dict[str, Any]],
    vector: str,
    matrix: np.ndarray,
    partition: str,
    first: int,
) -> Any:
    """The write-ahead record batch ``Collection._build_wal_data_batch`` makes of
    ``records``, the vector column from ``matrix`` without a Python float per value."""
    import pyarrow as pa  # type: ignore[import-untyped]
    from milvus_lite.analyzer.sparse import sparse_to_bytes
    from milvus_lite.schema.types import DataType

    wal = collection._wal_data_schema
    sparse = {f.name for f in collection._schema.fields if f.dtype == DataType.SPARSE_FLOAT_VECTOR}
    columns = []
    for name in wal.names:
        kind = wal.field(name).type
        if name == "_seq":
            values: Any = np.arange(first, first + len(records), dtype=np.uint64)
        elif name == "_partition":
            values = [partition] * len(records)
        elif name == vector:
            flat = pa.array(matrix.reshape(-1), type=kind.value_type)
            columns.append(pa.FixedSizeListArray.from_arrays(flat, kind.list_size))
            continue
        elif name in sparse:
            given = (r.get(name) for r in records)
            values = [sparse_to_bytes(v) if isinstance(v, dict) else v for v in given]
        else:
            values = [r.get(name) for r in records]
        columns.append(pa.array(values, type=kind))
    return pa.RecordBatch.from_arrays(columns, schema=wal)


def insert_check() -> str | None:
    """None when ``insert_columns`` makes the batch Lite's own insert makes, else what
    differed (said once; Lite's own insert is used). Two small collections of superbiz's
    shape (a text analysed for BM25, its sparse output, a vector) get the same rows, one
    through each; their write-ahead batches must be equal. Run once per process; a pass is kept
    (its Lite analysis loaded jieba's dictionary in every ingest, 0.55 s)."""
    return verdict_once(
        _verdict,
        _batches_differ,
        "Milvus Lite inserts as written for another version (%s); its own insert is used",
        kept="insert",
    )


def _batches_differ() -> str | None:
    from milvus_lite.engine.collection import Collection
    from milvus_lite.schema.types import DataType, FieldSchema

    schema = check_schema(FieldSchema("n", DataType.INT64))
    vectors = np.array(
        [[0.5, -1.25, 3.0, 0.0], [1e-8, 2.0, -0.0, 1.0], [7.0, 0.1, 0.2, -3.5]], np.float32
    )
    texts = ["支付回调超时 payment timeout", "", "Redis 连接池 redis pool"]
    rows = [
        {"id": f"r{i}", "n": i * 7 - 3, "text": text, "dense": vector}
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    ]
    batches = []
    with tempfile.TemporaryDirectory(prefix="superbiz-lite-insert-") as folder:
        for ours in (False, True):
            collection = Collection("check", f"{folder}/{ours}", schema)
            try:
                if ours:
                    keys = insert_columns(collection, rows)
                else:
                    keys = collection.insert(as_lists(rows))
                if keys != ["r0", "r1", "r2"]:
                    return f"keys {keys} for rows r0, r1, r2"
                batches.append(collection._memtable._insert_batches)
            finally:
                collection.close()
    lites, own = batches
    if len(lites) != len(own) or any(not a.equals(b) for a, b in zip(lites, own, strict=True)):
        return "another write-ahead batch for the same rows"
    return None
