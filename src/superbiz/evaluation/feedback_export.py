"""``superbiz feedback export``: a team's own benchmark from its own rated questions.

The dataset has the layout ``eval retrieval`` and ``eval agent`` read: ``corpus/`` (each
document's file, at its knowledge-base path) and ``queries.jsonl``, whose gold is the
documents a thumbs-up answer cited. Questions rated down are listed apart in
``rated-down.jsonl`` without gold (what the answer cited was wrong; the right document
may not exist yet). ``recorded.json`` says what the recorded turns found, so a run of
``eval retrieval`` on the dataset can be set beside it: on an unchanged knowledge base
the two agree, and after a settings change the difference is the change's effect on
the team's own traffic.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from superbiz._text import detect_language
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.kb.withheld import withheld_turns
from superbiz.storage.chat import ChatMessage, ChatRepository
from superbiz.storage.feedback import FeedbackRepository
from superbiz.storage.invocations import InvocationRepository
from superbiz.storage.repository import DocumentRepository

_REF = re.compile(r"\[(\d+)\]")


def cited_paths(answer: ChatMessage) -> list[str]:
    """The documents the answer cites by ``[n]``; all its evidence when it cites none
    by number (an extractive answer quotes every document it shows)."""
    refs = {int(n) for n in _REF.findall(answer.content)}
    cited = [item["path"] for item in answer.evidence if item.get("ref") in refs]
    return cited or [item["path"] for item in answer.evidence]


def export_feedback(
    engine: Engine, out: Path, *, may_read: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """Write the dataset under ``out`` (which must be empty or absent); returns counts.
    ``may_read`` (a restricted reader's rule): only the documents it allows, and only the
    rated turns whose answer cited nothing else."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SuperbizError(f"{out} is not an empty folder: choose a new one for the dataset")
    documents = [
        doc for doc in DocumentRepository(engine).all() if may_read is None or may_read(doc.path)
    ]
    if not documents:
        raise SuperbizError("the knowledge base has no documents to export")
    chats = ChatRepository(engine)
    invocations = InvocationRepository(engine)
    corpus = out / "corpus"
    copied, missing = 0, []
    for doc in documents:
        source = Path(doc.source_file)
        if not source.is_file():
            missing.append(doc.path)
            continue
        target = corpus / doc.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied += 1
    known = {doc.path for doc in documents} - set(missing)

    queries: list[dict[str, Any]] = []
    down: list[dict[str, Any]] = []
    recorded_first: list[bool] = []
    skipped = 0
    by_session: dict[str, list[ChatMessage]] = {}
    for rating in FeedbackRepository(engine).since(None):
        messages = by_session.setdefault(rating.session_id, chats.messages(rating.session_id))
        turn = [m for m in messages if m.turn == rating.turn]
        question = next((m for m in turn if m.role == "user"), None)
        answer = next((m for m in turn if m.role == "assistant"), None)
        if question is None or answer is None:
            # an MCP session's lookups: no answer cited anything (for a restricted reader
            # not counted either: what they found is not its to know)
            skipped += may_read is None
            continue
        if may_read is not None and withheld_turns([answer], may_read):
            continue  # a turn the reader may not see: not even counted
        entry_id = f"{rating.session_id}#{rating.turn}"
        cited = [path for path in cited_paths(answer) if path in known]
        if rating.rating == "down":
            down.append(
                {
                    "id": entry_id,
                    "query": question.content,
                    "lang": detect_language(question.content),
                    "comment": rating.comment,
                    "cited": cited,
                }
            )
            continue
        if not cited:
            skipped += 1
            continue
        queries.append(
            {
                "id": entry_id,
                "query": question.content,
                "lang": detect_language(question.content),
                "gold": cited,
                "kind": "feedback",
                "category": cited[0].split("/")[0] if "/" in cited[0] else "general",
            }
        )
        calls = [
            c
            for c in invocations.for_session(rating.session_id)
            if c.turn == rating.turn and c.executed and c.retrieval_details
        ]
        first = (calls[0].retrieval_details or {}).get("shown", []) if calls else []
        recorded_first.append(bool(first) and first[0] in cited)

    out.mkdir(parents=True, exist_ok=True)
    _write_jsonl(out / "queries.jsonl", queries)
    _write_jsonl(out / "rated-down.jsonl", down)
    summary = {
        "dataset": str(out),
        "documents": copied,
        "documents_missing": missing,
        "queries": len(queries),
        "rated_down": len(down),
        "skipped": skipped,
        # what the recorded turns found: the first lookup's first document was gold
        "recorded": {
            "recall@1": round(sum(recorded_first) / len(recorded_first), 6)
            if recorded_first
            else None,
        },
    }
    (out / "recorded.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(_README, encoding="utf-8")
    return summary


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")


_README = """# Feedback dataset (superbiz feedback export)

- `corpus/`: the knowledge base's documents, at their knowledge-base paths.
- `queries.jsonl`: questions whose answers were rated up; `gold` is the documents the
  answer cited. Run `superbiz eval retrieval DIR` or `superbiz eval agent DIR`.
- `rated-down.jsonl`: questions whose answers were rated down, with the comment and what
  the answer cited; no gold.
- `recorded.json`: counts, and what the recorded turns found (`recorded.recall@1`: the
  first lookup's first document was gold), to set beside `eval retrieval`'s numbers.
"""
