"""The chunk collection's layout in Milvus: its fields, the BM25 function and the indexes.

Apart from the store's reads and writes: this is what a collection holds and how it is
indexed, decided once when the store creates it (``MilvusChunkStore.ensure_collection``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from superbiz.access import GROUP_MAX, GROUPS_MAX
from superbiz.retrieval.records import DENSE_METRIC, ChunkHit, ChunkRecord

# A Milvus server counts a VARCHAR's length in UTF-8 bytes, Milvus Lite in characters: every
# size here is in bytes, and what is cut is cut to bytes (a CJK character is three).

#: the longest text a chunk keeps (its stored text and search text)
TEXT_MAX = 16384
#: the longest heading a chunk keeps
HEADING_MAX = 2048
#: the longest title a chunk keeps (the document's whole title is in its stored row)
TITLE_MAX = 1024
#: a document's path and domain are never cut (they are keys): their fields hold the longest
#: a document may have (1,024 and 128 characters: ``superbiz.storage.models``), four bytes
#: a character (collections an earlier superbiz made hold 1,024 and 128 bytes)
PATH_BYTES = 4 * 1024
DOMAIN_BYTES = 4 * 128
#: the key fields of a collection superbiz makes now, and their sizes
KEY_BYTES = {"doc_path": PATH_BYTES, "domain": DOMAIN_BYTES}
#: characters of a text kept: four bytes each at most in UTF-8
_TEXT_CHARS = TEXT_MAX // 4
#: the fields a search hit or a document's chunks are read with (the vector apart)
HIT_FIELDS = ["doc_path", "domain", "title", "heading", "chunk_index", "text"]
#: the longest access list a chunk keeps: ``superbiz.access.encode_access``'s JSON of the most
#: groups a list may name, each as long as a group's name may be (earlier collections: 16,384)
ACCESS_MAX = GROUPS_MAX * (4 * GROUP_MAX + len('"",')) + len("[]")
#: the dense graph of a Milvus Lite file: HNSW over 8-bit vectors, the degree and build depth
#: of Lite's own ``AUTOINDEX`` (faiss ``IndexHNSWFlat``, M 16, efConstruction 200). Lite keeps
#: every float vector in its tables, and exact searches read those; a full-precision graph
#: held a second copy (421 of a 50,000-document KB's 2,418 MB). Measured on a 100,000-row
#: segment: the same neighbours found, 62 MB instead of 209 (docs/benchmarks/scale.md).
LITE_DENSE_INDEX: dict[str, Any] = {
    "index_type": "HNSW_SQ",
    "params": {"M": 16, "efConstruction": 200, "sq_type": "SQ8"},
}


@dataclass(frozen=True, slots=True)
class CollectionLayout:
    """What a store reads from its existing collection's fields."""

    dimension: int
    has_bm25: bool
    #: chunks keep their document's access list (not in collections made before that)
    has_access: bool
    #: made by an older superbiz: another schema or analyzer
    outdated: bool
    key_sizes: dict[str, int]


def collection_layout(fields: Mapping[str, Mapping[str, Any]]) -> CollectionLayout:
    """The layout of a collection whose fields' parameters (``dim``, ``max_length``) are
    ``fields``, by name.

    >>> keys = {"doc_path": {"max_length": 1024}, "domain": {"max_length": 128}}
    >>> collection_layout({"dense": {"dim": 512}, "sparse": {}, **keys})
    CollectionLayout(dimension=512, has_bm25=True, has_access=False, outdated=True, \
key_sizes={'doc_path': 1024, 'domain': 128})
    """
    return CollectionLayout(
        dimension=int(fields["dense"]["dim"]),
        has_bm25="sparse" in fields,
        has_access="access" in fields,
        outdated="search_text" not in fields,
        key_sizes={key: int(fields[key]["max_length"]) for key in KEY_BYTES},
    )


def graph_upgrade(built: str | None) -> str | None:
    """What a rebuild gains for a Lite file whose dense graph is of type ``built`` (as
    ``describe_index`` names it): None when it is ``LITE_DENSE_INDEX`` already or unknown.
    A file made before superbiz chose 8-bit graphs keeps working with its full-precision
    ones; only a rebuild replaces them.

    >>> graph_upgrade("HNSW_SQ") is None, graph_upgrade(None) is None
    (True, True)
    >>> graph_upgrade("AUTOINDEX").split(": ")[0]
    'its vector graphs hold full-precision vectors (AUTOINDEX, from an older superbiz)'
    """
    wanted = LITE_DENSE_INDEX["index_type"]
    if built in (None, "", wanted):
        return None
    return (
        f"its vector graphs hold full-precision vectors ({built}, from an older superbiz): "
        f"`superbiz ingest PATH --rebuild` builds them as {wanted}, in about a third of their "
        "memory"
    )


def chunk_collection(
    client: Any, dimension: int, analyzer: dict[str, Any] | None, *, lite: bool = False
) -> tuple[Any, Any]:
    """The schema and index parameters of a collection of ``dimension``-d chunks, with
    BM25 over ``analyzer`` (None: dense only, for a Milvus without full-text search).

    ``lite``: the collection is in a Milvus Lite file, whose dense graph is
    ``LITE_DENSE_INDEX``; a server chooses its own (``AUTOINDEX``)."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=128)
    schema.add_field("doc_path", DataType.VARCHAR, max_length=KEY_BYTES["doc_path"])
    schema.add_field("domain", DataType.VARCHAR, max_length=KEY_BYTES["domain"])
    schema.add_field("title", DataType.VARCHAR, max_length=TITLE_MAX)
    schema.add_field("heading", DataType.VARCHAR, max_length=HEADING_MAX)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("content_hash", DataType.VARCHAR, max_length=64)
    schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX)
    bm25 = analyzer is not None
    text_args: dict[str, Any] = (
        {"enable_analyzer": True, "analyzer_params": analyzer} if bm25 else {}
    )
    schema.add_field("search_text", DataType.VARCHAR, max_length=TEXT_MAX, **text_args)
    schema.add_field("access", DataType.VARCHAR, max_length=ACCESS_MAX)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dimension)
    index = client.prepare_index_params()
    dense = LITE_DENSE_INDEX if lite else {"index_type": "AUTOINDEX"}
    index.add_index("dense", metric_type=DENSE_METRIC, **dense)
    index.add_index("domain", index_type="INVERTED")
    # a reader's filter then reads two scalar indexes, not every row's text: on Lite,
    # dense p50 through the filter 9.7 ms without it (7.6 ms unfiltered; README)
    index.add_index("access", index_type="INVERTED")
    if bm25:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(
            Function(
                name="text_bm25",
                function_type=FunctionType.BM25,
                input_field_names=["search_text"],
                output_field_names=["sparse"],
            )
        )
        index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return schema, index


def chunk_hit(entity: dict[str, Any], id_: str | None = None, score: float = 0.0) -> ChunkHit:
    """A row read with ``HIT_FIELDS`` (and ``dense``, where asked for) as a hit."""
    dense = entity.get("dense")
    return ChunkHit(
        id=id_ or entity["id"],
        doc_path=entity["doc_path"],
        domain=entity["domain"],
        title=entity["title"],
        heading=entity["heading"],
        chunk_index=int(entity["chunk_index"]),
        text=entity["text"],
        score=score,
        vector=np.asarray(dense, dtype=np.float32) if dense is not None else None,
    )


def chunk_row(chunk: ChunkRecord, *, access: bool) -> dict[str, Any]:
    """``chunk`` as a row of the collection: its texts cut to their fields' sizes, its
    vector a float32 array (the client and Milvus Lite's in-process insert take one as
    it is: no Python float per value), its access list only where the collection has
    the field (``access``)."""
    return {
        "id": chunk.id,
        "doc_path": chunk.doc_path,
        "domain": chunk.domain,
        "title": cut_to_bytes(chunk.title, TITLE_MAX),
        "heading": cut_to_bytes(chunk.heading, HEADING_MAX),
        "chunk_index": chunk.chunk_index,
        "content_hash": chunk.content_hash,
        "text": chunk.text[:_TEXT_CHARS],
        "search_text": chunk.search_text[:_TEXT_CHARS],
        "dense": np.asarray(chunk.vector, dtype=np.float32),
        **({"access": chunk.access} if access else {}),
    }


def kept_whole(row: dict[str, Any]) -> bool:
    """Whether ``chunk_row`` cut nothing of a row's search text (which holds its text)
    and heading.

    >>> kept_whole({"search_text": "T\\nT\\nrun it", "heading": "T"})
    True
    >>> kept_whole({"search_text": "x" * _TEXT_CHARS, "heading": "T"})
    False
    >>> kept_whole({"search_text": "run it", "heading": cut_to_bytes("标题" * 400, HEADING_MAX)})
    False
    """
    # a heading cut to bytes keeps more than HEADING_MAX - 4 of them
    return len(row["search_text"]) < _TEXT_CHARS and len(row["heading"].encode()) < HEADING_MAX - 3


def cut_to_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, whole characters only.

    >>> cut_to_bytes("订单退款", 7), cut_to_bytes("refund", 7)
    ('订单', 'refund')
    """
    if len(text) * 4 <= limit:
        return text  # the common case, without encoding
    encoded = text.encode()
    return text if len(encoded) <= limit else encoded[:limit].decode(errors="ignore")


def key_too_long(
    sizes: Mapping[str, int], keys: Mapping[str, str], *, in_bytes: bool
) -> str | None:
    """Why a collection whose key fields hold ``sizes`` (UTF-8 bytes ``in_bytes``, as a
    Milvus server counts; else characters, as Lite does) cannot hold a document's ``keys``;
    None when it can. Only a collection an earlier superbiz made is too small.

    >>> key_too_long({"doc_path": 1024}, {"doc_path": "运维/值班.md"}, in_bytes=True) is None
    True
    >>> key_too_long({"doc_path": 1024}, {"doc_path": "运维/" * 200}, in_bytes=True)[:48]
    'its path is 1,400 bytes, longer than the 1,024 t'
    """
    for name, value in keys.items():
        length = len(value.encode()) if in_bytes else len(value)
        if length > sizes.get(name, length):
            what = "path" if name == "doc_path" else name
            unit = "bytes" if in_bytes else "characters"
            return (
                f"its {what} is {length:,} {unit}, longer than the {sizes[name]:,} the vector "
                "index made by an earlier superbiz holds (`superbiz ingest PATH --rebuild` "
                "makes it anew)"
            )
    return None
