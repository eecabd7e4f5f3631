"""Whether a question points back at the turn before it (``refers_back``), at what
(``referent``), and whether it asks that again of something else (``asks_instead``):
grammar of the two languages, checked on follow-ups and on questions that stand alone."""

from __future__ import annotations

import pytest

from superbiz.agents.follow_up import (
    REFERENT_QUESTIONS,
    asks_instead,
    names_nothing,
    referent,
    refers_back,
)


@pytest.mark.parametrize(
    "question",
    [
        "And how do I lift the ban again?",  # an opening that continues, "again"
        "How do I turn it back on later?",  # a pronoun
        "Where are those jobs defined?",  # a demonstrative
        "What about the staging environment?",
        "What if we lose?",  # a hypothetical continuing the case before it
        "如果那台机器丢了怎么恢复？",  # 那台: a demonstrative
        "要是渠道那边也查不到这笔呢？",  # 这笔: a payment said before
        "这单还能退款吗？",
        "签名校验失败呢？",  # "what about …?": the question before, of something else
        "它多久重试一次？",  # a pronoun
        "重试几次之后会放弃？",  # names no thing: what is retried was said before
        "那怎么办？",
        "Who should I escalate to?",  # names no thing: one verb, closed-class words
        "What do we do next?",
        "How long do I need to wait?",
        "How many times do you retry?",  # a count of times, then one verb
        "What can I delete safely?",  # an adverb of manner after the verb
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
        "What is EXHAUSTED?",  # names its thing
        "How do I rotate the signing keys?",
        "Who should I escalate a chargeback to?",
        "How do I install Plotly?",  # a name, though it ends in "ly"
        "如何对比上下游数据的一致性？",
        "UI 不能正常登陆访问",  # "UI" names the thing
        "商户说 webhook 一直没收到，我们这边要查什么？",
        "TiDB 有像 Oracle 那样的 Flashback Query 功能么？",  # 那样 points inside it
        "",
    ],
)
def test_a_question_that_stands_alone_does_not(question: str) -> None:
    assert not refers_back(question)


def test_a_follow_up_of_a_follow_up_points_back_to_what_stood_alone() -> None:
    asked = ["How do I rotate the keys?", "商户说 webhook 一直没收到？", "那签名校验失败呢？"]
    assert referent(asked) == "商户说 webhook 一直没收到？\n那签名校验失败呢？"
    assert referent(asked[:2]) == "商户说 webhook 一直没收到？"


def test_a_chain_of_follow_ups_is_read_back_only_so_far() -> None:
    asked = ["Where is it?", "And then?", "What about it?", "And again?", "Why them?"]
    assert referent(asked) == "\n".join(asked[-REFERENT_QUESTIONS:])


@pytest.mark.parametrize(
    "question",
    [
        "那签名校验失败呢？",
        "退款呢",
        "What about the staging environment?",
        "And how about refunds?",
        "And for a lead?",  # after "What are the expectations for a senior designer?"
        "And on the staging cluster?",
    ],
)
def test_what_about_asks_the_question_before_again(question: str) -> None:
    assert asks_instead(question)


@pytest.mark.parametrize(
    "question",
    [
        "使用 MySQL CDC，增量阶段读取出来的 timestamp 字段时区相差8小时，怎么回事呢？",
        "TiDB 是否支持修改 server 版本号呢？",
        "MongoDB CDC 支持从 checkpoint 恢复吗? 原理是怎么样的呢？",
        "Clock is not synchronising. Ensure NTP is configured on this host.",
        "重试几次之后会放弃？",
        "And how do I lift the ban again?",  # a whole question of its own
        "And is it safe to delete the pod?",
    ],
)
def test_a_whole_question_ending_in_ne_does_not(question: str) -> None:
    assert not asks_instead(question)


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What do I check first?", False),
        ("Who should I escalate to?", False),
        ("How long do we wait?", False),
        ("What do I check on the Redis pool?", True),
        ("How do I rotate the signing keys?", True),
        ("怎么处理？", True),  # Chinese says so by no key term (the executor reads both)
    ],
)
def test_an_english_question_of_one_verb_names_nothing(question: str, names: bool) -> None:
    assert names_nothing(question) is not names
