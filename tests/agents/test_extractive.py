"""The extractive chat model: the governed loop without any LLM.

Its policy is checked on hand-written conversations, then end to end through the real
Executor on the small KB (USE + Milvus Lite).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from superbiz._text import has_cjk, key_terms
from superbiz.agents.answer_selection import question_terms
from superbiz.agents.executor import Executor
from superbiz.agents.extractive import ExtractiveChatModel, TurnView
from superbiz.agents.passage_quote import best_passage
from superbiz.agents.runtime import open_runtime
from superbiz.agents.turn_result import TurnResult
from superbiz.config import GovernanceConfig, Settings
from superbiz.evaluation.agent import builtin_dataset
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tool import LOOKUP_KNOWLEDGE
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm import ChatModel, ResponseDone, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from superbiz.retrieval.embedders import Embedder

PAYMENT = "payment/支付失败排查.md"
REDIS = "infrastructure/redis-pool.md"
RATE_LIMIT = "api/rate-limit.md"
ZH_LABEL = "【抽取式回答】"
EN_LABEL = "[Extractive answer]"
ZH_NOTHING = "知识库中没有找到与该问题相关的内容"
EN_NOTHING = "The knowledge base has nothing relevant to this question"


def conversation(question: str, *results: dict[str, Any]) -> list[Message]:
    """A turn: prompt, question, then one lookup call and its result per ``results``."""
    messages: list[Message] = [SystemMessage("prompt"), UserMessage(question)]
    for i, result in enumerate(results, start=1):
        call = ToolCall.of(f"c{i}", "lookup_knowledge", {"query": question})
        messages += [
            AssistantMessage("", (call,)),
            ToolMessage(call.id, call.name, json.dumps(result, ensure_ascii=False)),
        ]
    return messages


def result(level: str | None, *, path: str = RATE_LIMIT, content: str = "", ref: int = 1) -> dict:
    primary = {
        "title": "API rate limiting",
        "domain": path.split("/")[0],
        "path": path,
        "heading": "",
        "content": content,
        "ref": ref,
    }
    return {
        "found": level is not None,
        "relevance_level": level,
        "primary": primary if level else None,
        "supplement": [],
    }


# -- the policy on hand-written conversations -------------------------------------------------


def test_it_is_a_chat_model() -> None:
    model = ExtractiveChatModel()
    assert isinstance(model, ChatModel) and model.name == "extractive"


@pytest.mark.parametrize("question", ["支付回调超时怎么办？", "How do I raise the API limit?"])
def test_the_first_step_is_one_lookup_for_the_question(question: str) -> None:
    response = ExtractiveChatModel().complete(conversation(question), [LOOKUP_KNOWLEDGE])

    [call] = response.message.tool_calls
    assert call.name == "lookup_knowledge" and call.arguments == {"query": question}
    assert response.message.content == "" and response.finish_reason == "tool_calls"


def test_no_lookup_when_the_tool_is_not_offered() -> None:
    response = ExtractiveChatModel().complete(conversation("How do I raise the API limit?"), [])

    assert response.message.tool_calls == ()
    assert response.message.content.startswith(EN_LABEL)
    assert EN_NOTHING in response.message.content


def test_after_reference_one_supplement_names_the_missing_terms() -> None:
    text = "Clients that exceed their quota receive HTTP 429."
    messages = conversation("API quota and webhook retries", result("REFERENCE", content=text))

    response = ExtractiveChatModel().complete(messages, [LOOKUP_KNOWLEDGE])

    [call] = response.message.tool_calls
    assert call.arguments == {
        "query": "API quota and webhook retries",
        "missing_dimension": "webhook retries",
        "domain": "api",
    }


def test_after_reference_covering_every_term_it_answers() -> None:
    text = "Clients that exceed their API quota receive HTTP 429."
    messages = conversation("API quota", result("REFERENCE", content=text))

    response = ExtractiveChatModel().complete(messages, [LOOKUP_KNOWLEDGE])

    assert response.message.tool_calls == ()
    assert response.message.content.startswith(EN_LABEL)


@pytest.mark.parametrize("level", ["PRECISE", "HIGHLY_RELEVANT", "DEDUPED"])
def test_after_a_good_or_blocked_result_it_answers(level: str) -> None:
    messages = conversation("API quota and webhook retries", result(level, content="quota"))

    response = ExtractiveChatModel().complete(messages, [LOOKUP_KNOWLEDGE])

    assert response.message.tool_calls == ()


def test_only_one_supplement_per_turn() -> None:
    first = ToolCall.of("c1", "lookup_knowledge", {"query": "API quota and webhook retries"})
    supplement = ToolCall.of(
        "c2",
        "lookup_knowledge",
        {"query": "API quota and webhook retries", "missing_dimension": "webhook retries"},
    )
    reference = json.dumps(result("REFERENCE", content="quota"))
    messages: list[Message] = [
        UserMessage("API quota and webhook retries"),
        AssistantMessage("", (first,)),
        ToolMessage("c1", "lookup_knowledge", reference),
        AssistantMessage("", (supplement,)),
        ToolMessage("c2", "lookup_knowledge", reference),
    ]

    response = ExtractiveChatModel().complete(messages, [LOOKUP_KNOWLEDGE])

    assert response.message.tool_calls == ()


def test_turn_view_reads_only_the_current_turn_and_tolerates_errors() -> None:
    messages: list[Message] = [
        *conversation("old question", result("PRECISE", content="old")),
        AssistantMessage("old answer"),
        UserMessage("API quota"),
        AssistantMessage("", (ToolCall("c9", "lookup_knowledge", None, "{", "bad json"),)),
        ToolMessage("c9", "lookup_knowledge", '{"error": "arguments are not valid JSON"}'),
    ]

    view = TurnView.of(messages, [LOOKUP_KNOWLEDGE])

    assert view.question == "API quota" and view.language == "en"
    assert view.calls == [{}] and view.results == [{"error": "arguments are not valid JSON"}]
    assert view.documents() == [] and view.tools_offered


def test_stream_yields_the_answer_then_the_whole_response() -> None:
    messages = conversation("API quota", result("PRECISE", content="Raise the API quota."))

    events = list(ExtractiveChatModel().stream(messages, [LOOKUP_KNOWLEDGE]))

    *deltas, done = events
    assert isinstance(done, ResponseDone)
    assert all(isinstance(d, TextDelta) for d in deltas) and len(deltas) > 1
    assert "".join(d.text for d in deltas) == done.response.message.content


def test_best_passage_prefers_paragraphs_naming_the_question() -> None:
    text = "# Title\n\nintro\n\nthe redis pool is exhausted\n\nunrelated"
    assert best_passage(text, ["redis"]).text == "the redis pool is exhausted"
    assert best_passage(text, ["nothing"]).text.startswith("intro")


def test_best_passage_quotes_the_section_asked_about_not_the_opening() -> None:
    """The HikariCP runbook's opening names HikariCP once; the section the log line of the
    question comes from is the answer (the live transcript quoted the opening)."""
    text = (
        "# MySQL 连接池配置与 HikariCP 调优\n\n订单服务使用 HikariCP 连接 MySQL。\n\n"
        "## 症状与原因\n\n### 获取连接超时\n\n"
        "日志：`HikariPool-1 - Connection is not available, request timed out after 3000ms.`\n\n"
        "常见原因：\n1. 慢 SQL 占住连接\n2. 连接泄漏\n\n"
        "### 切换后连接失效\n\n写入报 read-only。"
    )
    terms = key_terms(
        "HikariCP 报 Connection is not available, request timed out after 3000ms 怎么排查？"
    )
    passage = best_passage(text, terms)
    assert passage.heading == "获取连接超时"
    assert passage.text.startswith("日志：`HikariPool-1 - Connection is not available")
    assert "订单服务" not in passage.text and "read-only" not in passage.text


def test_an_faq_question_written_as_a_heading_is_answered_by_what_follows_it() -> None:
    """dev2's FAQ pages put the question in a heading and the answer under it, in words
    of its own: the quote was the heading alone ("A：DolphinScheduler" left out)."""
    text = "## Q：项目的名称是？\n\nA：DolphinScheduler\n\n## Q：其他问题\n\nA：无"
    passage = best_passage(text, key_terms("项目的名称是？"))
    assert passage.heading == "Q：项目的名称是？" and passage.text == "A：DolphinScheduler"
    # under a page's title with nothing of its own, the section that says something
    alert = "# etcdGRPCReadRequestsSlow\n\n## Meaning\n\nReads take over 3 seconds."
    assert best_passage(alert, ["etcd", "grpc", "read"]).text == "Reads take over 3 seconds."


def test_a_code_block_a_quoted_sentence_introduces_is_quoted_with_it() -> None:
    """CMake's example: "For example, the code:", the block, then "will run ``someHasher``";
    the block names none of the question's words and the quote read "the code: will run"."""
    text = (
        "# add_custom_command\n\n## Examples: Build Events\n\n"
        "A `POST_BUILD` event may be used to post-process a binary after linking.\n"
        "For example, the code:\n\n"
        "```cmake\nadd_custom_command(TARGET myExe POST_BUILD COMMAND someHasher)\n```\n\n"
        "will run `someHasher` to produce a `.hash` file next to the executable\n"
        "after linking.\n\nSee also the policies.\n"
    )
    passage = best_passage(text, ["run", "before", "linking"])

    assert passage.text.startswith("A `POST_BUILD` event")
    assert "```cmake\nadd_custom_command(TARGET myExe" in passage.text
    assert passage.text.endswith("after linking.")


def test_a_section_that_only_repeats_the_quotes_words_is_left_out() -> None:
    """A reference page's next command uses the same words as the one asked about
    (pyenv's COMMANDS.md: every section says pyenv, Python and version); a section that
    names what the first does not is quoted under its own heading."""
    text = (
        "## `pyenv uninstall`\n\nUninstall Python versions.\n\n"
        "    Usage: pyenv uninstall [-f|--force] <version> ...\n\n"
        "## `pyenv rehash`\n\nInstalls shims for all Python binaries known to pyenv. Run it "
        "after you install a new version of Python.\n\n"
        "## Removing pyenv\n\nTo uninstall pyenv itself, delete its root folder."
    )
    terms = key_terms("How do I uninstall a Python version with pyenv and remove the root?")
    passage = best_passage(text, terms)
    assert passage.heading == "`pyenv uninstall`"
    assert passage.text.startswith("Uninstall Python versions.")
    assert "shims" not in passage.text
    assert "› Removing pyenv\n\nTo uninstall pyenv itself, delete its root folder." in passage.text


def test_a_section_is_added_for_a_word_the_quote_lacks_not_part_of_one() -> None:
    """npm's config reference, asked "What does the save-exact option do?": the next
    setting, `save-optional`, names "option" only inside "optional" and was quoted after
    the answer as if it added something."""
    text = (
        "#### `save-exact`\n\n* Default: false\n* Type: Boolean\n\n"
        "Dependencies saved to package.json will be configured with an exact version\n"
        "rather than using npm's default semver range operator.\n\n"
        "#### `save-optional`\n\n* Default: false\n* Type: Boolean\n\n"
        "Save installed packages to a package.json file as `optionalDependencies`.\n"
    )
    passage = best_passage(text, question_terms("What does the save-exact option do?"))
    assert passage.heading == "`save-exact`"
    assert "exact version" in passage.text and "save-optional" not in passage.text


# -- end to end through the Executor -------------------------------------------------------------


@pytest.fixture
def ask(governed_kb: KnowledgeBase) -> Any:
    def run(question: str, **governance: Any) -> TurnResult:
        lookup = GovernedLookup(governed_kb, InMemorySessionTracker())
        executor = Executor(ExtractiveChatModel(), lookup, GovernanceConfig(**governance))
        return executor.run(f"ex-{uuid.uuid4().hex[:8]}", question, turn=1)

    return run


def test_a_chinese_question_gets_one_lookup_and_a_chinese_extractive_answer(ask: Any) -> None:
    result = ask("支付回调超时怎么办？")

    assert [o.arguments for o in result.lookups] == [{"query": "支付回调超时怎么办？"}]
    assert result.lookups[0].level is not None
    assert result.lookups[0].level.value == "PRECISE"
    assert result.steps == 2 and result.model == "extractive"
    assert result.answer.startswith(ZH_LABEL)
    assert "[1] 《支付失败排查》" in result.answer
    assert "支付渠道回调超时时，先检查网关日志" in result.answer  # quoted from the runbook
    assert "来源：" in result.answer and f"[1] 支付失败排查 ({PAYMENT})" in result.answer
    assert [(c.ref, c.path) for c in result.citations] == [(1, PAYMENT)]
    assert result.extractive is True


def test_reference_without_missing_terms_gets_no_supplement(ask: Any) -> None:
    result = ask("API quota")

    [only] = result.lookups
    assert only.level is not None and only.level.value == "REFERENCE"
    assert result.answer.startswith(EN_LABEL)
    assert '[1] "API rate limiting"' in result.answer
    assert "Clients that exceed their quota receive HTTP 429" in result.answer
    assert "Sources:" in result.answer


def test_reference_with_missing_terms_gets_one_targeted_supplement(ask: Any) -> None:
    result = ask("redis slow query and API 429")

    first, supplement = result.lookups
    assert first.level is not None and first.level.value == "REFERENCE"
    assert supplement.arguments["missing_dimension"] == "slow query"
    assert supplement.arguments["query"] == "redis slow query and API 429"
    assert supplement.executed  # admitted: it names its missing dimension
    assert result.steps == 3
    # quoted first, then related, numbered in that order; both topics' documents listed
    refs = [c.ref for c in (*result.citations, *result.related)]
    assert refs == list(range(1, len(refs) + 1)) and len(refs) >= 2
    for citation in (*result.citations, *result.related):
        assert f"[{citation.ref}] " in result.answer and citation.path in result.answer
    assert len(result.citations) <= 2 and len(result.shown) >= len(refs)


def test_nothing_found_gives_the_nothing_relevant_text(ask: Any) -> None:
    result = ask("quantum chromodynamics lattice gauge theory")

    [only] = result.lookups
    assert only.executed and only.shown == []
    assert result.answer.startswith(EN_LABEL) and EN_NOTHING in result.answer
    assert result.citations == []


def test_a_chinese_question_with_nothing_found_is_answered_in_chinese(ask: Any) -> None:
    result = ask("量子色动力学的格点规范理论")

    assert result.answer.startswith(ZH_LABEL) and ZH_NOTHING in result.answer


def test_when_the_tool_is_withheld_it_answers_instead_of_supplementing(ask: Any) -> None:
    result = ask("redis slow query and API 429", low_max_calls=0, high_min_calls=1)

    [only] = result.lookups  # REFERENCE with missing terms, but the budget is spent
    assert only.level is not None and only.level.value == "REFERENCE"
    assert result.steps == 2 and result.stopped_by == "answer"
    assert result.answer.startswith(EN_LABEL)


def test_a_supplement_found_in_hand_does_not_replan(tmp_path: Path, use_embedder: Embedder) -> None:
    """On the example KB the runbook's best passage for "exit code 137" is its table of
    exit codes, which lacks the question's "keeps restarting"; the supplement for those
    words ranks the runbook first again (held: withheld, not shown as new), and the
    supervisor does not re-plan three other domains for them (five lookups, three empty,
    before): the answer quotes the runbook alone."""
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([builtin_dataset() / "corpus"])
        turn = runtime.ask("s1", "Pod keeps restarting with exit code 137")

    runbook = "infrastructure/k8s-crashloopbackoff.md"
    first, supplement = turn.result.lookups
    assert first.shown == [runbook]
    assert supplement.arguments.get("missing_dimension") == "keeps restarting"
    assert supplement.details is not None and supplement.details.held_ahead == [runbook]
    assert runbook not in supplement.shown
    assert turn.replan is None and turn.result.unfilled == []
    assert [c.path for c in turn.result.citations] == [runbook]


def test_a_chinese_question_on_english_runbooks_quotes_the_one_that_answers(
    tmp_path: Path, use_embedder: Embedder, kb_writer: Any
) -> None:
    """A team's docs are English, its people ask in Chinese (the example KB's English
    runbooks alone): the lookup ranks the disk runbook first, and the answer quotes it
    instead of saying that nothing answers. Its passages could not name "磁盘"; only a
    knowledge base that writes Chinese holds such a word's absence against a passage. A
    question about nothing there still gets nothing."""
    corpus = builtin_dataset() / "corpus"
    texts = {str(p.relative_to(corpus)): p.read_text("utf-8") for p in corpus.rglob("*.md")}
    # the English runbooks (a link may name a Chinese one's title: "see 支付失败排查手册")
    english = {path: text for path, text in texts.items() if not has_cjk(text.split("---")[1])}
    assert "infrastructure/node-disk-full.md" in english and len(english) == 8
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([kb_writer(tmp_path / "kb", english)])
        assert not kb.writes_chinese()
        turn = runtime.ask("s1", "磁盘满了怎么办？").result
        off_topic = runtime.ask("s2", "谁赢得了2018年世界杯？").result

        assert turn.answer.startswith(ZH_LABEL)
        assert [c.path for c in turn.citations] == ["infrastructure/node-disk-full.md"]
        assert off_topic.citations == [] and ZH_NOTHING in off_topic.answer

        chinese = {"infrastructure/磁盘.md": "# 磁盘满了\n\n清理镜像。\n"}
        Ingestor(kb).ingest([kb_writer(tmp_path / "kb", chinese)])
        assert kb.writes_chinese()  # measured again after the change


def test_a_code_block_is_quoted_whole_and_never_left_open() -> None:
    """A blank line inside a fenced block is code, not the end of a paragraph: the quote
    held "```bash" and its first command, and every line after it read as code."""
    text = (
        "## Failover\n\nPromote the replica with redis-cli:\n\n"
        "```bash\n# on the sentinel\nredis-cli -p 26379 SENTINEL failover mymaster\n\n"
        "# then check\nredis-cli -p 26379 SENTINEL masters\n```\n\nDone."
    )
    passage = best_passage(text, ["redis-cli", "failover"])
    assert passage.text == (
        "Promote the replica with redis-cli:\n\n```bash\n# on the sentinel\n"
        "redis-cli -p 26379 SENTINEL failover mymaster\n\n# then check\n"
        "redis-cli -p 26379 SENTINEL masters\n```"
    )
    # a window that ends inside a block: the quote closes it
    cut = best_passage(text.split("\n\n# then check")[0], ["redis-cli"])
    assert cut.text.endswith("SENTINEL failover mymaster\n```")


def test_a_quote_too_long_for_its_room_ends_at_a_line_never_in_a_word() -> None:
    """The example KB's 401 runbook quoted its steps up to "`auth-service` is healthy (`aut…":
    a word and a code span cut in two. A list ends after its last whole item; a long
    paragraph after its last sentence; a long sentence after its last word."""
    steps = "\n".join(
        f"{n}. For `4010{n}`, check the secret version of `app-{n}` and the rotation log "
        "of the gateway before asking the caller to retry the signed request."
        for n in range(1, 9)
    )
    quote = best_passage(f"## Investigation steps\n\n{steps}", ["secret", "rotation"]).text
    assert quote.endswith(".\n…") and len(quote) <= 702
    assert all(line.count("`") % 2 == 0 for line in quote.splitlines())

    sentences = " ".join(f"Rotate the secret of app {n} and wait a whole day." for n in range(40))
    quote = best_passage(f"## Rotation\n\n{sentences}", ["rotate", "secret"]).text
    assert quote.endswith("a whole day. …")

    words = "rotate the secret " + "and then wait for the `gateway-cache` to expire " * 40
    quote = best_passage(f"## Rotation\n\n{words}", ["rotate", "secret"]).text
    assert quote.endswith("…") and quote[:-1].split()[-1] in words.split()
    assert quote.count("`") % 2 == 0


def test_a_quote_reads_as_the_page_shows_shortcodes_and_folded_sections(
    tmp_path: Path, use_embedder: Embedder, kb_writer: Any
) -> None:
    """TiDB's pages put Hugo's ``{{< copyable >}}`` above each command and fold each case
    into ``<details>``; DolphinScheduler's FAQ centres a screenshot in ``<p>``: the answer
    quoted those lines as written. The stored text keeps them (search reads it); the quote
    shows what the page does: the summary as a label, the shortcode and the picture's
    markup as nothing."""
    page = (
        "# 界面提示集群中未启动必要组件 NgMonitoring\n\n"
        '<p align="center">\n  <img src="ngmonitoring.png" width="60%" />\n</p>\n\n'
        "<details>\n  <summary>使用 TiUP 部署的集群</summary>\n\n"
        "检查 TiUP Cluster 版本，NgMonitoring 需要 TiUP v1.9.0 及以上：\n\n"
        '{{< copyable "shell-regular" >}}\n\n'
        "```shell\ntiup cluster --version\n```\n\n</details>\n\n---\n"
    )
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=use_embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([kb_writer(tmp_path / "kb", {"dashboard/ngmonitoring.md": page})])
        turn = runtime.ask("s1", "界面提示集群中未启动必要组件 NgMonitoring 怎么办？").result

        assert [c.path for c in turn.citations] == ["dashboard/ngmonitoring.md"]
        assert "**使用 TiUP 部署的集群**" in turn.answer
        assert "tiup cluster --version" in turn.answer
        assert "{{<" not in turn.answer and "<details>" not in turn.answer
        assert "<summary>" not in turn.answer and "<img" not in turn.answer
        quote = turn.answer.split("来源：")[0]
        assert quote.rstrip().endswith("```") and "---" not in quote  # it ends with its text
        # what search reads is the page as written
        [chunk] = kb.passages(["dashboard/ngmonitoring.md"])["dashboard/ngmonitoring.md"]
        assert '{{< copyable "shell-regular" >}}' in chunk.text


def test_a_quote_shows_no_picture_a_reader_cannot_see(
    tmp_path: Path, use_embedder: Embedder, kb_writer: Any
) -> None:
    """PagerDuty's on-call page puts a screenshot on a line of its own, and its training
    course each slide in ``<label>![056](….jpeg)</label>``: the answer quoted their markup,
    a path no reader of the text can open. Pictures alone on a line are not quoted; one
    inside a sentence is part of it."""
    page = (
        "## Etiquette\n\n"
        "* Don't acknowledge an incident out from under someone else (its "
        "![bell](bell.png) is theirs).\n"
        "![Acknowledging](../assets/img/misc/ack.png)\n\n"
        '<input type="checkbox" id="056" /><label for="056">![056](../slides/056.jpeg)</label>\n'
        "_Never acknowledge an incident paged to someone else._\n\n"
        "* Acknowledge your own incidents within five minutes.\n"
    )
    [turn] = _asked(
        tmp_path,
        use_embedder,
        kb_writer,
        {"oncall/being_oncall.md": page},
        "Can I acknowledge an incident paged to someone else?",
    )

    assert [c.path for c in turn.citations] == ["oncall/being_oncall.md"]
    assert "out from under someone else" in turn.answer
    assert "ack.png" not in turn.answer and "056" not in turn.answer
    assert "_Never acknowledge an incident paged to someone else._" in turn.answer
    assert "(its ![bell](bell.png) is theirs)" in turn.answer
    assert "within five minutes" in turn.answer


def test_a_kubernetes_page_is_quoted_and_shown_to_the_model_as_it_renders(
    tmp_path: Path, use_embedder: Embedder, kb_writer: Any
) -> None:
    """Kubernetes' docs name their terms with Hugo's ``glossary_tooltip``, head sections
    with ``{{% heading %}}`` and box notes in ``{{< note >}}``: the quote and the lookup's
    passages (what a model reads and could copy) showed that markup as written."""
    page = (
        "---\ntitle: Debug Pods\ncontent_type: task\n---\n\n"
        '## {{% heading "prerequisites" %}}\n\nYou need a cluster and `kubectl`.\n\n'
        "## My pod stays pending\n\n"
        'If a {{< glossary_tooltip text="Pod" term_id="pod" >}} is stuck in `Pending`, the '
        '{{< glossary_tooltip term_id="kube-scheduler" >}} could not place it on a node. '
        "Look at its events:\n\n```shell\nkubectl describe pod ${POD_NAME}\n```\n\n"
        "{{< note >}}\nA Pod that asks for more CPU than any node has stays pending.\n"
        "{{< /note >}}\n"
    )
    turn, before = _asked(
        tmp_path,
        use_embedder,
        kb_writer,
        {"tasks/debug-pods.md": page},
        "Why is my pod stuck in Pending?",
        "What do I need before I begin debugging pods?",
    )

    assert [c.path for c in turn.citations] == ["tasks/debug-pods.md"]
    assert "If a Pod is stuck in `Pending`, the kube-scheduler could not place it" in turn.answer
    assert "**Note:**\nA Pod that asks for more CPU" in turn.answer
    assert "Before you begin" in before.answer and "You need a cluster" in before.answer
    shown = [o.result.primary for o in [*turn.lookups, *before.lookups] if o.result]
    passages = [p.content + p.heading for p in shown if p is not None]
    assert passages and all("{{" not in text for text in passages), passages
    assert "{{" not in turn.answer + before.answer


def _asked(
    root: Path, embedder: Embedder, write_kb: Any, files: dict[str, str], *questions: str
) -> list[TurnResult]:
    """Each of ``questions`` asked in a session of its own, of a knowledge base of
    ``files`` (written under ``root`` by ``write_kb``)."""
    settings = Settings(data_dir=root / "data")
    kb = KnowledgeBase(settings, embedder=embedder)
    with open_runtime(settings, kb=kb) as runtime:
        Ingestor(kb).ingest([write_kb(root / "kb", files)])
        return [runtime.ask(f"s{n}", question).result for n, question in enumerate(questions)]
