"""Lite's compaction, copying one output segment's rows at a time.

Lite merges a partition's data files (``CompactionManager._compact_files``: up to 200,000
rows) by copying the whole merged table three times over, sorted by key to keep each
key's newest version, filtered for deletes, sorted by sequence, before writing it out in
segments of ``MAX_SEGMENT_ROWS``. In a bulk ingest that is the process's peak: at 50,000
documents about 12 s at 4.8 GB over the 2.8 GB the ingest held before. ``lean_compact``
works out which rows survive, and in which order, from the key and ``_seq`` columns
alone, and copies each output segment's rows once, as it writes them: the same files
holding the same rows in the same order (``compaction_check`` compares the two), with the
merged rows in memory once plus one segment instead of three times (an ingest to 50,000
documents: peak 4,437 → 3,855 MB; docs/benchmarks/scale.md).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Any

from superbiz._process import release_freed_memory
from superbiz.retrieval._lite.checks import verdict_once

#: the gate logs under one name, whichever of its modules speaks
log = logging.getLogger(__package__)

#: the compaction check's verdict, once per process (empty: not run yet)
_verdict: list[str | None] = []


def surviving_rows(keys: Any, is_deleted: Callable[[Any, int], bool] | None) -> Any:
    """Row numbers of the Arrow table ``keys`` (the primary key column, then ``_seq``) that
    a compaction keeps, in the order it writes them: each key's newest version (largest
    ``_seq``) unless ``is_deleted(key, seq)``, by ``_seq``, ties by key (Lite's stable
    sorts). (Arrow is imported here, not with the module: ``_process.tune_memory``.)

    >>> import pyarrow as pa
    >>> keys = pa.table({"id": ["b", "a", "b", "c"], "_seq": [1, 2, 3, 4]})
    >>> surviving_rows(keys, lambda key, seq: key == "c").to_pylist()
    [1, 2]
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    key, seq = keys.column_names
    order = pc.sort_indices(keys, sort_keys=[(key, "ascending"), ("_seq", "descending")])
    if len(order) > 1:
        ordered = keys.column(key).take(order)
        changed = pc.not_equal(ordered.slice(0, len(order) - 1), ordered.slice(1))
        if isinstance(changed, pa.ChunkedArray):
            changed = changed.combine_chunks()
        order = order.filter(pa.concat_arrays([pa.array([True]), changed]))
    if is_deleted is not None and len(order):
        pks, seqs = keys.column(key).take(order), keys.column(seq).take(order)
        alive = [
            not is_deleted(k, s) for k, s in zip(pks.to_pylist(), seqs.to_pylist(), strict=True)
        ]
        order = order.filter(pa.array(alive, type=pa.bool_()))
    return order.take(pc.sort_indices(keys.column(seq).take(order)))


def lean_compact(
    manager: Any,
    partition: str,
    partition_dir: str,
    files: list[str],
    manifest: Any,
    delta_index: Any,
) -> None:
    """``CompactionManager._compact_files`` of one manager (see the module docstring):
    Lite's own steps (files named by their sequence range, the manifest saved before the
    inputs are deleted, files a snapshot pins kept), one output segment copied at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from milvus_lite.constants import MAX_SEGMENT_ROWS
    from milvus_lite.storage.data_file import read_data_file, write_data_file
    from milvus_lite.storage.snapshots import snapshot_references

    if not files:
        return
    merged = pa.concat_tables([read_data_file(os.path.join(partition_dir, f)) for f in files])
    deleted = delta_index.is_deleted if len(delta_index) else None
    kept = surviving_rows(merged.select([manager._pk_name, "_seq"]), deleted)
    written = []
    for start in range(0, len(kept), MAX_SEGMENT_ROWS):
        segment = merged.take(kept.slice(start, MAX_SEGMENT_ROWS))
        seqs = segment.column("_seq")
        low, high = manager._pick_unique_seq_range(
            partition_dir, pc.min(seqs).as_py(), pc.max(seqs).as_py()
        )
        written.append(write_data_file(segment, partition_dir, seq_min=low, seq_max=high))
        del segment
    manifest.remove_data_files(partition, files)
    for relative in written:
        manifest.add_data_file(partition, relative)
    manifest.save()
    pinned = snapshot_references(manager._data_dir)[0].get(partition, set())
    for name in files:
        path = os.path.join(partition_dir, name)
        if name not in pinned and os.path.exists(path):
            try:
                os.remove(path)
            except OSError as exc:  # recovery removes what is not in the manifest
                log.warning("compaction: failed to remove %s: %s", path, exc)
    del merged
    release_freed_memory()  # the merge's pages back to the system, not kept for the next
    log.debug("compaction of %s: %d files, %d rows kept", partition, len(files), len(kept))


def lean_compaction(collection: Any) -> None:
    """Make ``collection`` compact with ``lean_compact`` from its first compaction on, if
    ``compaction_check`` agrees then (on this collection's own manager; Lite's class is
    untouched; where the check disagrees, Lite's own method is used). Decided at the first
    compaction, not at the first write: most writes (a one-file upload) never compact,
    and the check costs half a second."""
    manager = collection._compaction_mgr
    if "_compact_files" in vars(manager):  # installed already
        return

    def first_compaction(*args: Any, **kwargs: Any) -> Any:
        if compaction_check() is None:
            manager._compact_files = partial(lean_compact, manager)
        else:
            del manager._compact_files  # Lite's own, from its class
        return manager._compact_files(*args, **kwargs)

    manager._compact_files = first_compaction


def compaction_check() -> str | None:
    """None when ``lean_compact`` leaves the files Lite's own compaction leaves, else what
    differed (said once; Lite's own compaction is kept). Two small collections go through
    the same writes (new versions of rows, deletes before and after their rows' flush,
    five flushes, so Lite compacts), one compacted by each; their data files must have
    the same names and the same rows. Run once per process; a pass is kept."""
    return verdict_once(
        _verdict,
        _files_differ,
        "Milvus Lite compacts as written for another version (%s); its own compaction is used",
        kept="compaction",
    )


def _files_differ() -> str | None:
    from milvus_lite.engine.collection import Collection
    from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema
    from milvus_lite.storage.data_file import read_data_file

    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("text", DataType.VARCHAR, max_length=64),
            FieldSchema("dense", DataType.FLOAT_VECTOR, dim=2),
        ]
    )

    def rows(first: int, last: int, version: int) -> list[dict[str, Any]]:
        return [
            {"id": f"r{i % 17}", "text": f"{i} v{version}", "dense": [float(i), float(version)]}
            for i in range(first, last)
        ]

    files: list[dict[tuple[str, str], Any]] = []
    with tempfile.TemporaryDirectory(prefix="superbiz-lite-compaction-") as folder:
        for lean in (False, True):
            collection = Collection("check", os.path.join(folder, str(lean)), schema)
            try:
                manager = collection._compaction_mgr
                if lean:
                    manager._compact_files = partial(lean_compact, manager)
                for step in range(5):
                    collection.insert(rows(step * 5, step * 5 + 9, step))
                    collection.delete([f"r{step * 3}", f"r{16 - step}"])
                    collection.flush()
                    collection._wait_for_bg()
                every = collection._manifest.get_all_data_files()
                if sum(len(names) for names in every.values()) >= 5:
                    return "Lite did not compact the check's five files"
                files.append(
                    {
                        (partition, name): read_data_file(
                            os.path.join(collection._data_dir, "partitions", partition, name)
                        )
                        for partition, names in every.items()
                        for name in names
                    }
                )
            finally:
                collection.close()
    lites, ours = files
    if lites.keys() != ours.keys():
        return f"other files: {sorted(ours)} instead of {sorted(lites)}"
    if any(not lites[name].equals(ours[name]) for name in lites):
        return "the same files holding other rows"
    return None
