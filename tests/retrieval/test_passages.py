"""A quoted window of a long section starts where its first sentence does; a section
headed by what is asked is the one quoted (``heading_match``)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

import superbiz
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.retrieval.passages import heading_match
from superbiz.retrieval.quote_windows import (
    from_sentence_start,
    quoted_window,
    with_introduced,
    with_table_rows,
)


def test_a_chinese_window_starts_after_the_previous_sentence_end() -> None:
    before = "先确认网关日志。然后检查回调地址是否可以从公网访问，并且证书没有过期"
    after = "然后检查回调地址是否可以从公网访问，并且证书没有过期，再重放回调。"
    assert from_sentence_start(before, after) == after
    mid = "回调地址是否可以从公网访问，并且证书没有过期，再重放回调。"
    assert from_sentence_start(before, mid) == "然后检查" + mid


def test_a_window_that_begins_a_paragraph_or_shares_little_is_kept() -> None:
    before = "First paragraph ends here.\n\nSecond paragraph begins with enough words"
    assert (
        from_sentence_start(before, "Second paragraph begins with enough words, and more.")
        == "Second paragraph begins with enough words, and more."
    )
    # a few shared characters are a coincidence, not an overlap
    assert from_sentence_start("the cache is full", "is full of old wheels.") == (
        "is full of old wheels."
    )
    assert from_sentence_start("", "anything") == "anything"


def test_every_window_the_chunker_cuts_reads_from_a_sentence_start() -> None:
    sentences = [
        f"Step {n} moves the replica number {n} to the new primary host." for n in range(40)
    ]
    body = "# Failover\n\n" + " ".join(sentences)
    windows = [chunk.text for chunk in chunk_markdown(body, size=300, overlap=100)]
    assert sum(not window.startswith("Step ") for window in windows[1:]) > 3
    for before, window in pairwise(windows):
        assert from_sentence_start(before, window).startswith("Step ")


def test_a_window_that_begins_inside_a_numbered_item_reads_from_its_number() -> None:
    """The example KB's replication-lag runbook: its causes' second window began inside
    item 2, and the quote read "**Large batch writes …**" without its number, the
    number's period taken for a sentence's end."""
    items = [
        f"{n}. **Cause {n}.** The replica number {n} replays WAL slowly, so check its disk "
        f"and its network before the next step of this runbook."
        for n in range(1, 13)
    ]
    body = "## Causes\n\n" + "\n".join(items)
    windows = [chunk.text for chunk in chunk_markdown(body, size=300, overlap=100)]
    # every later window begins inside an item, past its number
    assert len(windows) > 5 and not any(w.split("\n", 1)[0] in items for w in windows[1:])
    for end in range(2, len(windows) + 1):
        quoted = quoted_window(windows[:end])
        first = quoted.split("\n", 1)[0]
        assert first in items, first


def test_a_window_that_begins_under_a_bold_lead_reads_from_its_item() -> None:
    """The example KB's payment runbook: a window began inside the nested items of
    "4. **区分慢在哪一步。**", and the quote read "**" first, the lead's full stop taken
    for a sentence's end and its closing marks for the next sentence's start."""
    before = (
        "3. **看回调处理耗时。** 渠道要求我们在 3 秒内返回成功应答。\n"
        "4. **区分慢在哪一步。**\n   - 日志出现 `Could not get a resource from the pool` 或"
    )
    after = "a resource from the pool` 或 `redis_pool_wait_seconds` 升高：Redis 连接池耗尽。"
    quoted = from_sentence_start(before, after)
    assert quoted.startswith("4. **区分慢在哪一步。**\n   - 日志出现 `Could not"), quoted
    # a sentence closed by its marks: the next one starts after them
    # a paragraph's bold lead starts the paragraph, as an item's does
    lead = "先看看板。\n**注意。**回调地址、证书与负载均衡的后端是否都已恢复正常"
    rest = "回调地址、证书与负载均衡的后端是否都已恢复正常，再重放。"
    assert from_sentence_start(lead, rest) == "**注意。**" + rest
    before = "先重启。」然后检查回调地址、证书与负载均衡的后端是否都已恢复正常"
    after = "回调地址、证书与负载均衡的后端是否都已恢复正常，再重放。"
    assert from_sentence_start(before, after) == "然后检查" + after


def test_no_window_of_the_example_runbooks_is_quoted_from_a_closing_mark() -> None:
    corpus = Path(superbiz.__file__).parent / "examples" / "corpus"
    for path in sorted(corpus.rglob("*.md")):
        windows = [chunk.text for chunk in chunk_markdown(path.read_text(encoding="utf-8"))]
        for end in range(2, len(windows) + 1):
            quoted = quoted_window(windows[:end])
            assert not quoted.startswith(("**", "」", "）")), (path.name, quoted[:60])


def test_a_window_that_begins_at_a_nested_item_is_quoted_under_its_parent() -> None:
    """The example KB's webhook runbook: a window began at the third case under "2. Read
    the pattern:", and the quote read as a list of cases of nothing."""
    cases = [f"   - `case {n}`: the merchant's endpoint answers {n}xx; ask them." for n in range(9)]
    body = "## Steps\n\n1. Find the deliveries.\n2. Read the pattern:\n" + "\n".join(cases)
    windows = [chunk.text for chunk in chunk_markdown(body, size=300, overlap=100)]
    assert len(windows) > 2
    for end in range(2, len(windows) + 1):  # each begun inside a case, its indent cut
        quoted = quoted_window(windows[:end])
        assert quoted.startswith("2. Read the pattern:\n   - `case "), quoted
        assert quoted.split("\n")[1] in cases


def test_a_window_that_begins_inside_a_code_block_is_quoted_under_its_fence() -> None:
    lines = [f"redis-cli -p 2637{n} SENTINEL failover mymaster-{n}" for n in range(30)]
    body = "# Failover\n\nRun on each sentinel:\n\n```bash\n" + "\n".join(lines) + "\n```\n"
    windows = [chunk.text for chunk in chunk_markdown(body, size=300, overlap=100)]
    assert len(windows) > 3 and not windows[2].startswith("```")
    for end in range(2, len(windows) + 1):
        quoted = quoted_window(windows[:end])
        # a whole line, fenced; from the fence when the window before opened the block,
        # with the line that introduces it
        fenced = quoted.removeprefix("Run on each sentinel:\n")
        if end < len(windows):
            assert fenced.startswith("```bash\nredis-cli -p 2637")
        assert (fenced != quoted) == (end == 2)
        assert fenced.split("\n", 2)[1] in body.split("\n")
    # a block that begins its window, after a window that ends introducing it
    assert quoted_window(["Check the sentinel:", "```sh\nping\n```"]) == (
        "Check the sentinel:\n```sh\nping\n```"
    )
    # before a block, or after it, the sentence rule holds
    assert quoted_window(["Start here. Then the", "Start here. Then the rest."]) == (
        "Start here. Then the rest."
    )


def test_an_abbreviation_does_not_end_a_sentence() -> None:
    """Node.js's ``fs.access`` reads "… (e.g. `fs.constants.W_OK | fs.constants.R_OK`).":
    the quote began after "e.g.", in the middle of the sentence."""
    shared = "| fs.constants.R_OK`). Check [File access constants][] for"
    before = f"Tests permissions. `mode` is a mask (e.g.\n`fs.constants.W_OK {shared}"
    window = f"{shared}\npossible values of `mode`."
    assert from_sentence_start(before, window) == (
        f"`mode` is a mask (e.g.\n`fs.constants.W_OK {window}"
    )
    tail = "i.e. the newest of the releases"
    assert from_sentence_start(f"Pick one. Use one of them, {tail}", f"{tail} first.") == (
        f"Use one of them, {tail} first."
    )


def test_windows_that_do_not_overlap_are_separate_lines() -> None:
    """Node.js's docs give each example twice, a ``cjs`` block then an ``mjs`` one, and
    the chunker cut between them: the section was read as "```" and "```mjs" on one line,
    so the prose after the blocks was quoted as if inside one, under a stray fence."""
    windows = [
        "Run it:\n```cjs\nconst a = require('a');\n```",
        "```mjs\nimport a from 'a';\n```",
        "Then restart the service and watch its log.",
    ]
    assert quoted_window(windows) == "Then restart the service and watch its log."
    assert quoted_window(windows[:2]) == windows[1]


def test_a_window_whose_sentence_began_out_of_reach_starts_at_the_next_one() -> None:
    """requests' "API Changes" list: a window began "instead." because the sentence it
    ends started behind a code block, further back than a quote reaches."""
    before = (
        "- There were a couple changes to how Requests handles exceptions.\n"
        "  An invalid URL escape sequence now raises a subclass of `RequestException`:\n"
        "  ```\n  requests.get('http://%zz/')   # raises requests.exceptions.InvalidURL\n"
        "  ```\n  Lastly, `httplib.IncompleteRead` exceptions caused by incorrect chunked\n"
        "  encoding will now raise a Requests `ChunkedEncodingError` instead.\n"
        "- The proxy API has changed slightly. The scheme for a proxy URL is now\n  required."
    )
    after = (
        "instead.\n- The proxy API has changed slightly. The scheme for a proxy URL is now\n"
        "  required.\n  ```\n  proxies = {'http': 'http://10.10.1.10:3128'}\n  ```"
    )
    assert from_sentence_start(before, after).startswith("- The proxy API has changed")


def test_a_block_inside_a_list_item_is_quoted_out_by_its_fences_indent() -> None:
    """TiDB's runbooks nest their commands in numbered steps: a quote begun at the block's
    fence, or inside a long block, put the fence at the margin over lines and a closing
    fence four spaces in, which a CommonMark reader does not close."""
    lines = [
        f"    pd-ctl store delete 10{n} --force  # store {n} of the failed TiFlash"
        for n in range(12)
    ]
    body = "## Remove stores\n\n1. Delete each store:\n\n    ```shell\n" + "\n".join(lines)
    body += "\n    ```\n\n2. Check the stores again.\n"
    windows = [chunk.text for chunk in chunk_markdown(body, size=300, overlap=100)]
    assert len(windows) > 3
    for end in range(2, len(windows) + 1):
        quoted = quoted_window(windows[:end]).removeprefix("1. Delete each store:\n")
        assert quoted.startswith(("```shell\npd-ctl", "2. Check")), quoted
        assert not any(line.startswith(" ") for line in quoted.split("\n")), quoted


def test_a_code_block_the_window_before_opened_is_quoted_whole() -> None:
    """Node.js's readline "Read file stream line-by-line": the best window began inside
    the example, and the quote read from its ``console.log`` line under a reopened fence."""
    example = [
        "```mjs",
        "import { createReadStream } from 'node:fs';",
        "import { createInterface } from 'node:readline';",
        "",
        "async function processLineByLine() {",
        "  const fileStream = createReadStream('input.txt');",
        "  const rl = createInterface({ input: fileStream, crlfDelay: Infinity });",
        "  for await (const line of rl) {",
        "    console.log(`Line from file: ${line}`);",
        "  }",
        "}",
        "```",
    ]
    body = (
        "## Example: Read file stream line-by-line\n\n"
        "A common use case for `readline` is to consume an input file one line at a time.\n\n"
        + "\n".join(example)
        + "\n"
    )
    windows = [chunk.text for chunk in chunk_markdown(body, size=450, overlap=100)]
    assert len(windows) == 2 and "```mjs" not in windows[1]
    quoted = quoted_window(windows)
    assert quoted.startswith("```mjs\nimport { createReadStream }")
    assert quoted.endswith("console.log(`Line from file: ${line}`);\n  }\n}\n```")


def test_a_window_begun_after_a_code_block_is_not_quoted_from_inside_it() -> None:
    """Docker's practice book: an etcd cluster's ``compose.yaml``, then "使用 `docker compose
    up` 启动集群…". The window that began on that sentence was quoted from "networks:", the
    YAML's last paragraph, down to its closing fence: a sentence start was looked for inside
    the code. A fence ends what came before it."""
    nodes = "".join(
        f"  node{n}:\n    image: etcd:v3.5\n    command: [--name, node{n}]\n" for n in range(4)
    )
    yaml = f"services:\n{nodes}\nvolumes:\n  node1-data:\n\nnetworks:\n  cluster_net:\n"
    yaml += (
        "    driver: bridge\n    ipam:\n      config:\n      -\n        subnet: 172.16.238.0/24\n"
    )
    sentence = (
        "使用 `docker compose up` 启动集群之后使用 `docker exec` 命令登录到任一节点测试集群。"
    )
    before = f"编辑 `compose.yaml` 文件\n\n```yaml\n{yaml}```\n{sentence}"
    last = f"{sentence}\n\n```bash\n/ # etcdctl member list\n```"
    assert quoted_window([before, last]) == last


def test_a_table_the_chunker_cut_in_two_is_quoted_whole() -> None:
    """The example KB's error-code table runs past a chunk: the window holding its first
    rows, quoted, takes the rows the next windows carry under the repeated header, each
    row once, and the text after the table stays out."""
    runbook = Path(superbiz.__file__).parent / "examples" / "corpus" / "api"
    body = (runbook / "auth-errors-401-403.md").read_text(encoding="utf-8").split("---\n", 2)[2]
    windows = [c.text for c in chunk_markdown(body) if c.heading_path[-1] == "Error codes"]
    assert len(windows) == 2 and windows[1].startswith("| HTTP | Code |")

    whole = with_table_rows(windows[0], windows[1:])
    codes = [line.split("`")[1] for line in whole.splitlines() if line.startswith("| 40")]
    assert codes == ["40101", "40102", "40103", "40104", "40105", "40301", "40302", "40303"]
    assert whole.startswith("## Error codes\n\n| HTTP | Code |")


def test_a_window_without_the_tables_header_adds_nothing() -> None:
    table = "| Code | Meaning |\n|---|---|\n| 401 | expired |"
    assert with_table_rows(table, ["| 403 | no scope |"]) == table  # not the chunker's
    assert with_table_rows(f"{table}\n\nThen retry.", [table]) == f"{table}\n\nThen retry."
    assert with_table_rows("No table here.", [table]) == "No table here."


def test_a_window_that_ends_introducing_the_next_one_is_quoted_with_it() -> None:
    """A window that answered ended on "可以通过以下方式绕过这个问题：", and the ways round it
    were the next window's (which begins with the first one's tail)."""
    cause = "该问题是由于 DM 在处理 gh-ost 的 online DDL 时，没有正确写入 ghost_table 导致的。"
    intro = "可以通过以下方式绕过这个问题："
    ways = "- 方式一：跳过该 DDL，然后重启任务。\n- 方式二：手动写入 `dm_meta` 后恢复任务。"
    first = f"{cause}\n\n{intro}"
    second = f"ghost_table 导致的。\n\n{intro}\n\n{ways}\n\n其余略。"
    assert with_introduced(first, [second]) == f"{first}\n\n{ways}"
    # windows that met at a line break, and a window that ends on no colon
    assert with_introduced(first, [ways]) == f"{first}\n{ways}"
    assert with_introduced(cause, [second]) == cause


@pytest.mark.parametrize(
    ("question", "heading"),
    [
        ("A card was disputed, how long do we have to respond?", "How long do we have to respond?"),
        ("Who should I escalate to?", "Escalation"),  # the verb's noun
        ("Nacos 集群怎么配置？", "如何配置 Nacos 集群？"),
        ("How do I rotate keys?", "How to rotate keys"),
        ("How do I check for inactive replication slots?", "Inactive replication slots"),
        ("How long do we keep logs?", "Log retention"),  # "how long" is what it asks
        ("How long is the sabbatical and when am I eligible?", "Sabbatical"),
    ],
)
def test_a_heading_that_is_what_is_asked_matches(question: str, heading: str) -> None:
    assert heading_match(question, "Runbook", heading) > 0


@pytest.mark.parametrize(
    ("question", "title", "heading"),
    [
        ("How do I configure Nacos?", "Nacos", "What is Nacos?"),  # only the title's word
        ("How do we keep logs small?", "FAQ", "Log retention"),  # one of three
        ("How long do we have to respond to a pre-arbitration?", "FAQ", "Escalation"),
        ("ODF disk utilization > 90%", "ODFDiskUtilizationHigh", "ODFDiskUtilizationHigh"),
        ("How do I restart the node exporter?", "FAQ", "Restart policy"),  # one of three
    ],
)
def test_a_heading_that_is_not_what_is_asked_does_not(
    question: str, title: str, heading: str
) -> None:
    assert heading_match(question, title, heading) == 0
