"""Whether a question points back at the turn before it (``refers_back``): grammar of
the two languages, checked on follow-ups and on questions that stand alone."""

from __future__ import annotations

import pytest

from superbiz.agents.follow_up import refers_back


@pytest.mark.parametrize(
    "question",
    [
        "And how do I lift the ban again?",  # an opening that continues, "again"
        "How do I turn it back on later?",  # a pronoun
        "Where are those jobs defined?",  # a demonstrative
        "What about the staging environment?",
        "如果那台机器丢了怎么恢复？",  # 那台: a demonstrative
        "它多久重试一次？",  # a pronoun
        "重试几次之后会放弃？",  # names no thing: what is retried was said before
        "那怎么办？",
    ],
)
def test_a_follow_up_points_back(question: str) -> None:
    assert refers_back(question)


@pytest.mark.parametrize(
    "question",
    [
        "How do I pause replay on the delayed replica?",
        "Kubelet has failed to renew its client certificate.",  # its owner is in the sentence
        "Clock is not synchronising. Ensure NTP is configured on this host.",
        "Who won the 2018 World Cup?",
        "Job failed to complete.",
        "如何对比上下游数据的一致性？",
        "UI 不能正常登陆访问",  # "UI" names the thing
        "商户说 webhook 一直没收到，我们这边要查什么？",
        "",
    ],
)
def test_a_question_that_stands_alone_does_not(question: str) -> None:
    assert not refers_back(question)
