"""What an answer quotes of a passage: an item of a loose list under the item it is in, what
an item holds indented below it."""

from __future__ import annotations

from pathlib import Path

import superbiz
from superbiz.agents.answer_selection import question_terms
from superbiz.agents.passage_quote import PASSAGE_CHARS, best_passage

EXAMPLES = Path(superbiz.__file__).parent / "examples" / "corpus"

#: TiDB's troubleshooting map writes its cases as a loose list, each case's parts indented
#: below it, a blank line between every item
OOM = """### 3.2 OOM 问题

- 3.2.1 现象

    - 客户端：客户端收到 TiDB server 报错 `ERROR 2013 (HY000): Lost connection to MySQL server`

    - 日志：`Out of memory` 出现在 dmesg 中

- 3.2.2 原因

    - 一条 SQL 读了太多数据。
"""


def test_a_nested_item_of_a_loose_list_is_quoted_under_its_parent() -> None:
    quote = best_passage(OOM, ["客户端", "2013"]).text
    assert quote.startswith("- 3.2.1 现象\n\n    - 客户端：客户端收到 TiDB server 报错"), quote
    assert "3.2.2" not in quote


def test_items_under_a_chosen_parent_keep_their_indent() -> None:
    assert best_passage(OOM, ["原因"]).text.startswith("- 3.2.2 原因")
    quote = best_passage(OOM, ["现象", "客户端"]).text  # the parent chosen itself: once
    assert quote.startswith("- 3.2.1 现象\n\n    - 客户端：客户端收到 TiDB server 报错"), quote
    assert quote.count("3.2.1") == 1


#: Harbor's garbage-collection page: a step's image and list are indented below it
STEP = """## Schedule Garbage Collection

1. Use the drop down-menu to select how often to run garbage collection.

    ![Schedule garbage collection](../../img/gc-policy.png)

    * **None**: No garbage collection is scheduled.
    * **Hourly**: Run garbage collection at the beginning of every hour.

1. For the **Workers** item, select how many workers run garbage collection.
"""
#: RocketMQ's consumer page: each item holds a code block, the next item right below it
ITEMS = """## 消息重试

若达到最大重试次数后消息还没有成功被消费，则消息将被投递至死信队列
- 最大重试次数：消息消费失败后，可被重复投递的最大次数。

  ```java
  consumer.setMaxReconsumeTimes(10);
  ```
- 重试间隔：消息消费失败后再次被投递给Consumer消费的间隔时间。

  ```java
  consumer.setSuspendCurrentQueueTimeMillis(5000);
  ```
"""


def test_what_an_item_holds_below_it_stays_below_it() -> None:
    """Only a paragraph's first line had lost its indent: "* **Hourly**" read as an item
    of "* **None**", and the code block stood apart from the item that holds it."""
    quote = best_passage(STEP, ["garbage", "collection", "schedule"]).text
    assert quote.startswith(
        "1. Use the drop down-menu to select how often to run garbage collection.\n\n"
        "    ![Schedule garbage collection](../../img/gc-policy.png)\n\n"
        "    * **None**: No garbage collection is scheduled.\n"
        "    * **Hourly**: Run garbage collection at the beginning of every hour.\n\n"
        "1. For the **Workers** item"
    ), quote
    quote = best_passage(ITEMS, ["重试", "次数"]).text
    assert "次数。\n\n  ```java\n  consumer.setMaxReconsumeTimes(10);\n  ```\n- 重试间隔" in quote


def test_an_indented_paragraph_under_no_quoted_item_starts_at_the_margin() -> None:
    """Four spaces before it would make it a code block."""
    quote = best_passage(STEP, ["img"]).text
    assert quote == "![Schedule garbage collection](../../img/gc-policy.png)", quote


def test_a_table_too_long_is_quoted_by_the_rows_naming_the_question() -> None:
    """The example KB's error-code table, 930 characters: cut at its last whole row, the
    quote for a 403 held only 401 rows."""
    runbook = EXAMPLES / "api" / "auth-errors-401-403.md"
    terms = question_terms("Requests fail with 403 although the token is valid")
    body = runbook.read_text(encoding="utf-8").split("---\n", 2)[2]  # past its frontmatter
    quote = best_passage(body, terms).text
    assert quote.startswith("| HTTP | Code | Meaning | Usual fix |\n|------|"), quote
    assert all(f"`{code}`" in quote for code in ("40301", "40302", "40303")), quote
    assert "`40103`" not in quote  # a 401 row that names nothing asked
    assert quote.endswith("\n…")
    assert len(quote) <= PASSAGE_CHARS


def test_a_table_that_fits_or_names_nothing_asked_is_quoted_from_its_first_rows() -> None:
    table = "| Code | Meaning |\n|---|---|\n" + "\n".join(f"| {n} | case {n} |" for n in range(9))
    assert best_passage(f"## Codes\n\n{table}", ["codes"]).text == table
    quote = best_passage(f"## Codes\n\n{table}", ["codes"], limit=60).text
    assert quote.startswith("| Code | Meaning |\n|---|---|\n| 0 | case 0 |") and quote.endswith("…")


#: a knowledge-base article as Longhorn writes them: what the user sees, then why, then
#: the fix
ARTICLE = """## Symptoms

The instance manager pods are restarted every hour.

## Reason

The cluster has a default PriorityClass but the PriorityClass setting is empty, so the
pods are recreated at every hourly resync.

### Solution

Set the PriorityClass setting to the default PriorityClass.
"""


def test_a_stated_problem_hands_the_quote_to_what_follows_it() -> None:
    """ "Symptoms" repeat the question word for word and answer nothing."""
    terms = question_terms("Why are the instance manager pods restarted every hour?")
    quote = best_passage(ARTICLE, terms)
    assert quote.heading == "Reason"
    assert quote.text.startswith("The cluster has a default PriorityClass"), quote.text
    assert quote.text.endswith(
        "› Solution\n\nSet the PriorityClass setting to the default PriorityClass."
    )
    assert "restarted every hour" not in quote.text


def test_a_question_asking_for_the_symptoms_gets_them() -> None:
    terms = question_terms("What are the symptoms of instance manager pods restarting?")
    assert best_passage(ARTICLE, terms).heading == "Symptoms"


def test_a_statement_with_nothing_after_it_that_bears_is_still_quoted() -> None:
    article = ARTICLE.split("## Reason")[0] + "## Related information\n\n* issue 2820\n"
    terms = question_terms("Why are the instance manager pods restarted every hour?")
    assert best_passage(article, terms).heading == "Symptoms"


def test_read_from_the_start_every_section_in_order_under_its_heading() -> None:
    quote = best_passage(ARTICLE, ["priorityclass"], from_start=True)
    assert quote.heading == "Symptoms"
    assert quote.text.split("\n\n")[:3] == [
        "The instance manager pods are restarted every hour.",
        "› Reason",
        "The cluster has a default PriorityClass but the PriorityClass setting is empty, so the\n"
        "pods are recreated at every hourly resync.",
    ]


def test_a_passage_naming_nothing_asked_is_read_under_its_headings() -> None:
    """With no term of the question named, the passage is quoted from its start, and a
    section after the first says where it begins: the checks, the fixes and the next
    part's symptoms had read as one list under "排查步骤"."""
    passage = (
        "### 排查步骤\n\nredis-cli SLOWLOG GET 20\n\n### 处理\n\n- 扩大连接池\n\n"
        "## 二、内存打满与淘汰\n\n### 症状\n\n- used_memory > 90%"
    )
    quote = best_passage(passage, [])

    assert quote.heading == "排查步骤"
    assert quote.text.split("\n\n") == [
        "redis-cli SLOWLOG GET 20",
        "› 处理",
        "- 扩大连接池",
        "› 二、内存打满与淘汰 › 症状",
        "- used_memory > 90%",
    ]


#: a runbook section whose steps announce a long block: the quote fills up before it
RESTORE = (
    "## Restore the replica\n\n"
    + " ".join(["The replica falls behind when its WAL archive is missing segments."] * 8)
    + "\n\n1. Stop the replica.\n2. Restore the base backup with these commands:\n\n"
    + "   ```sh\n"
    + "\n".join(f"   pg_basebackup -h primary -D /data/replica-{n} -X stream" for n in range(12))
    + "\n   ```\n\n3. Start the replica.\n"
)


def test_a_quote_never_ends_on_the_line_announcing_what_it_left_out() -> None:
    """Its 700 characters spent, the quote had ended on "these commands:"; the block's
    opening now follows, cut and closed inside the list item it belongs to."""
    quote = best_passage(RESTORE, ["replica", "wal", "restore"]).text
    assert not quote.rstrip().endswith(":"), quote
    head, _, block = quote.partition("2. Restore the base backup with these commands:\n\n")
    assert head and block.startswith("   ```sh\n   pg_basebackup -h primary -D /data/replica-0")
    assert block.endswith("\n   …\n   ```"), block  # cut, closed at the item's indent
    assert len(quote) <= PASSAGE_CHARS + 240


#: 37signals' handbook: a sentence on its own, then the list it is about, longer than the
#: room the sentence leaves
FIRST_DAYS = (
    "## Your First Few Days\n\n"
    "Your welcome project will also contain a list of people to meet over the course of"
    " your first few weeks.\n\n"
    + "\n".join(
        f"* {who}. They will meet you during your first week to say hi and to walk you"
        " through what they do, how to reach them and what to ask them about."
        for who in ("Your manager", "Your team", "Your buddy", "People Ops", "Your Ops buddy")
    )
)


def test_a_paragraph_too_long_for_the_room_left_is_quoted_from_its_opening() -> None:
    """The quote had been the one sentence before the list, 590 of its 700 characters
    unused: the list that answers "What should I do in my first week?" is now quoted
    from its first items, cut at a whole line."""
    quote = best_passage(FIRST_DAYS, question_terms("What should I do in my first week?")).text
    assert quote.startswith("Your welcome project"), quote
    assert "* Your manager. They will meet you during your first week" in quote
    assert quote.endswith("\n…") and len(quote) <= PASSAGE_CHARS
