"""What a person reads when asking the example KB with no model: the extractive answer's
quote of a runbook whose table the chunker cut in two."""

from __future__ import annotations

import re
import uuid

import pytest

from superbiz.agents.runtime import open_runtime
from superbiz.agents.turn_result import TurnResult
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


WEBHOOK_RUNBOOK = "api/webhook-delivery-retries.md"


def test_a_conversation_that_keeps_pointing_back_stays_on_its_subject(
    example_kb: KnowledgeBase,
) -> None:
    """Three turns about a merchant's missing webhooks: "what about signature failures?"
    asks the first question again of something else, so the webhook runbook is quoted
    beside the payment channel's row that shares its words; "after how many retries does
    it give up?" points back through it to the webhooks. It had been read with the
    signature question alone, found nothing and said so."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    session = "example-webhooks"
    runtime.ask(session, "商户说 webhook 一直没收到，我们这边要查什么？")

    instead = runtime.ask(session, "那签名校验失败呢？").result
    retries = runtime.ask(session, "重试几次之后会放弃？").result

    assert WEBHOOK_RUNBOOK in [c.path for c in instead.citations]
    assert [c.path for c in retries.citations] == [WEBHOOK_RUNBOOK]
    assert "After the 7th failed attempt" in retries.answer


def test_a_question_in_other_function_words_than_its_runbook_is_answered(
    example_kb: KnowledgeBase,
) -> None:
    """ "切换之后怎么确认数据没丢？": the failover runbook's checklist says 切换后, and the
    question's 之后 had counted as a key term it lacks, so the lexical rule that stands in
    for a short question's low cosine did not, and nothing was found."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("example-failover", "切换之后怎么确认数据没丢？").result

    assert [c.path for c in turn.citations] == ["database/mysql-failover.md"]
    assert turn.answer_source == "extractive"


def test_a_question_in_the_passive_is_answered(example_kb: KnowledgeBase) -> None:
    """ "主从切换期间业务会受影响吗？": jieba cuts 会受 (will suffer) as a word, no runbook
    holds it, and the failover runbook's best passage fell under a quote's score."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("example-passive", "主从切换期间业务会受影响吗？").result

    assert [c.path for c in turn.citations] == ["database/mysql-failover.md"]


def test_a_follow_up_pointing_at_a_payment_said_before_is_answered(
    example_kb: KnowledgeBase,
) -> None:
    """ "这笔" (this payment) points back as "这个" does; the follow-up had stood alone, found
    nothing in its own words and said so."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    runtime.ask("example-payment", "用户付了钱但订单一直显示未支付，回调没收到怎么办？")
    turn = runtime.ask("example-payment", "要是渠道那边也查不到这笔呢？").result

    assert [c.path for c in turn.citations] == ["payment/payment-failure-troubleshooting.md"]


def test_a_replanned_turn_does_not_call_its_own_documents_earlier(
    example_kb: KnowledgeBase,
) -> None:
    """With no model, "load balancer health check" finds only REFERENCE documents, and the
    supervisor plans once more; the second run reads what the first showed as evidence,
    and its quote had been labelled "(shown earlier in this session)" in a fresh session."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    question = "How do I know if the load balancer health check is misconfigured?"
    turn = runtime.ask("example-replan", question)

    assert turn.replan is not None and turn.result.citations
    assert "shown earlier" not in turn.result.answer


def test_an_error_number_two_runbooks_explain_is_answered(example_kb: KnowledgeBase) -> None:
    """ "ERROR 1290" is explained by the failover runbook and by the pool runbook; the lexical
    rule let a code name its document only when no other ranked document held it, the
    cosine of two words is low, and the lookup found nothing."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("example-1290", "ERROR 1290").result

    assert [c.path for c in turn.citations][:1] == ["database/mysql-failover.md"]
    assert "ERROR 1290" in turn.answer


def test_a_question_in_another_inflection_than_its_runbook_finds_it(
    example_kb: KnowledgeBase,
) -> None:
    """ "Where is the statement file downloaded from?": the reconciliation runbook ranks
    first and says "downloads"; the lexical rule that stands in for a low cosine wanted
    "downloaded" itself, and the lookup found nothing. It finds the runbook now (its
    passage, whose words are matched as written, still scores under a quote's)."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("example-statement", "Where is the statement file downloaded from?")

    first = turn.result.lookups[0]
    assert first.result is not None and first.result.found
    shown = [*turn.result.citations, *turn.result.related]
    assert "payment/reconciliation-mismatch.md" in [c.path for c in shown]


def _first_quote(answer: str) -> str:
    """The heading path and text of an extractive answer's first quote."""
    return answer.split("\n\n[1] ", 1)[1].split("\n\n", 2)[0]


@pytest.mark.parametrize(
    ("question", "path", "heading", "said"),
    [
        # a FAQ entry asked with its case before it: the cosine preferred the entry about a
        # refund already issued (customers disputing)
        (
            "A customer disputed a card payment, how long do we have to respond?",
            "payment/chargeback-faq.md",
            "How long do we have to respond?",
            "7 calendar days",
        ),
        # the runbook's "Alerts" table had a better cosine
        (
            "How do I check for inactive replication slots?",
            "database/postgres-replication-lag.md",
            "Inactive replication slots",
            "pg_drop_replication_slot",
        ),
        # the runbook's opening had
        (
            "How do I resend a webhook that failed?",
            "api/webhook-delivery-retries.md",
            "Manual resend",
            "webhook-admin resend",
        ),
    ],
)
def test_the_section_headed_by_what_is_asked_is_quoted(
    example_kb: KnowledgeBase, question: str, path: str, heading: str, said: str
) -> None:
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask(f"example-{heading}", question).result

    assert [c.path for c in turn.citations] == [path]
    assert _first_quote(turn.answer).split("\n", 1)[0].endswith(f"› {heading}"), turn.answer
    assert said in turn.answer


def test_who_to_escalate_to_is_asked_of_the_runbook_before(example_kb: KnowledgeBase) -> None:
    """ "Who should I escalate to?" names nothing of its own: after a question about a
    crash-looping pod it is the CrashLoopBackOff runbook's "Escalation". It had stood
    alone, found the chargeback FAQ's escalation entry a mere reference and answered
    nothing; read with the question before, it quoted that runbook's exit-code table
    (every section's cosine with it is noise)."""
    turn = _follow_up(
        example_kb,
        "My pod keeps restarting with CrashLoopBackOff, what do I check first?",
        "Who should I escalate to?",
    )

    assert [c.path for c in turn.citations] == ["infrastructure/k8s-crashloopbackoff.md"]
    assert "› Escalation" in _first_quote(turn.answer)
    assert "platform on-call" in turn.answer


REDIS_RUNBOOK = "infrastructure/redis-pool-and-eviction.md"


def test_how_to_handle_it_quotes_the_section_headed_handling(example_kb: KnowledgeBase) -> None:
    """ "怎么处理？" after the Redis pool: the runbook stores its "排查步骤" and "处理" as one
    passage, headed by the first, and the quote ran the checks, the fixes and the next
    part's "症状" together under "排查步骤"; the section headed 处理 is the answer."""
    turn = _follow_up(example_kb, "Redis 连接池耗尽了", "怎么处理？")

    assert [c.path for c in turn.citations] == [REDIS_RUNBOOK]
    quote = _whole_first_quote(turn.answer)
    assert quote.split("\n", 1)[0].split(" （")[0].endswith("› 处理"), quote
    assert "临时扩大连接池" in quote
    assert "SLOWLOG" not in quote and "used_memory" not in quote


def test_what_to_check_first_is_asked_of_the_runbook_before(example_kb: KnowledgeBase) -> None:
    """ "What do I check first?" names no thing: its lookup had run alone, found nothing,
    and the answer quoted the payment runbook listed beside the Redis one."""
    turn = _follow_up(example_kb, "Redis 连接池耗尽了", "What do I check first?")

    assert "Redis" in turn.lookups[0].arguments["query"]
    assert [c.path for c in turn.citations] == [REDIS_RUNBOOK]
    quote = _whole_first_quote(turn.answer)
    assert "› 排查步骤" in quote.split("\n", 1)[0] and "SLOWLOG" in quote, quote
    # a section after one with nothing under it says where it is
    assert "› 二、内存打满与淘汰 › 症状" in turn.answer


def test_what_to_delete_safely_is_asked_of_the_runbook_before(example_kb: KnowledgeBase) -> None:
    """ "What can I delete safely?" after a full node disk names no thing: it had stood
    alone, found nothing and said so."""
    turn = _follow_up(example_kb, "Node disk is full", "What can I delete safely?")

    assert [c.path for c in turn.citations] == ["infrastructure/node-disk-full.md"]
    assert "crictl rmi --prune" in _whole_first_quote(turn.answer)


def test_how_many_retries_quotes_the_retry_schedule(example_kb: KnowledgeBase) -> None:
    """ "How many times do you retry?" after failing webhooks: "many" and "times" had
    counted as words the heading "Retry schedule" lacks, and the delivery contract was
    quoted."""
    turn = _follow_up(
        example_kb,
        "Our webhook deliveries keep failing, what should I look at?",
        "How many times do you retry?",
    )

    assert [c.path for c in turn.citations] == [WEBHOOK_RUNBOOK]
    assert (
        _whole_first_quote(turn.answer)
        .split("\n", 1)[0]
        .startswith('"Webhook delivery and retries" › Retry schedule')
    ), turn.answer


def test_a_setting_asked_in_camel_case_finds_the_runbook_writing_it_in_words(
    example_kb: KnowledgeBase,
) -> None:
    """ "What should maximumPoolSize be?": the HikariCP runbook writes Spring's
    ``maximum-pool-size``; no passage named the question's one term, and the answer said
    none answered well."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    turn = runtime.ask("example-pool-size", "What should maximumPoolSize be?").result

    assert [c.path for c in turn.citations] == ["database/mysql-hikaricp-tuning.md"]
    assert "maximum-pool-size" in _whole_first_quote(turn.answer)


def _follow_up(example_kb: KnowledgeBase, first: str, then: str) -> TurnResult:
    """The second turn of a new session on the example KB: ``first``, then ``then``."""
    runtime = open_runtime(example_kb.settings, kb=example_kb)
    session = f"example-{uuid.uuid4().hex}"
    runtime.ask(session, first)
    return runtime.ask(session, then).result


def _whole_first_quote(answer: str) -> str:
    """An extractive answer's first quote, its heading path first, up to its sources."""
    quoted = answer.split("\n\n[1] ", 1)[1]
    return re.split(r"\n\n(?:\[2\] |Sources:|来源：)", quoted, maxsplit=1)[0]
