"""Checked citations and the evidence test, on the answers real models gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from superbiz.agents.grounding import check_citations, draws_on

CORPUS = Path(__file__).parents[2] / "src" / "superbiz" / "examples" / "corpus" / "infrastructure"
K8S = (CORPUS / "k8s-crashloopbackoff.md").read_text(encoding="utf-8")
REDIS = (CORPUS / "redis-pool-and-eviction.md").read_text(encoding="utf-8")
POD = "Pod keeps restarting with exit code 137, what should I check?"
POOL = "支付回调超时，是不是 Redis 连接池的问题？"


@pytest.mark.parametrize(
    ("answer", "valid", "expected", "cited", "invalid"),
    [
        ("Raise the limit [1].", {1}, "Raise the limit [1].", (1,), 0),
        ("Raise the limit [1].", set(), "Raise the limit.", (), 1),  # the transcripts' [1]
        ("A [2][7]. B [1, 7] and C [ref 3]", {1, 2, 3}, "A [2]. B [1] and C [3]", (2, 1, 3), 2),
        (
            "调大 maxTotal【1】，检查慢命令【1，2】。",
            {1},
            "调大 maxTotal[1]，检查慢命令[1]。",
            (1,),
            1,
        ),
        ("No document here.", {1}, "No document here.", (), 0),
        (
            "Use `a[0]` and\n```\nx[1]\n```\nthen [12] [3]",
            {12},
            "Use `a[0]` and\n```\nx[1]\n```\nthen [12]",
            (12,),
            1,
        ),
    ],
)
def test_check_citations(
    answer: str, valid: set[int], expected: str, cited: tuple[int, ...], invalid: int
) -> None:
    check = check_citations(answer, valid)
    assert (check.answer, check.cited, check.invalid) == (expected, cited, invalid)


@pytest.mark.parametrize(
    ("question", "answer", "document"),
    [
        (POOL, "基于已有信息，连接池配置建议如下，但具体参数值需结合实际负载调整。[1]", REDIS),
        (
            POD,
            "Based on what is available, configure the pod as follows; exact values depend on "
            "your load. [1]",
            K8S,
        ),
        (POD, "Check the pod [1].", K8S),  # nothing of its own
    ],
)
def test_prompt_copies_do_not_draw_on_the_evidence(
    question: str, answer: str, document: str
) -> None:
    assert not draws_on(answer, question, [document])


@pytest.mark.parametrize(
    ("question", "answer", "document"),
    [
        (
            POD,
            "Exit code 137 with reason OOMKilled means the memory limit was exceeded [1]. Run "
            "kubectl describe pod and kubectl logs --previous to read the exit reason [1].",
            K8S,
        ),
        (
            POD,
            "退出码 137 且原因为 OOMKilled 表示超出内存限制 [1]；"
            "先用 kubectl describe pod 查看 Last State，再调高 memory limit [1]。",
            K8S,
        ),
        (
            POOL,
            "可能是 Redis 连接池耗尽：日志出现 Could not get a resource from the pool 时，"
            "检查 maxTotal 和慢命令 [1]。",
            REDIS,
        ),
    ],
)
def test_answers_from_the_runbook_draw_on_it(question: str, answer: str, document: str) -> None:
    assert draws_on(answer, question, [document])
    assert not draws_on(answer, question, [])
