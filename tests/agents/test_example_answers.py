"""What a person reads when asking the example KB with no model: the extractive answer's
quote of a runbook whose table the chunker cut in two."""

from __future__ import annotations

from superbiz.agents.runtime import open_runtime
from superbiz.knowledge.kb.base import KnowledgeBase

AUTH_RUNBOOK = "api/auth-errors-401-403.md"


def test_a_403_is_answered_with_every_403_row_of_a_table_cut_in_two(
    example_kb: KnowledgeBase,
) -> None:
    """The runbook's error-code table is longer than a chunk: its 40302 and 40303 rows
    were a window of cells under no header, and the answer quoted the window before,
    the 401 rows and one 403 row."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)  # the default: no LLM
    turn = runtime.ask("example-403", "Requests fail with 403 although the token is valid").result

    assert [c.path for c in turn.citations] == [AUTH_RUNBOOK]
    quote = turn.answer.split("\n\n[1] ", 1)[1].split("\n\nSources:", 1)[0]
    assert "| HTTP | Code | Meaning | Usual fix |\n|------|" in quote, quote
    rows = [line for line in quote.splitlines() if line.startswith("| 403 |")]
    assert [row.split("`")[1] for row in rows] == ["40301", "40302", "40303"], quote
