"""What every ``ChunkStore`` reads and writes, and how it scores and analyses text.

The records, the dense metric and BM25's analyzer belong to the store protocol
(``store.py``), not to one backend: Milvus, the in-memory store and search all share
them, so they are defined here, below every store.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from superbiz._text import CHINESE_FUNCTION_WORDS, STOP_WORDS, is_cjk
from superbiz.retrieval.relevance import Metric

DENSE_METRIC: Metric = "L2"

# English function words, written for this project. In a KB that is mostly Chinese they
# occur in few documents, so BM25 would weigh them like rare terms and match siblings on
# "has been only ... more than". Measured on dev: MRR 0.944 → 0.953 (see README).
ENGLISH_STOP_WORDS = (
    "a an the and or of to in on at by for with from as is are was were be been being it its "
    "this that these those has have had not no than then there their they which who what when "
    "where how will would can could should may might do does did so if but into over under "
    "more most only very also"
).split()
# Chinese function words and the CJK entries of the project's stop words: "的", "是否",
# "如何" carry no topic, and a question is full of them while its answer is not.
CHINESE_STOP_WORDS = sorted(
    CHINESE_FUNCTION_WORDS | {word for word in STOP_WORDS if any(is_cjk(ch) for ch in word)}
)
# jieba emits every punctuation mark, and Markdown's "##" or "--", as a token of its own;
# as terms they matched any chunk with a question mark or a heading.
PUNCTUATION_TOKENS = sorted(
    {*string.punctuation, *"，。、；：？！“”‘’（）【】《》〈〉「」『』…—～·"}
    | {"##", "###", "####", "#####", "--", "---", "...", "......", "**", "```", "->", "=>"}
)
# With 15 BM25 candidates, answer-only Chinese R@5 went 0.855 → 0.885 (README).
BM25_STOP_WORDS = [*ENGLISH_STOP_WORDS, *CHINESE_STOP_WORDS, *PUNCTUATION_TOKENS]
BM25_ANALYZER: dict[str, Any] = {
    "tokenizer": "jieba",
    "filter": ["lowercase", {"type": "stop", "stop_words": BM25_STOP_WORDS}],
}


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A chunk ready to be written: ``text`` is what BM25 indexes and what is shown."""

    id: str
    doc_path: str
    domain: str
    title: str
    heading: str
    chunk_index: int
    content_hash: str
    text: str  # what the model is shown
    search_text: str  # what BM25 indexes
    vector: np.ndarray
    #: its document's own access list (``superbiz.access.encode_access``; "": none), so
    #: that a chunk is filtered from the moment it is written, before its row lands
    access: str = ""


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """One search hit. ``score`` is the backend's raw value (squared L2 distance for
    dense, BM25 score as Milvus returned it); ``vector`` is kept for exact cosine."""

    id: str
    doc_path: str
    domain: str
    title: str
    heading: str
    chunk_index: int
    text: str
    score: float
    vector: np.ndarray | None = None


class ChunkWords(NamedTuple):
    """What a stored chunk was embedded from, as the store keeps it. Two chunks that agree
    on all three were embedded from the same text: the search text is the headline twice
    around what follows it, and what follows depends on the heading and text alone
    (``chunking.embedding_text``), so equal search texts with equal tails have equal
    headlines."""

    search_text: str
    heading: str
    text: str
