"""No parrot bait: nothing in a prompt can be copied as a whole answer, plan or citation.

Qwen2.5-Coder-1.5B answered two questions with the executor prompt's example sentence and
a ``[1]`` that named nothing, and planned ``"payment"`` / ``"..."`` straight from the
planner's example (tests/data/llm-transcripts). Examples are now patterns with
``<placeholders>`` a copy cannot satisfy.
"""

from __future__ import annotations

import json
import re

import pytest

from superbiz.agents.prompts import load_prompt

LANGUAGES = ("zh", "en")
QUOTED = re.compile(r"[\"“]([^\"”]{8,})[\"”]")
COPIED_FROM_OLD_PROMPTS = (
    "基于已有信息，连接池配置建议如下",
    "Based on what is available, configure",
    "HikariCP",
)


@pytest.mark.parametrize("language", LANGUAGES)
def test_executor_prompt_quotes_only_patterns(language: str) -> None:
    prompt = load_prompt("chat-executor-prompt", language)  # type: ignore[arg-type]
    assert not re.search(r"\[\d+\]", prompt)  # no citation a model can copy without a document
    for quoted in QUOTED.findall(prompt):
        assert "<" in quoted, f"a copyable example: {quoted!r}"
    for sentence in COPIED_FROM_OLD_PROMPTS:
        assert sentence not in prompt


@pytest.mark.parametrize("language", LANGUAGES)
def test_planner_example_names_no_real_domain(language: str) -> None:
    prompt = load_prompt("chat-planner-prompt", language)  # type: ignore[arg-type]
    line = next(x for x in prompt.splitlines() if x.startswith("{{"))
    example = json.loads(line.replace("{{", "{").replace("}}", "}"))
    [domain] = example["domains"]
    assert domain["domain"].startswith("<") and domain["sub_question"].startswith("<")


@pytest.mark.parametrize(
    ("language", "precise", "highly_relevant"),
    [
        ("en", "the document your question names", "this document answers the question"),
        ("zh", "问题点名的文档", "这篇文档回答了问题"),
    ],
)
def test_the_executor_is_told_what_each_level_means(
    language: str, precise: str, highly_relevant: str
) -> None:
    """The contract the levels keep (issue 22): PRECISE is the document the question
    names (an exact key specific to this KB), HIGHLY_RELEVANT one that answers it."""
    prompt = load_prompt("chat-executor-prompt", language)  # type: ignore[arg-type]
    lines = {line.split("→")[0].strip(): line for line in prompt.splitlines() if "→" in line}
    assert precise in lines["- `relevance_level=PRECISE`"]
    assert highly_relevant in lines["- `relevance_level=HIGHLY_RELEVANT`"]
