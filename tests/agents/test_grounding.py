"""Checked citations and the evidence test, on the answers real models gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from superbiz.agents.grounding import (
    Grounding,
    Source,
    check_citations,
    draws_on,
    ground,
    repair_prompt,
)
from superbiz.exceptions import LLMUnavailableError

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
        (  # values quoted from a log are not citations
            'The log shows table_ids="[100]" and ids=[7]: drop it [1].',
            {1},
            'The log shows table_ids="[100]" and ids=[7]: drop it [1].',
            (1,),
            0,
        ),
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


# -- the policy: check, one repair turn, the extractive answer -----------------------------

SOURCES = [Source(1, "Kubernetes pod CrashLoopBackOff runbook", "infrastructure/k8s.md", K8S)]
GOOD = (
    "Exit code 137 with reason OOMKilled means the memory limit was exceeded [1]; read the "
    "exit reason with kubectl describe pod and kubectl logs --previous [1]."
)
PARROT = "Based on what is available, configure the pod as follows. [1]"
QUOTED = "[Extractive answer] quoted\n\n[1] OOMKilled: memory limit exceeded [9]"


class Model:
    """Records the repair prompts it is given and answers from a list."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def run(answer: str, model: Model, sources: list[Source] = SOURCES) -> Grounding:
    return ground(answer, POD, "en", sources, repair=model, extractive=lambda: QUOTED)


def test_a_grounded_answer_is_kept_without_a_repair() -> None:
    model = Model()
    assert run(GOOD + " See [4].", model) == Grounding(GOOD + " See.", True, 1, "model", (1,))
    assert model.prompts == []


def test_a_parrot_gets_one_repair_turn_naming_the_documents() -> None:
    model = Model(GOOD)
    assert run(PARROT, model) == Grounding(GOOD, True, 0, "repaired", (1,))
    [prompt] = model.prompts
    assert "[1] Kubernetes pod CrashLoopBackOff runbook (infrastructure/k8s.md)" in prompt


@pytest.mark.parametrize("answer", ["", PARROT, "Generic advice from memory."])
def test_then_the_extractive_answer_from_the_same_documents(answer: str) -> None:
    grounding = run(answer, Model("Still generic [2]."))
    assert grounding.source == "extractive" and grounding.grounded
    assert grounding.answer == "[Extractive answer] quoted\n\n[1] OOMKilled: memory limit exceeded"
    assert grounding.invalid_citations == 1  # the repair's [2]; the fallback's own are dropped


def test_a_failed_repair_call_falls_back_too() -> None:
    assert run(PARROT, Model(LLMUnavailableError("down"))).source == "extractive"


def test_without_documents_nothing_is_repaired_and_nothing_is_grounded() -> None:
    model = Model()
    grounding = run("HikariCP maximum-pool-size [1]", model, [])
    assert grounding == Grounding("HikariCP maximum-pool-size", False, 1, "no_evidence")
    assert model.prompts == []


def test_repair_prompt_in_both_languages() -> None:
    for language in ("zh", "en"):
        assert "[1] Kubernetes pod" in repair_prompt(language, SOURCES)  # type: ignore[arg-type]


def test_a_quoting_player_is_checked_never_repaired() -> None:
    quoted = "[Extractive answer] label\n\n[1] short [7]\n\nSources:\n[1] title (path)"
    grounding = ground(quoted, POD, "en", SOURCES, repair=None, extractive=lambda: "unused")
    assert grounding == Grounding(
        "[Extractive answer] label\n\n[1] short\n\nSources:\n[1] title (path)",
        True,
        1,
        "model",
        (1,),
    )


# -- copies: an earlier answer or the documents written back are no answer ----------------

FOLLOW_UP = "What memory limit should the pod get then?"


def test_an_earlier_answer_written_back_is_a_copy_not_an_answer() -> None:
    """The live transcript's follow-up wrote back the previous turn's answer, [1] and all:
    it cites a document and draws on it, and still answers nothing new."""
    model = Model(GOOD)
    grounding = ground(
        GOOD, FOLLOW_UP, "en", SOURCES, repair=model, extractive=lambda: QUOTED, earlier=[GOOD]
    )
    assert grounding.copied == "turn" and grounding.source == "extractive"
    assert len(model.prompts) == 1  # one repair; it copied again
    # the same answer with no earlier turn to copy is an answer
    assert run(GOOD, Model()).source == "model"


def test_an_answer_wearing_the_extractive_label_is_a_copy() -> None:
    label = "【抽取式回答】模型的回答没有依据检索到的文档，以下内容直接摘自知识库。\n\n" + GOOD
    grounding = run(label, Model(GOOD))
    assert grounding.copied == "turn" and grounding.source == "repaired"


def test_the_documents_pasted_wholesale_are_a_copy_but_a_quoted_line_is_not() -> None:
    pasted = K8S[K8S.index("## Step") :][:600] + " [1]"
    assert run(pasted, Model(GOOD)) == Grounding(GOOD, True, 0, "repaired", (1,), "documents")
    cited = (
        "Run `kubectl -n <ns> rollout undo deploy/<name>` [1]; exit code 137 means OOMKilled [1]."
    )
    assert run(cited, Model()).copied is None


def test_only_a_document_that_bears_on_the_question_grounds_an_answer() -> None:
    """The answer selection decides what bears on the question (a Redis runbook carried
    from an earlier turn does not, for a question about pods): citing it grounds
    nothing; the repair prompt lists only what bears, with the passage that answers."""
    carried = Source(1, "Redis pool runbook", "infrastructure/redis.md", REDIS, bearing=False)
    fresh = Source(2, "Kubernetes pod CrashLoopBackOff runbook", "infrastructure/k8s.md", K8S)
    pool_answer = "maxTotal 太小时先看 SLOWLOG，再确认没有连接泄漏 [1]。"
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return GOOD.replace("[1]", "[2]")

    repaired = ground(pool_answer, POD, "en", [carried, fresh], repair=model, extractive=lambda: "")
    assert repaired.source == "repaired" and repaired.cited == (2,)
    assert "[2] Kubernetes pod" in prompts[0] and "Redis pool runbook" not in prompts[0]


def test_with_nothing_bearing_on_the_question_an_answer_has_no_evidence() -> None:
    """ "Who won the 2018 World Cup?" showed the chargeback FAQ (live run): an answer
    citing it is not grounded, whatever it says; its markers go, nothing is repaired."""
    faq = Source(1, "Chargeback FAQ", "payment/chargeback-faq.md", "A won dispute …", False)
    grounding = ground(
        "France won [1].",
        "Who won the 2018 World Cup?",
        "en",
        [faq],
        repair=Model(),
        extractive=lambda: "quoted",
    )
    assert grounding == Grounding("France won.", False, 0, "no_evidence")
