"""The answer model's part of a run: each document's opening encoded, as an answer
vector for its current content (``retrieval.answers``)."""

from __future__ import annotations

import time

from superbiz.knowledge.ingest.run import IngestRun
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.answers import AnswerEncoder, answer_head, to_bytes
from superbiz.storage.repository import StoredDocument

#: document openings encoded (and saved) at a time by the answer model
ANSWER_BATCH = 32
#: how often a long answer-model backfill tells serving processes of its new vectors: each
#: time they rebuild their exact and answer indexes, so not at every batch (1-4 s)
ANSWER_ANNOUNCE_S = 30.0


def encode_answers(kb: KnowledgeBase, run: IngestRun) -> None:
    """Encode the opening of every document without an answer vector for its current
    content: the ones this run wrote, and all of them when ``retrieval.answers`` was
    just turned on. A no-op without an answer model. The progress total grows by the
    documents to encode (about 0.13 s each on two cores)."""
    encoder = kb.answer_encoder
    if encoder is None:
        return
    chars = kb.settings.advanced.retrieval.answers.head_chars
    missing = kb.documents.without_answer_vector(encoder.name)
    if missing and run.on_total:
        run.on_total(len(run.found) + len(missing))
    announced, unannounced = time.monotonic(), False
    try:
        for start in range(0, len(missing), ANSWER_BATCH):
            batch = missing[start : start + ANSWER_BATCH]
            rows = _answer_rows(kb, run, batch, encoder, chars)
            announce = start + ANSWER_BATCH >= len(missing) or (
                time.monotonic() - announced >= ANSWER_ANNOUNCE_S
            )
            kb.documents.save_answer_vectors(encoder.name, rows, announce=announce)
            if announce:
                announced = time.monotonic()
            unannounced = not announce
            run.report.answers_encoded += len(batch)
            for doc in batch:
                run.tick(f"answer model: {doc.path}")
    finally:
        if unannounced:  # the run stopped part-way: what it saved is used
            kb.documents.announce_change()


def _answer_rows(
    kb: KnowledgeBase,
    run: IngestRun,
    batch: list[StoredDocument],
    encoder: AnswerEncoder,
    chars: int,
) -> list[tuple[str, str, bytes]]:
    """``(path, content_hash, vector)`` of each document's opening in ``batch``."""
    unread = [doc.path for doc in batch if doc.path not in run.heads]
    # the first chunk of each document an earlier ingest wrote, in one query
    first = {path: chunks[0].text for path, chunks in kb.store.chunks_of_documents(unread).items()}
    heads = [
        run.heads.get(doc.path) or answer_head(doc.title, first.get(doc.path, ""), chars)
        for doc in batch
    ]
    vectors = encoder.passages(heads)
    return [
        (doc.path, doc.content_hash, to_bytes(v)) for doc, v in zip(batch, vectors, strict=True)
    ]
