"""A Lite hit's or queried row's entity, read as Lite projects it (``project_record``),
from a segment's columns: a search's hits a segment at a time, not value by value.

A projection is worked out once per collection and fields (Lite's projection plan), and
what it reads of a segment's table once per table while the table lives (a search reads
a few rows of each of a large KB's segments, two searches a lookup).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

_T = TypeVar("_T")


class WhileAlive(Generic[_T]):
    """A value worked out once for each of Lite's segment tables or vector arrays, kept
    while that object lives (neither takes a weak key: both are unhashable)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[weakref.ref[Any], _T]] = {}

    def get(self, owner: Any, make: Callable[[], _T]) -> _T:
        key = id(owner)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is owner:
            return kept[1]
        value = make()
        self._kept[key] = (weakref.ref(owner, partial(self._forget, key)), value)
        return value

    def _forget(self, key: int, _gone: object) -> None:
        self._kept.pop(key, None)


class Projection:
    """A hit's or a queried row's entity as Lite projects it. A collection without
    dynamic fields projects only the requested schema fields, so only those are read from
    a segment's row, a dense vector from the segment's own array (Lite reads every column
    value by value: 512 Python floats per vector)."""

    _of: ClassVar[weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Projection]]] = (
        weakref.WeakKeyDictionary()
    )
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(
        cls,
        collection: Any,
        output_fields: Sequence[str],
        api: str = "search",
        *,
        vector_arrays: bool = False,
    ) -> Projection:
        """The projection of ``collection``'s rows onto ``output_fields`` for ``api``
        (made once: Lite's plan looks every field up in the schema)."""
        key = (tuple(output_fields), api, vector_arrays)
        with cls._of_lock:
            made = cls._of.setdefault(collection, {})
            projection = made.get(key)
            if projection is None:
                projection = made[key] = cls(collection, output_fields, api, vector_arrays)
            return projection

    def __init__(
        self, collection: Any, output_fields: Sequence[str], api: str, vector_arrays: bool
    ) -> None:
        from milvus_lite.engine.projection import build_projection_plan
        from milvus_lite.schema.types import DataType

        self._schema = collection._schema
        self._plan = build_projection_plan(list(output_fields), self._schema, api_kind=api)
        fields = self._plan.engine_fields if not self._schema.enable_dynamic_field else None
        if fields is not None and api != "search":  # a query's rows carry their key
            fields = (collection._pk_name, *fields)
        self._fields = fields
        self._vectors = {f.name for f in self._schema.fields if f.dtype == DataType.FLOAT_VECTOR}
        # a segment's vector as its float32 row, not 512 Python floats that the store
        # turns back into an array (a third of reading a large KB's BM25 hits)
        self._vector_arrays = vector_arrays
        # without dynamic fields Lite's projection keeps these names, in this order (a
        # search leaves the key out, a query adds it last): ``project_record`` looks each
        # name up in the schema, a third of a lookup's reading of its hits
        self._keep: tuple[str, ...] | None = None
        if fields is not None:
            key = collection._pk_name
            keep = [n for n in self._plan.response_schema_fields if n != key]
            self._keep = (*keep, key) if api != "search" else tuple(keep)
        # each table's columns a row is read from, and those columns selected
        self._names: WhileAlive[list[str]] = WhileAlive()
        self._selected: WhileAlive[dict[tuple[str, ...], Any]] = WhileAlive()

    def of_record(self, record: dict[str, Any]) -> dict[str, Any]:
        if self._keep is not None:
            return {name: record[name] for name in self._keep if name in record}
        from milvus_lite.engine.projection import project_record

        return dict(project_record(record, self._schema, self._plan))

    def of_segment_rows(self, places: list[tuple[Any, int]]) -> Iterator[dict[str, Any]]:
        """The rows at ``places`` (segment, row), in that order: a search's hits, each
        segment's read at once (value by value, 90 hits cost a lookup 2 ms at 11,925
        documents)."""
        by_segment: dict[int, tuple[Any, list[int]]] = {}
        for seg, row in places:
            by_segment.setdefault(id(seg), (seg, []))[1].append(row)
        read = {key: iter(self.of_rows(seg, rows)) for key, (seg, rows) in by_segment.items()}
        return (next(read[id(seg)]) for seg, _ in places)

    def of_rows(self, seg: Any, rows: list[int]) -> list[dict[str, Any]]:
        """Rows of one segment, read a column at a time (a query may return thousands)."""
        if not rows:
            return []
        table = seg.table
        names = self._names.get(table, partial(self._read_names, table))
        arrays: dict[str, Any] = {}  # float32 vectors; as Python floats, as ``as_py`` gives
        for name in self._vectors.intersection(names):
            vectors, valid = seg.vector_data(name)
            if valid is None:
                arrays[name] = vectors[rows]
        columns = tuple(n for n in names if n not in arrays)
        selected = self._selected.get(table, dict)
        if columns not in selected:
            selected[columns] = table.select(list(columns))
        values = selected[columns].take(np.asarray(rows, dtype=np.int64)).to_pylist()
        for name, array in arrays.items():
            rows_of = array if self._vector_arrays else array.tolist()
            for record, vector in zip(values, rows_of, strict=True):
                record[name] = vector
        return [self.of_record(record) for record in values]

    def _read_names(self, table: Any) -> list[str]:
        """The columns of a segment's ``table`` a row is read from."""
        present = set(table.column_names)
        wanted = self._fields if self._fields is not None else table.column_names
        return [n for n in wanted if n not in ("_seq", "_partition") and n in present]
