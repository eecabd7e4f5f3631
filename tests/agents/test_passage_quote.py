"""What an answer quotes of a passage: an item of a loose list under the item it is in."""

from __future__ import annotations

from superbiz.agents.passage_quote import best_passage

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
