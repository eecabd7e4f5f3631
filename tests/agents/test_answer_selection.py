"""What an answer quotes: the passage that answers, best first; related documents listed;
the rest dropped; nothing answering said so (pure: passages and vectors given)."""

from __future__ import annotations

import numpy as np

from superbiz.agents.answer_selection import (
    ANSWER_SCORE,
    RELATED_SCORE,
    SECOND_LEAD,
    Passage,
    select_answer,
)
from superbiz.agents.context import Citation

#: orthonormal directions: a passage's vector is a mix of them, the question one of them
AXES = np.eye(8, dtype=np.float32)


def vector(*weights: float) -> np.ndarray:
    mixed = sum(w * AXES[i] for i, w in enumerate(weights))
    assert isinstance(mixed, np.ndarray)
    return mixed / np.linalg.norm(mixed)


def doc(ref: int, path: str, title: str = "") -> Citation:
    return Citation(ref, title or path, path, "ops", f"opening of {path}")


QUESTION = "How many retries before the webhook gives up?"
QV = AXES[0]
WEBHOOK = doc(1, "api/webhook.md", "Webhook delivery")
REFUND = doc(2, "payment/refund.md", "Refund guide")
DISK = doc(3, "infra/disk.md", "Disk full")
PASSAGES = {
    WEBHOOK.path: [
        Passage("Webhook delivery", "We send outbound webhooks.", vector(0.3, 1)),
        Passage("Webhook delivery > Retry schedule", "Retries at 1 min … 24 h.", vector(1, 0.3)),
    ],
    REFUND.path: [Passage("Refund guide", "Refunds go back the way they came.", vector(0.4, 0, 1))],
    DISK.path: [Passage("Disk full", "Clean the image cache.", vector(0, 0, 0, 1))],
}


def test_the_passage_that_answers_is_quoted_not_the_opening() -> None:
    selection = select_answer(QUESTION, [WEBHOOK, REFUND, DISK], PASSAGES, QV)

    [quote] = selection.quoted
    assert quote.citation == WEBHOOK and quote.heading.endswith("Retry schedule")
    assert quote.passage == "Retries at 1 min … 24 h."
    # the refund guide bears on it (listed, not quoted); the disk runbook does not (dropped)
    assert selection.related == (REFUND,)
    assert selection.scores[DISK.path] < RELATED_SCORE <= selection.scores[REFUND.path]
    assert selection.bearing == [WEBHOOK, REFUND]


def test_the_lookups_order_decides_among_documents_that_answer() -> None:
    """Two documents answer: the one the lookups ranked first is quoted first, whatever
    their passage scores (the ranking beats them on the benchmarks); a later one is
    quoted too only when it scores clearly higher."""
    both = {**PASSAGES, REFUND.path: [Passage("Refund", "…", vector(1, 0, 0.5))]}
    selection = select_answer(QUESTION, [REFUND, WEBHOOK], both, QV)

    # the refund passage scores 0.89, the webhook's 0.96: quoted second, being clearly higher
    assert [q.citation for q in selection.quoted] == [REFUND, WEBHOOK]
    assert selection.quoted[1].score > selection.quoted[0].score

    close = {**both, WEBHOOK.path: [Passage("Webhook", "…", vector(1, 0, 0.75))]}
    [only] = select_answer(QUESTION, [REFUND, WEBHOOK], close, QV).quoted
    assert only.citation == REFUND  # within SECOND_LEAD of the first: listed instead


def test_nothing_answering_quotes_nothing() -> None:
    """The live run's World Cup question showed the chargeback FAQ: no passage answers."""
    faq = doc(1, "payment/chargeback-faq.md", "Chargeback FAQ")
    passages = {faq.path: [Passage("FAQ", "A won dispute creates DISPUTE_CREDIT.", AXES[5])]}
    selection = select_answer("Who won the 2018 World Cup?", [faq], passages, AXES[6])

    assert not selection.answered and selection.quoted == () and selection.related == ()
    assert selection.scores[faq.path] < ANSWER_SCORE


def test_a_document_of_an_earlier_turn_is_quoted_first_when_it_answers_better() -> None:
    selection = select_answer(
        QUESTION, [REFUND, WEBHOOK], PASSAGES, QV, earlier=frozenset({WEBHOOK.path})
    )

    assert selection.quoted[0].citation == WEBHOOK and selection.quoted[0].earlier


def test_a_held_document_takes_the_place_this_turns_lookup_ranked_it_at() -> None:
    """The session holds the webhook runbook; this turn's lookup showed the refund guide.
    Ranked above it (``placed``), the held runbook is read first, as a fresh session's
    lookup would have shown it; ranked below, it is read after the refund guide, and a
    better passage alone does not put it first: quoted second when it scores
    ``SECOND_LEAD`` above, as any later document."""
    held = frozenset({WEBHOOK.path})
    close = {
        **PASSAGES,
        REFUND.path: [Passage("Refund", "…", vector(1, 0, 0.4))],
        WEBHOOK.path: [Passage("Webhook", "…", vector(1, 0, 0.5))],
    }
    scores = select_answer(QUESTION, [REFUND, WEBHOOK], close, QV).scores
    assert 0 < scores[WEBHOOK.path] - scores[REFUND.path] < SECOND_LEAD

    below = select_answer(QUESTION, [REFUND, WEBHOOK], close, QV, earlier=held)
    assert [q.citation for q in below.quoted] == [REFUND] and below.related == (WEBHOOK,)
    # ranked above: ``reading_order`` puts it before what the lookup showed
    above = select_answer(
        QUESTION, [WEBHOOK, REFUND], close, QV, earlier=held, placed=[WEBHOOK.path]
    )
    assert [q.citation for q in above.quoted] == [WEBHOOK] and above.quoted[0].earlier

    clearly = {**close, WEBHOOK.path: [Passage("Webhook", "…", vector(1, 0, 0.1))]}
    better = select_answer(QUESTION, [REFUND, WEBHOOK], clearly, QV, earlier=held)
    assert [q.citation for q in better.quoted] == [REFUND, WEBHOOK]
    assert better.quoted[1].earlier


def test_a_held_document_is_listed_only_when_this_turns_lookups_would_show_it() -> None:
    """The refund guide bears on the question (it is listed in a fresh session); held from
    an earlier turn, it is listed again only when a lookup of this turn would have shown
    it (``recalled``): otherwise it was about an earlier question, not this one."""
    held = frozenset({REFUND.path})
    args = (QUESTION, [WEBHOOK, REFUND], PASSAGES, QV)

    assert select_answer(*args).related == (REFUND,)
    assert select_answer(*args, earlier=held, recalled=frozenset()).related == ()
    assert select_answer(*args, earlier=held, recalled=held).related == (REFUND,)


def test_a_follow_up_without_a_subject_is_read_with_the_question_before_it() -> None:
    """Its own words answer nothing; with the question before it the webhook runbook
    answers, and its passage is still the one for the follow-up's own words."""
    follow_up = AXES[7] * 0.6 + AXES[0] * 0.2  # weakly about retries, mostly elsewhere
    context = vector(1, 1)  # the conversation: webhooks and their retries
    plain = select_answer("重试几次之后会放弃？", [WEBHOOK], PASSAGES, follow_up)
    assert not plain.answered

    read = select_answer(
        "重试几次之后会放弃？",
        [WEBHOOK],
        PASSAGES,
        follow_up,
        context="webhook 一直没收到？\n重试几次之后会放弃？",
        context_vector=context,
    )
    [quote] = read.quoted
    assert quote.heading.endswith("Retry schedule")


def test_without_vectors_the_terms_decide() -> None:
    docs = [doc(1, "a.md", "Quota"), doc(2, "b.md", "Redis pool")]
    passages = {
        "a.md": [Passage("Quota", "HTTP 429 when the quota is exceeded.")],
        "b.md": [Passage("Redis", "The redis pool is exhausted: raise max-active.")],
    }
    selection = select_answer("redis pool max-active", docs, passages)

    assert [q.citation.path for q in selection.quoted] == ["b.md"]
    assert selection.related == ()


def test_a_code_is_named_only_as_the_whole_number() -> None:
    """A code, "429", is not named by a table of 42901 … 42903 codes nor by 1429: the section
    that names 429 itself is the one quoted, not one that shares its digits."""
    passages = {
        "a.md": [
            Passage("Codes", "| 42901 | quota | 42903 | breaker |"),
            Passage("Limits", "HTTP 429 means the quota is spent; wait Retry-After."),
            Passage("Ports", "The gateway listens on 1429."),
        ]
    }
    selection = select_answer("gateway returns 429", [doc(1, "a.md", "Gateway")], passages)

    assert [q.heading for q in selection.quoted] == ["Limits"]


def test_a_quote_of_a_window_inside_a_long_section_starts_where_its_sentence_does() -> None:
    """The chunker cuts a long section into windows that overlap, each begun on a word;
    the quote of the second one starts at its first sentence, taken from the first."""
    first = (
        "Pin every version in the requirements file.\n\n"
        "A pinned file can be generated with pip freeze. Performing the installation using\n"
        "--no-deps would provide"
    )
    second = (
        "the installation using\n--no-deps would provide an extra dose of insurance against\n"
        "installing anything not listed. Hashes protect against changed files."
    )
    guide = doc(1, "pip/repeatable.md", "Repeatable installs")
    passages = {
        guide.path: [
            Passage("Repeatable installs > Pinning", first, vector(0.5, 1)),
            Passage("Repeatable installs > Pinning", second, vector(1, 0.2)),
        ]
    }

    [quote] = select_answer("What does --no-deps add?", [guide], passages, QV).quoted
    assert quote.passage == "Performing " + second
    # a window that starts its own section is quoted as it is
    passages[guide.path][1] = Passage("Repeatable installs > Hashes", second, vector(1, 0.2))
    [quote] = select_answer("What does --no-deps add?", [guide], passages, QV).quoted
    assert quote.passage == second


def test_a_chinese_question_on_a_knowledge_base_without_chinese_is_answered_on_its_cosine() -> None:
    """A team's English docs asked in Chinese (CMake's manual: "如何下载一个文件？" found
    ``file.rst`` first, yet "nothing answers"): its passages cannot name the Chinese words,
    so their absence is not held against them; the one Latin term still counts."""
    target = doc(1, "command/target_compile_options.rst", "target_compile_options")
    whole = doc(2, "command/add_compile_options.rst", "add_compile_options")
    passages = {
        # cosines 0.39 and 0.36
        target.path: [Passage("Synopsis", "Add compile options to a target.", vector(0.4235, 1))],
        whole.path: [Passage("Example", "add_compile_options(-Wall -Wextra)", vector(0.3859, 1))],
    }
    question = "只对某一个目标加上 -Wall 编译选项"

    mixed = select_answer(question, [target, whole], passages, QV)
    # in a knowledge base that writes Chinese the missing words count: only "-Wall"'s
    # example passes, though the lookups ranked the target's page first
    assert [q.citation for q in mixed.quoted] == [whole]

    english = select_answer(question, [target, whole], passages, QV, writes_chinese=False)
    assert [q.citation for q in english.quoted] == [target]
    assert english.related == (whole,)

    unrelated = {target.path: [Passage("x", "Add compile options.", AXES[5])]}
    off_topic = select_answer(
        "谁赢得了世界杯？", [target], unrelated, AXES[6], writes_chinese=False
    )
    assert not off_topic.answered  # the cosine still has to carry it


def test_a_quoted_pdf_passage_is_cited_at_its_own_page() -> None:
    """The lookup showed page 19 of the manual; the passage that answers is on page 22,
    and the answer linked its quote headed "page 22" to ``libtasn1.pdf#page=19``."""
    manual = Citation(1, "Libtasn1", "libtasn1.pdf", "ops", "…", page=19)
    passages = {
        manual.path: [
            Passage("Libtasn1 > page 19", "asn1_create_element creates a structure.", AXES[3]),
            Passage("Libtasn1 > page 22", "asn1_der_decoding fills it from DER.", QV),
        ]
    }
    [quote] = select_answer("decode a DER structure", [manual], passages, QV).quoted

    assert quote.heading == "Libtasn1 > page 22"
    assert quote.citation.page == 22 and quote.citation.location == "libtasn1.pdf#page=22"


def test_one_page_in_two_formats_is_quoted_or_listed_once() -> None:
    """Node.js ships its API docs as .md and .html: the lookup showed both, the answer
    quoted the one and listed the other as related, the same page twice."""
    html = doc(4, "api/webhook.html", "Webhook delivery")
    passages = {**PASSAGES, html.path: PASSAGES[WEBHOOK.path]}
    selection = select_answer(QUESTION, [WEBHOOK, html, REFUND], passages, QV)

    assert [q.citation for q in selection.quoted] == [WEBHOOK]
    assert selection.related == (REFUND,)
    other_page = doc(5, "api/webhook.html", "Webhook events")  # another title: another page
    listed = select_answer(
        QUESTION, [WEBHOOK, other_page], {**passages, other_page.path: PASSAGES[REFUND.path]}, QV
    )
    assert listed.related == (other_page,)


def test_a_table_of_contents_is_not_quoted_while_its_page_has_an_answer() -> None:
    """A FAQ's contents list every question the page answers, so they name the
    question's words and match it closely: the answer below them is quoted instead."""
    faq = doc(4, "guide/faq.md", "FAQ")
    contents = "\n".join(
        f"  - [{q}](#3.{n})"
        for n, q in enumerate(["Webhook retries", "Refund timing", "Disk full"], 1)
    )
    passages = {
        faq.path: [
            Passage("FAQ", f"# FAQ\n- Usage\n{contents}", vector(1, 0.1)),
            Passage("FAQ > Webhook retries", "Retries at 1 min … 24 h.", vector(1, 0.6)),
        ]
    }

    [quote] = select_answer(QUESTION, [faq], passages, QV).quoted

    assert quote.heading == "FAQ > Webhook retries"
    # a page that is nothing but a list of links is still scored on it
    index = {faq.path: passages[faq.path][:1]}
    assert select_answer(QUESTION, [faq], index, QV).quoted[0].passage.startswith("# FAQ")


def test_a_pages_title_stored_alone_scores_for_it_but_is_not_what_it_quotes() -> None:
    """An alert runbook's ``# etcdGRPCReadRequestsSlow`` is a chunk of its own that names
    every word of the alert: it scores the page (the figures of every set unchanged), and
    the quote is the page's best passage with something under its heading, not the title
    with nothing under it (39 answers on the four sets quoted nothing but a heading)."""
    runbook = doc(5, "alerts/etcdGRPCReadRequestsSlow.md", "etcdGRPCReadRequestsSlow")
    passages = {
        runbook.path: [
            Passage("etcdGRPCReadRequestsSlow", "# etcdGRPCReadRequestsSlow", vector(1, 0.1)),
            Passage(
                "etcdGRPCReadRequestsSlow > Meaning",
                "## Meaning\n\nReads are slow.",
                vector(1, 0.8),
            ),
        ]
    }
    title_only = {runbook.path: passages[runbook.path][:1]}

    [quote] = select_answer(QUESTION, [runbook], passages, QV).quoted

    assert quote.heading.endswith("Meaning") and "Reads are slow." in quote.passage
    scores = select_answer(QUESTION, [runbook], passages, QV).scores
    assert scores == select_answer(QUESTION, [runbook], title_only, QV).scores


#: an article's stored windows, in order: its problem stated over two (the first under the
#: page's opening section), its reason over two that overlap, then its links
ARTICLE = doc(7, "kb/instance-manager-restarts.md", "Instance manager pods restarted hourly")
REASON = "One root cause is a default PriorityClass while Longhorn's setting is empty"
ARTICLE_PASSAGES = [
    Passage(
        "Applicable versions",
        "## Applicable versions\n\nv1.0.1 or newer\n\n## Symptoms\n\n"
        "The instance manager pods are restarted every hour.",
        vector(1, 0.1),
    ),
    Passage("Symptoms", "Workload pods crash every hour with them.", vector(1, 0.2)),
    Passage("Reason", f"## Reason\n\n{REASON}", vector(0.6, 1)),
    Passage("Reason", f"{REASON[-30:]}, so the pods are recreated at each resync.", vector(0.6, 1)),
    Passage("Related information", "## Related information\n\n* issue 2820", vector(0, 0, 0, 1)),
]
RESTARTS = "Why are the instance manager pods restarted every hour?"


def test_the_section_after_a_stated_problem_is_quoted_whole_from_its_start() -> None:
    """The problem's statement scores best (it repeats the question) and still decides
    whether and where the document is quoted; the quote is the reason that follows it."""
    selection = select_answer(RESTARTS, [ARTICLE], {ARTICLE.path: ARTICLE_PASSAGES}, QV)

    [quote] = selection.quoted
    assert quote.from_start and quote.heading == "Reason"
    assert quote.passage == f"## Reason\n\n{REASON}, so the pods are recreated at each resync."
    assert selection.scores[ARTICLE.path] == round(quote.score, 4)
    assert quote.score > ANSWER_SCORE


def test_a_stated_problem_is_quoted_when_nothing_after_it_bears_on_the_question() -> None:
    passages = [*ARTICLE_PASSAGES[:2], ARTICLE_PASSAGES[-1]]
    selection = select_answer(RESTARTS, [ARTICLE], {ARTICLE.path: passages}, QV)

    [quote] = selection.quoted
    assert not quote.from_start and quote.heading == "Applicable versions"
    assert "restarted every hour" in quote.passage


def test_a_question_about_the_symptoms_is_answered_with_them() -> None:
    question = "What are the symptoms when instance manager pods restart every hour?"
    selection = select_answer(question, [ARTICLE], {ARTICLE.path: ARTICLE_PASSAGES}, QV)

    assert not selection.quoted[0].from_start


def test_a_section_begun_in_the_statements_passage_is_quoted_from_its_start() -> None:
    """Rook's common issues: a problem's "Symptoms" and the start of its "Investigation"
    in one stored window, the investigation going on in the next."""
    start = "Open a toolbox pod and run ceph status to see"
    passages = [
        Passage(
            "Cluster failing to serve requests",
            "## Cluster failing to serve requests\n\n### Symptoms\n\n"
            "The cluster is failing to serve requests; the ceph command hangs.\n\n"
            f"### Investigation\n\n{start}",
            vector(1, 0.1),
        ),
        Passage(
            "Cluster failing to serve requests > Investigation",
            f"{start[-25:]} whether the mons restart.",
            vector(0.5, 1),
        ),
        Passage(
            "Cluster failing to serve requests > Solution", "Set dataDirHostPath.", vector(0.5, 1)
        ),
    ]
    question = "The cluster is failing to serve requests"
    [quote] = select_answer(question, [ARTICLE], {ARTICLE.path: passages}, QV).quoted

    assert quote.from_start
    assert quote.passage == f"### Investigation\n\n{start} whether the mons restart."


def test_a_question_about_what_the_kb_never_mentions_quotes_nothing() -> None:
    """ "DolphinScheduler 的 worker 分组怎么配置？" asked of TiDB's docs had a quote from a
    page that shares "worker": the subject is named nowhere, so nothing answers; what
    bears on the question is still listed."""
    selection = select_answer(
        QUESTION, [WEBHOOK, REFUND, DISK], PASSAGES, QV, unknown=["dolphinscheduler"]
    )

    assert not selection.answered and selection.unknown == ("dolphinscheduler",)
    assert selection.related == (WEBHOOK, REFUND)
    assert selection.scores == select_answer(QUESTION, [WEBHOOK, REFUND, DISK], PASSAGES, QV).scores


REDIS = doc(1, "infra/redis.md", "Redis 连接池耗尽与内存淘汰处理")
#: the chunker stores small sections as one passage, headed by the first
REDIS_PASSAGES = [
    Passage(
        "Redis 连接池耗尽与内存淘汰处理 > 一、连接池耗尽 > 排查步骤",
        "### 排查步骤\n\n```bash\nredis-cli SLOWLOG GET 20\n```\n\n### 处理\n\n"
        "- 临时扩大连接池：max-active 调到 128。\n\n## 二、内存打满与淘汰\n\n### 症状\n\n"
        "- used_memory / maxmemory > 90%。",
        vector(1, 0.2),
    ),
]


def test_a_section_asked_for_inside_a_passage_of_several_is_quoted_from_its_heading() -> None:
    """ "怎么处理？" names nothing but the heading 处理 (a word of the title too): the
    section under it is the quote, up to the next heading of its level or above."""
    selection = select_answer("怎么处理？", [REDIS], {REDIS.path: REDIS_PASSAGES}, QV)

    [quote] = selection.quoted
    assert quote.heading.endswith(" > 处理") and quote.from_start
    assert quote.passage == "### 处理\n\n- 临时扩大连接池：max-active 调到 128。"


def test_a_section_asked_for_runs_on_into_the_passages_under_it() -> None:
    """TiDB's "load 处理单元报错 …" was stored with its "原因", its "解决方案" as the next
    passage: the quote of the section holds both."""
    title = "DM 故障及处理方法"
    error = "load 处理单元报错 packet for query is too large"
    passages = [
        Passage(
            f"{title} > 常见故障 > 执行 query-status 报错 Access denied",
            f"### 执行 query-status 报错 Access denied\n\n检查密码。\n\n### {error}\n\n"
            "#### 原因\n\n- 超过 max_allowed_packet 配额。",
            vector(1, 0.2),
        ),
        Passage(
            f"{title} > 常见故障 > {error} > 解决方案", "#### 解决方案\n\n- 设置 statement-size。"
        ),
        Passage(f"{title} > 常见故障 > relay 报错", "### relay 报错\n\n清理 relay log。"),
    ]
    document = doc(1, "dm/errors.md", title)
    selection = select_answer(f"遇到报错 {error}", [document], {document.path: passages}, QV)

    [quote] = selection.quoted
    assert quote.heading.endswith(error) and quote.from_start
    assert "#### 原因" in quote.passage and "statement-size" in quote.passage
    assert "relay" not in quote.passage


def test_headings_the_question_names_alike_decide_nothing() -> None:
    """ "如何为已有迁移任务增加需要迁移的表？" names each stage's heading of the FAQ alike
    (迁移, 任务): none of them is what it asks, and the passage that answers best is
    quoted as it would be without headings (the entry's opening). Only the Sync stage
    began a passage, and its heading alone had been taken for the question's."""
    stage = "迁移任务当前处于 `{}` 阶段"
    passages = [
        Passage(
            "",
            "已有迁移任务要增加需要迁移的表，按任务所处的阶段处理。\n\n"
            f"### {stage.format('Dump')}\n\n重启。\n\n### {stage.format('Load')}\n\n不建议。",
            vector(1, 0.2),
        ),
        Passage(stage.format("Sync"), f"### {stage.format('Sync')}\n\n更新 checkpoint。", AXES[1]),
    ]
    faq = doc(1, "dm/faq/q008.md", "Data Migration 常见问题")
    question = "如何为已有迁移任务增加需要迁移的表？"
    selection = select_answer(question, [faq], {faq.path: passages}, QV)

    [quote] = selection.quoted
    assert quote.heading == "" and quote.passage.startswith("已有迁移任务")


def test_a_document_headed_by_what_is_asked_is_listed_at_least() -> None:
    """ShardingSphere's FAQ answers "Type is required 报错" under "Type is required
    异常的解决方法?": two of the question's three words (报错 is 异常 there), and a cosine of
    noise with a short mixed-language question. The page was dropped and the answer said
    the knowledge base had nothing relevant; it is listed as related now (a heading is no
    evidence that the page answers: it is not quoted on it)."""
    faq = doc(1, "faq/shardingsphere.md", "FAQ")
    passages = [
        Passage("其他 > Type is required 异常的解决方法?", "按 type 找 SPI 实现。", AXES[3]),
        Passage("其他 > 服务启动时如何加快 metadata 加载速度？", "调高连接数。", AXES[4]),
    ]
    selection = select_answer("Type is required 报错", [faq], {faq.path: passages}, QV)

    assert not selection.quoted
    assert selection.related == (faq,)


def test_words_every_heading_of_a_page_has_name_no_section() -> None:
    """TiDB's DM error page heads each error "… 处理单元报错 `…`": "Load 单元报错 Unknown
    character set" named three of its words in the heading of the packet-size error, and
    that section was quoted; the words every heading has tell no section apart."""
    page = doc(1, "dm/errors.md", "DM 故障及处理方法")
    passages = [
        Passage("DM 故障及处理方法 > load 处理单元报错 packet for query is too large", "调大。"),
        Passage("DM 故障及处理方法 > dump 处理单元报错 timeout", "重试 dump。"),
        Passage(
            "DM 故障及处理方法 > relay 处理单元报错 binlog",
            "### relay 处理单元报错 binlog\n\n清理 relay log。\n\n"
            "### 字符集\n\n遇到 Unknown character set 时，改用 utf8mb4。",
        ),
    ]
    question = "Load 单元报错 Unknown character set"
    selection = select_answer(question, [page], {page.path: passages})

    [quote] = selection.quoted
    assert "packet" not in quote.heading and "utf8mb4" in quote.passage
