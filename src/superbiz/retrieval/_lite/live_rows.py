"""The rows of a Lite collection a search may return, kept as masks until it changes.

Lite decides them row by row in Python in every search (two thirds of a lookup's time at
2,385 documents); ``LiveRows`` computes them once per change of the collection.
``search_check`` compares searches through them with Lite's own before a store uses them.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterable, KeysView
from itertools import chain
from typing import Any, ClassVar

import numpy as np


class _Writes:
    """One collection's writes begun and done: Lite's ``_apply``, the entry point of
    every insert and delete, counted on this collection only."""

    def __init__(self, collection: Any) -> None:
        self._lock = threading.Lock()
        self._begun = self._done = 0
        apply = collection._apply  # Lite's own, bound

        def counted(op: Any) -> Any:
            with self._lock:
                self._begun += 1
            try:
                return apply(op)
            finally:
                with self._lock:
                    self._done += 1

        collection._apply = counted

    def settled(self) -> int | None:
        """The writes done, or None while one is under way."""
        with self._lock:
            return self._done if self._begun == self._done else None


class LiveRows:
    """The rows of one Lite collection a search may return, kept until it changes.

    Lite decides in every search, row by row in Python, which rows count: the newest
    version of each primary key across segments and memtable, not shadowed by a later
    delete (flushed, or pending in the memtable). Those rows change only when the
    collection does, so a ``_View`` holds them as read-only masks per segment, built with
    set operations over Lite's own per-segment key maps, and is reused until a write
    (counted at Lite's ``_apply``), a flush or a compaction (other segments, another
    memtable, another tombstone count). ``views`` counts the views built."""

    _of: ClassVar[weakref.WeakKeyDictionary[Any, LiveRows]] = weakref.WeakKeyDictionary()
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._writes = _Writes(collection)
        self._view: _View | None = None
        self.views = 0

    @classmethod
    def of(cls, collection: Any) -> LiveRows:
        """The one ``LiveRows`` of ``collection`` (stores of one file share it)."""
        with cls._of_lock:
            live = cls._of.get(collection)
            if live is None:
                live = cls._of[collection] = cls(collection)
            return live

    def view(self) -> _View:
        collection = self.collection
        done = self._writes.settled()
        view = self._view
        if view is not None and done == view.done:
            with collection._maintenance_lock:
                segments = tuple(collection._segment_cache.values())
                tombstones = len(collection._delta_index)
            if view.holds(collection._memtable, segments, tombstones):
                return view
        view = _View(collection, done)
        self.views += 1
        if done is not None and self._writes.settled() == done:  # no write ran meanwhile
            self._view = view
        return view


class _View:
    """One state of a collection: its segments, the rows of each that dense and BM25
    searches may return (they judge a pending delete's partition differently, as Lite's
    two searches do), and its memtable's live rows."""

    def __init__(self, collection: Any, done: int | None) -> None:
        self.done = done
        self.collection = collection
        self.segments, delta = collection._read_snapshot()
        self.tombstones = len(delta)
        self.memtable = collection._memtable
        versions = {pk: pos[2] for pk, pos in self.memtable.pk_index_snapshot()}
        self._pending: dict[Any, tuple[int, str]] = self.memtable.delete_index_snapshot()
        self._deleted: dict[Any, int] = delta.snapshot
        if all(len(seg.pk_to_row) == len(seg.pks) for seg in self.segments):
            self._newest = _newest_shared(self.segments, versions)
            masks = [self._by_key(seg) for seg in self.segments]
        else:  # a key twice in one segment: Lite's own row-by-row judgement
            self._newest = _newest_by_row(self.segments, versions)
            masks = [self._by_row(seg) for seg in self.segments]
        for pair in masks:
            for mask in pair:
                mask.flags.writeable = False  # shared by every search of this view
        self.dense = [dense for dense, _ in masks]
        self.sparse = [sparse for _, sparse in masks]
        self._memtable_dense: dict[str, tuple[Any, ...]] = {}
        self._memtable_records: list[tuple[Any, int, dict[str, Any]]] | None = None
        self._memtable_sparse: dict[str, list[dict[int, float]]] = {}

    def holds(self, memtable: Any, segments: tuple[Any, ...], tombstones: int) -> bool:
        """Whether the collection is still in this view's state (its writes counted)."""
        return (
            memtable is self.memtable
            and tombstones == self.tombstones
            and len(segments) == len(self.segments)
            and all(a is b for a, b in zip(segments, self.segments, strict=True))
        )

    def _by_key(self, seg: Any) -> tuple[np.ndarray, np.ndarray]:
        """A segment's masks from the keys it shares with the newest versions, the
        tombstones and the pending deletes (set intersections: no loop over its rows)."""
        from milvus_lite.constants import ALL_PARTITIONS

        keys, rows, seqs = seg.pk_to_row.keys(), seg.pk_to_row, seg.seqs
        sparse = np.ones(len(seg.pks), dtype=bool)
        for pk in self._newest.keys() & keys:
            sparse[rows[pk]] = int(seqs[rows[pk]]) >= self._newest[pk]
        for pk in self._deleted.keys() & keys:
            if self._deleted[pk] > int(seqs[rows[pk]]):
                sparse[rows[pk]] = False
        dense = sparse.copy()
        for pk in self._pending.keys() & keys:
            seq, partition = self._pending[pk]
            if seq > int(seqs[rows[pk]]):
                dense[rows[pk]] = False  # a dense search: a delete of any partition
                if partition in (ALL_PARTITIONS, seg.partition):
                    sparse[rows[pk]] = False
        return dense, sparse

    def _by_row(self, seg: Any) -> tuple[np.ndarray, np.ndarray]:
        from milvus_lite.constants import ALL_PARTITIONS

        dense = np.zeros(len(seg.pks), dtype=bool)
        sparse = np.zeros(len(seg.pks), dtype=bool)
        for row, (pk, seq) in enumerate(zip(seg.pks, seg.seqs.tolist(), strict=True)):
            if self._newest.get(pk) != seq or self._deleted.get(pk, -1) > seq:
                continue
            pending = self._pending.get(pk)
            if pending is None or pending[0] <= seq:
                dense[row] = sparse[row] = True
            else:  # a dense search: a delete of any partition
                sparse[row] = pending[1] not in (ALL_PARTITIONS, seg.partition)
        return dense, sparse

    def _live_version(self, pk: Any, seq: int) -> bool:
        """A memtable row is its key's newest version and no flushed delete shadows it."""
        return self._newest.get(pk, seq) <= seq and self._deleted.get(pk, -1) <= seq

    def memtable_dense(self, field: str) -> tuple[Any, ...]:
        """The memtable's rows for a dense search of ``field`` (Lite's search snapshot,
        with its table for filters) and which of them are live."""
        found = self._memtable_dense.get(field)
        if found is None:
            pks, seqs, vectors, refs, table = self.memtable.to_search_snapshot(
                vector_field=field, partition_names=None, include_table=True
            )
            live = np.array(
                [
                    self._live_version(pk, seq)
                    and not (pk in self._pending and self._pending[pk][0] > seq)
                    for pk, seq in zip(pks, seqs.tolist(), strict=True)
                ],
                dtype=bool,
            )
            found = self._memtable_dense[field] = (pks, vectors, refs, table, live)
        return found

    def memtable_records(self) -> list[tuple[Any, int, dict[str, Any]]]:
        """The memtable's live rows as records (a BM25 search scores them itself)."""
        if self._memtable_records is None:
            self._memtable_records = [
                (pk, seq, record)
                for pk, seq, record in self.memtable.active_record_snapshots()
                if self._live_version(pk, seq)
            ]
        return self._memtable_records

    def memtable_sparse(self, field: str) -> list[dict[int, float]]:
        found = self._memtable_sparse.get(field)
        if found is None:
            from milvus_lite.analyzer.sparse import bytes_to_sparse

            raws = [record.get(field) for _, _, record in self.memtable_records()]
            found = self._memtable_sparse[field] = [
                bytes_to_sparse(raw) if isinstance(raw, bytes) else (raw or {}) for raw in raws
            ]
        return found


def _newest_shared(segments: tuple[Any, ...], versions: dict[Any, int]) -> dict[Any, int]:
    """The newest seq of each key found in more than one source (the segments, then the
    memtable's ``versions``); a key of one source is its own newest version."""
    keys: list[KeysView[Any]] = [seg.pk_to_row.keys() for seg in segments]
    keys.append(versions.keys())
    if len(set().union(*keys)) == sum(len(k) for k in keys):
        return {}
    newest: dict[Any, int] = {}
    for pk, count in Counter(chain.from_iterable(keys)).items():
        if count > 1:
            seqs = [int(seg.seqs[seg.pk_to_row[pk]]) for seg in segments if pk in seg.pk_to_row]
            newest[pk] = max([*seqs, versions.get(pk, -1)])
    return newest


def _newest_by_row(segments: Iterable[Any], versions: dict[Any, int]) -> dict[Any, int]:
    """The newest seq of every key, row by row (as Lite does in each search)."""
    newest: dict[Any, int] = {}
    for seg in segments:
        for pk, seq in zip(seg.pks, seg.seqs.tolist(), strict=True):
            if newest.get(pk, -1) < seq:
                newest[pk] = seq
    for pk, seq in versions.items():
        newest[pk] = max(seq, newest.get(pk, -1))
    return newest
