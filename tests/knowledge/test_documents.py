"""Documents: frontmatter fields and fallbacks, and every file that cannot be a document."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.documents.document import content_hash, load_document, parse_document
from superbiz.knowledge.documents.domains import DEFAULT_DOMAIN, normalize_domain
from superbiz.knowledge.documents.metadata import derive_metadata


def parse(text: str | bytes, path: str = "payment/doc.md"):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return parse_document(data, PurePosixPath(path))


def reason_of(text: str | bytes, path: str = "payment/doc.md") -> str:
    with pytest.raises(DocumentError) as info:
        parse(text, path)
    error = info.value
    assert error.path == path
    assert str(error) == f"{path}: {error.reason}"  # file and reason, one line
    return error.reason


# -- frontmatter fields --------------------------------------------------------------------

FULL = """---
title: 支付失败排查
category: Payment
covers: [支付回调超时, 退款失败]
when_to_retrieve: 用户支付失败时
tags:
  - 支付
  - 订单
aliases: [pay-failure]
owner: pay-team
priority: 3
---
# 一级标题

正文内容。
"""


def test_frontmatter_fields_are_read() -> None:
    doc = parse(FULL, "payment/支付失败排查.md")
    assert doc.path == "payment/支付失败排查.md"
    assert doc.title == "支付失败排查"
    assert doc.domain == "payment"
    assert doc.covers == ("支付回调超时", "退款失败")
    assert doc.when_to_retrieve == "用户支付失败时"
    assert doc.tags == ("支付", "订单")
    assert doc.aliases == ("pay-failure", "支付失败排查")  # the file stem is an alias too
    assert doc.body.startswith("# 一级标题")
    assert "---" not in doc.body
    assert doc.size_bytes == len(FULL.encode("utf-8"))
    assert doc.content_hash == content_hash(FULL.encode("utf-8"))


def test_other_keys_are_kept_in_extra_and_named_in_a_warning() -> None:
    doc = parse(FULL)
    assert doc.extra == {"owner": "pay-team", "priority": 3}
    assert doc.warnings == (
        "unknown frontmatter keys 'owner', 'priority': not used, kept in extra "
        "(known keys: title, category, when_to_retrieve, covers, tags, aliases, access)",
    )
    metadata = doc.metadata()
    assert metadata["extra"] == {"owner": "pay-team", "priority": 3}
    assert metadata["covers"] == ["支付回调超时", "退款失败"]
    assert metadata["tags"] == ["支付", "订单"]
    assert metadata["when_to_retrieve"] == "用户支付失败时"


def test_a_domain_key_is_named_with_the_key_that_sets_the_domain() -> None:
    doc = parse("---\ntitle: Refunds\ndomain: payment\n---\n# Refunds\nbody\n", "ops/x.md")
    assert doc.domain == "ops"  # not set by 'domain'
    [warning] = doc.warnings
    assert warning.startswith("unknown frontmatter key 'domain': not used")
    assert warning.endswith("; the domain is set by 'category'")


def test_a_horizontal_rule_and_text_at_the_top_stay_in_the_body() -> None:
    """No key of the opening block is known: it is text between rules, not frontmatter."""
    text = "---\nWarning: never restart the primary\n---\n# Ops rule\nRestart replicas first.\n"
    doc = parse(text, "ops/rule.md")
    assert doc.body == text and doc.extra == {}
    assert "Warning: never restart the primary" in doc.body
    assert (doc.title, doc.domain) == ("Ops rule", "ops")
    [warning] = doc.warnings
    assert warning.startswith(
        "the opening '---' block has no frontmatter key ('Warning'): kept as text, "
        "not frontmatter (known keys: title, category,"
    )


def test_a_block_whose_unknown_keys_hold_other_values_than_text_is_frontmatter() -> None:
    """Hugo's book theme hides a page with ``bookHidden: true``: that is no line of prose,
    and the page had been ingested as the text of its own frontmatter."""
    doc = parse("---\nbookHidden: true\nweight: 20\n---\n# Runbooks\nAll of them.\n")
    assert (doc.body, doc.extra, doc.warnings) == (
        "# Runbooks\nAll of them.\n",
        {"bookHidden": True, "weight": 20},
        (),
    )
    doc = parse("---\nreviewed: 2026-11-30\nowners: [sre]\n---\n# Failover\nPromote.\n")
    assert doc.body == "# Failover\nPromote.\n"
    assert doc.extra == {"reviewed": "2026-11-30", "owners": ["sre"]}
    [warning] = doc.warnings
    assert warning.startswith("unknown frontmatter keys 'reviewed', 'owners': not used")
    with pytest.raises(DocumentError, match="no content after the frontmatter"):
        parse("---\nbookHidden: true\n---\n")


def test_a_hugo_themes_keys_give_no_warning() -> None:
    """Grafana Loki's operations pages (Hugo): ``menuTitle`` had been an unknown key on 36
    of 37 pages, one warning line each run."""
    doc = parse("---\ntitle: Retention\nmenuTitle: Retention\nweight: 500\n---\n# Retention\nx\n")
    assert doc.warnings == () and doc.extra == {"menuTitle": "Retention", "weight": 500}


def test_frontmatter_with_known_keys_gives_no_warning() -> None:
    assert parse("---\ntitle: A\ncategory: ops\n---\nbody\n").warnings == ()


def test_a_known_key_in_capitals_is_that_key() -> None:
    """``Title: Caps`` was an unknown key, so the block became body text."""
    doc = parse("---\nTitle: yes\nCATEGORY: Ops\n---\n# Heading\nbody\n")
    assert (doc.title, doc.domain, doc.warnings) == ("yes", "ops", ())


@pytest.mark.parametrize(
    ("front", "field", "expected"),
    [
        ("title: yes", "title", "yes"),
        ("title: No", "title", "No"),
        ("title: 1.50", "title", "1.50"),
        ("title: 0x1F", "title", "0x1F"),
        ("title: 2024-01-01", "title", "2024-01-01"),
        ("category: no", "domain", "no"),
        ("category: on", "domain", "on"),
        ("when_to_retrieve: yes", "when_to_retrieve", "yes"),
        ("tags: [yes, off, 1.50]", "tags", ("yes", "off", "1.50")),
        ("covers: 42", "covers", ("42",)),
    ],
)
def test_text_fields_keep_yaml_11_booleans_and_numbers_as_written(
    front: str, field: str, expected: object
) -> None:
    doc = parse(f"---\n{front}\n---\n# Heading\nbody\n")
    assert getattr(doc, field) == expected


def test_a_null_text_field_is_unset() -> None:
    assert parse("---\ntitle: ~\ncategory: null\n---\n# Heading\nbody\n", "x.md").title == (
        "Heading"
    )


def test_comma_separated_lists_and_duplicates() -> None:
    doc = parse("---\ntags: redis, 缓存， redis\ncovers: a b c\n---\nbody\n")
    assert doc.tags == ("redis", "缓存")
    assert doc.covers == ("a b c",)


def test_numbers_are_accepted_as_text() -> None:
    doc = parse("---\ntitle: 2024\ntags: [1, two]\n---\nbody\n")
    assert doc.title == "2024"
    assert doc.tags == ("1", "two")


def test_bom_and_crlf_are_tolerated() -> None:
    data = "\ufeff---\r\ntitle: Windows doc\r\n---\r\n# H\r\ntext\r\n".encode()
    doc = parse(data)
    assert doc.title == "Windows doc"
    assert "\r" not in doc.body


def test_empty_frontmatter_is_no_frontmatter() -> None:
    doc = parse("---\n---\n# Heading title\ntext\n", "api/x.md")
    assert doc.title == "Heading title"
    assert doc.domain == "api"


# -- title fallback --------------------------------------------------------------------------


def test_title_falls_back_to_first_heading() -> None:
    doc = parse("intro\n\n## Second level first ##\n### Under it\ntext\n")
    assert doc.title == "Second level first"


def test_a_page_of_sibling_sections_is_titled_by_its_files_name() -> None:
    """Apollo's FAQ pages have no title of their own and open with their first question:
    it was the page's title, and every quote of the page read "1. windows怎么执行build.sh?".
    A wiki page, whose title is its file's name, is written so too."""
    faq = "### 1. windows怎么执行build.sh?\n装 Git Bash。\n\n### 2. Env is down\n看端口。\n"
    assert parse(faq, "faq/common-issues.md").title == "common-issues"
    guide = "# &nbsp;\n# 一、准备工作\n\n装 JDK。\n\n# 二、部署步骤\n\n运行脚本。\n"
    doc = parse(guide, "deployment/distributed-deployment-guide.md")
    assert doc.title == "distributed-deployment-guide"
    assert doc.body.startswith("# 一、准备工作"), doc.body


def test_a_title_written_twice_is_the_title() -> None:
    """RocketMQ's connector quick start writes ``# 快速开始``, a badge, ``# 快速开始`` again:
    read as two sibling sections, the page was titled by its file's name ("03RocketMQ
    Connect Quick Start"). The same heading twice is one title; another is a sibling."""
    page = "# 快速开始\n\n![License](l.svg)\n\n# 快速开始\n\n## 1.准备\n\n启动 RocketMQ。\n"
    assert parse(page, "connect/03RocketMQ Connect Quick Start.md").title == "快速开始"
    other = page.replace("# 快速开始\n\n## 1", "# 快速上手\n\n## 1")
    assert parse(other, "connect/03quick.md").title == "03quick"


def test_a_heading_that_shows_nothing_is_not_the_title() -> None:
    """Docsify hides a page's heading as ``# &nbsp;``: the page was titled "&nbsp;"."""
    doc = parse("# &nbsp;\n## Quick Start\n\nRun `demo.sh`.\n", "deployment/quick-start.md")
    assert doc.title == "Quick Start"


def test_title_fallback_ignores_headings_inside_code_fences() -> None:
    body = "```bash\n# not a heading\n```\n\n# Real heading\n"
    assert parse(body).title == "Real heading"


def test_title_falls_back_to_file_stem() -> None:
    assert parse("just text, no heading\n", "ops/notes/deploy-checklist.md").title == (
        "deploy-checklist"
    )


def test_blank_title_falls_back() -> None:
    assert parse("---\ntitle: '  '\n---\n# From heading\ntext\n").title == "From heading"


# -- category (domain) fallback -------------------------------------------------------------


def test_category_falls_back_to_first_folder_under_root() -> None:
    assert parse("# T\ntext\n", "ops/notes/deep/x.md").domain == "ops"


def test_category_falls_back_to_general_at_root() -> None:
    assert parse("# T\ntext\n", "x.md").domain == DEFAULT_DOMAIN == "general"


def test_blank_category_falls_back() -> None:
    assert parse("---\ncategory: ''\n---\n# T\ntext\n", "infra/x.md").domain == "infra"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Payment", "payment"),
        ("Payment Ops", "payment-ops"),
        ("  payment   ops  ", "payment-ops"),
        ("支付", "支付"),
        ("", "general"),
        ("   ", "general"),
    ],
)
def test_domain_normalisation(raw: str, expected: str) -> None:
    assert normalize_domain(raw) == expected


def test_folder_domain_is_normalised() -> None:
    assert parse("# T\ntext\n", "Payment Ops/x.md").domain == "payment-ops"


# -- files that cannot become documents ------------------------------------------------------


def test_a_page_of_headings_alone_is_refused() -> None:
    """Sphinx fills autodoc's pages at build time: 42 of 83 pages of a Sphinx project read
    as a title alone, matched questions by their titles and answered nothing."""
    assert reason_of("# google.auth.aws module\n\n## Submodules\n").startswith(
        "nothing but headings: no text to answer from"
    )
    assert parse("# Restart\n\n```\nsystemctl restart api\n```\n").title == "Restart"


def test_malformed_yaml() -> None:
    reason = reason_of("---\ntitle: [unclosed\n---\nbody\n")
    assert reason.startswith("malformed frontmatter:")
    assert "line" in reason


def test_malformed_yaml_bad_indentation() -> None:
    reason = reason_of("---\ntitle: a\n  b: c\n---\nbody\n")
    assert reason.startswith("malformed frontmatter:")


@pytest.mark.parametrize("front", ["- a\n- b", "just a string", "42"])
def test_frontmatter_not_a_mapping(front: str) -> None:
    reason = reason_of(f"---\n{front}\n---\nbody\n")
    assert reason == "malformed frontmatter: expected a mapping of keys"


def test_unclosed_frontmatter() -> None:
    reason = reason_of("---\ntitle: A\n# Body without a closing line\n")
    assert reason == "malformed frontmatter: no closing '---' line"


def test_a_rule_opening_a_page_is_no_frontmatter() -> None:
    """Traefik's shared notice opens with ``---`` and a blank line, closed by nothing: it
    was skipped as frontmatter left open. With no setting after it, it is a rule."""
    doc = parse('---\n\n!!! question "In production?"\n\n    Ask the team.\n', "notice.md")
    assert doc.title == "notice" and "Ask the team." in doc.body
    assert reason_of("---\n") == "malformed frontmatter: no closing '---' line"


def test_empty_file() -> None:
    assert reason_of(b"") == "empty file"


@pytest.mark.parametrize("blank", [b" ", b"\n\n", b" \t\r\n \n"])
def test_whitespace_only_file(blank: bytes) -> None:
    assert reason_of(blank) == "empty file"


def test_frontmatter_without_body() -> None:
    assert reason_of("---\ntitle: A\n---\n\n  \n") == "no content after the frontmatter"


def test_binary_file() -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    assert reason_of(data, "img.md") == "binary file (contains NUL bytes)"


@pytest.mark.parametrize(
    "data", [b"\x00\x01\x02\x03\x04", b"\x89PNG\x00", b"\x00\x01\x02\x03\x04\x05\x06\x07"]
)
def test_a_few_bytes_of_binary_are_not_called_utf16(data: bytes) -> None:
    """Their NUL bytes fall where UTF-16 puts them by chance; they do not read as text."""
    assert reason_of(data, "tiny.md") == "binary file (contains NUL bytes)"


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_bom_gets_the_iconv_hint(codec: str) -> None:
    source = codec.upper().replace("-LE", "LE").replace("-BE", "BE")
    reason = reason_of("# T\nx".encode(codec), "short.md")
    assert reason.endswith(
        f"it looks like {source} without a byte-order mark: "
        f"convert it with `iconv -f {source} -t UTF-8`"
    )


def test_non_utf8_file() -> None:
    reason = reason_of("# Café crème\n".encode("latin-1"))
    assert reason.startswith("not UTF-8 text")
    assert "byte 5" in reason  # the offset of the "é"


def test_gbk_encoded_chinese_is_not_utf8() -> None:
    assert reason_of("# 支付失败\n".encode("gbk")).startswith("not UTF-8 text")


def test_oversize_file(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "api").mkdir(parents=True)
    file = root / "api" / "big.md"
    file.write_text("# Big\n" + "x" * 100, encoding="utf-8")
    with pytest.raises(DocumentError) as info:
        load_document(file, root, max_bytes=50)
    assert info.value.path == "api/big.md"
    assert info.value.reason == "too large: 106 bytes exceeds the 50-byte limit"
    assert load_document(file, root, max_bytes=106).title == "Big"  # the limit is inclusive


def test_load_document_uses_path_relative_to_root(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "infra" / "redis").mkdir(parents=True)
    file = root / "infra" / "redis" / "pool.md"
    file.write_text("# Pool\ntext\n", encoding="utf-8")
    doc = load_document(file, root, max_bytes=5_000_000)
    assert (doc.path, doc.domain, doc.title) == ("infra/redis/pool.md", "infra", "Pool")


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("covers: {a: 1}", "frontmatter field 'covers' must be a list of texts"),
        ("tags: [[nested]]", "frontmatter field 'tags' must be a list of texts"),
        ("tags: [{a: 1}]", "frontmatter field 'tags' must be a list of texts"),
        ("aliases: {x: y}", "frontmatter field 'aliases' must be a list of texts"),
        ("title: [a, b]", "frontmatter field 'title' must be text, got list"),
        ("category: {a: b}", "frontmatter field 'category' must be text, got dict"),
        ("when_to_retrieve: [x]", "frontmatter field 'when_to_retrieve' must be text, got list"),
    ],
)
def test_wrong_field_types(front: str, expected: str) -> None:
    assert reason_of(f"---\n{front}\n---\n# T\nbody\n") == expected


# -- bounded frontmatter, control characters, encodings ---------------------------------------


def test_ordinary_aliases_still_expand() -> None:
    doc = parse("---\nbase: &b {owner: ops}\nother: *b\ntags: [a]\n---\n# T\nbody\n")
    assert doc.extra == {"base": {"owner": "ops"}, "other": {"owner": "ops"}}


def test_aliases_may_repeat_a_large_frontmatter_up_to_twice_its_size() -> None:
    """The limit is the larger of 100,000 characters and twice the frontmatter."""
    big = "x" * 120_000
    front = f"title: T\nbig: &b {big}\ncopy: *b\n"
    assert parse(f"---\n{front}---\n# T\nbody\n").extra["copy"] == big
    reason = reason_of(f"---\n{front}again: *b\n---\n# T\nbody\n")
    assert reason.startswith("frontmatter refused: its YAML aliases expand it past 240")


def test_deeply_nested_frontmatter_is_refused() -> None:
    reason = reason_of("---\na: " + "[" * 5000 + "]" * 5000 + "\n---\n# T\nbody\n")
    assert reason.startswith("malformed frontmatter")


def test_control_characters_in_the_body_other_than_nul_are_kept() -> None:
    assert "\x0c" in parse("# Title\npage\x0cbreak\n").body


def test_a_control_character_in_a_derived_title_becomes_a_space() -> None:
    assert parse("# Tab\x0bbed   title\nbody\n").title == "Tab bed title"


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_utf16_and_utf32_with_a_bom_are_decoded(codec: str) -> None:
    data = "\ufeff---\ntitle: 标题\n---\n# H\n正文\n".encode(codec)
    doc = parse(data)
    assert (doc.title, doc.body) == ("标题", "# H\n正文\n")


def test_a_bom_that_lies_is_refused() -> None:
    reason = reason_of(b"\xef\xbb\xbf# T\n\xff\xfe body")
    assert reason.startswith("not UTF-8 text despite its UTF-8 byte-order mark")


def test_gbk_reason_names_the_encoding_and_the_fix() -> None:
    reason = reason_of("# 支付失败\n正文\n".encode("gbk"))
    assert "it looks like GB18030/GBK Chinese" in reason
    assert "iconv -f GB18030 -t UTF-8" in reason and "ingest.encodings" in reason


def test_latin1_gets_no_chinese_hint() -> None:
    assert "GB18030" not in reason_of("# Café crème\n".encode("latin-1"))


def test_configured_encodings_are_tried_in_order() -> None:
    data = "# 支付失败\n正文\n".encode("gbk")
    doc = parse_document(data, PurePosixPath("pay/a.md"), ["utf-8", "gb18030"])
    assert doc.title == "支付失败"
    assert (
        parse_document("# Ça\ntext\n".encode(), PurePosixPath("a.md"), ["utf-8", "gb18030"]).title
        == "Ça"
    )


def test_sphinx_roles_in_markdown_read_as_their_text() -> None:
    """pip's MyST pages wrote "{ref}`--no-deps <install_--no-deps>`" into the text a
    quote shows; a role of another name, or one in a code block, is left as written."""
    doc = parse(
        "# Repeatable installs\n\n"
        "Generate it with {ref}`pip freeze`; install with {option}`--no-deps` or see\n"
        "{doc}`../topics/secure-installs` and {py:func}`~os.path.join`.\n\n"
        "```sh\nrun {ref}`x` here\n```\n\necho ${cmd}`date` and {address}`, `port`\n"
    )
    assert doc.body == (
        "# Repeatable installs\n\n"
        "Generate it with pip freeze; install with `--no-deps` or see\n"
        "secure-installs and `join`.\n\n"
        "```sh\nrun {ref}`x` here\n```\n\necho ${cmd}`date` and {address}`, `port`\n"
    )


def test_sphinx_directives_in_markdown_read_as_their_text() -> None:
    """MyST wraps notes, version notes and options in fences named by a directive; a
    quote showed a note's prose as a code block and ``{toctree}`` listed page names."""
    doc = parse(
        "# Upgrades\n\n"
        "```{note}\nRun {option}`--upgrade` on **one** node first.\n```\n\n"
        "````{versionchanged} 23.1\n:class: small\n\n"
        "```{code-block} shell\npip install --upgrade pip\n```\n````\n\n"
        ":::{option} --dry-run\nShow what would change.\n:::\n\n"
        "```{toctree}\n:maxdepth: 2\n\ncli/index\n```\n\n"
        "```{pip-cli}\n$ pip --version\n```\n"
    )
    assert doc.body == (
        "# Upgrades\n\n"
        "> **Note**\n> Run `--upgrade` on **one** node first.\n\n"
        "*Changed in version 23.1.*\n\n```shell\npip install --upgrade pip\n```\n\n"
        "`--dry-run`\n\nShow what would change.\n\n"
        "```{pip-cli}\n$ pip --version\n```\n"
    )


def test_a_site_generators_description_and_keywords_are_read_as_the_fields_they_mean() -> None:
    """npm's 91 pages (Docusaurus-style ``description:``) each printed a metadata warning
    and their one-line summaries never reached the knowledge map."""
    doc = parse(
        "---\ntitle: npm-ci\nsection: 1\nDescription: Clean install a project\n"
        "keywords: [install, lockfile]\n---\n# npm-ci\n\ntext\n"
    )
    assert doc.when_to_retrieve == "Clean install a project"
    assert doc.tags == ("install", "lockfile")
    assert doc.extra == {"section": 1}
    assert doc.warnings == (
        "unknown frontmatter key 'section': not used, kept in extra (known keys: title, "
        "category, when_to_retrieve, covers, tags, aliases, access)",
    )


def test_a_synonym_never_overrides_its_field_nor_refuses_the_document() -> None:
    doc = parse(
        "---\nwhen_to_retrieve: When a deploy fails\ndescription: Deploys\n"
        "summary: {lines: 3}\n---\n# Deploys\n\ntext\n"
    )
    assert doc.when_to_retrieve == "When a deploy fails"
    assert doc.extra == {"description": "Deploys", "summary": {"lines": 3}}
    assert doc.warnings == (
        "frontmatter key 'description' not used: 'when_to_retrieve' is set (kept in extra)",
        "frontmatter key 'summary' not used: 'when_to_retrieve' is set (kept in extra)",
    )
    only = parse("---\nsummary: The whole runbook in one line\n---\n# Runbook\n\ntext\n")
    assert only.when_to_retrieve == "The whole runbook in one line" and only.warnings == ()


def test_a_synonym_of_another_type_says_why_it_is_not_read() -> None:
    """A Hugo page's ``description: [a, b]`` was reported as an unknown key."""
    doc = parse(
        "---\ntitle: Rotate\ndescription: [one, two]\nkeywords: [{a: 1}]\nowner: ops\n---\n"
        "# Rotate\n\ntext\n"
    )
    assert doc.when_to_retrieve is None and doc.tags == ()
    assert doc.extra == {"description": ["one", "two"], "keywords": [{"a": 1}], "owner": "ops"}
    assert doc.warnings[1:] == (
        "frontmatter key 'description' not used: it is read as 'when_to_retrieve' when it "
        "is text, not a list (kept in extra)",
        "frontmatter key 'keywords' not used: it is read as 'tags' when it is text or a "
        "list of texts, not a list of other values than texts (kept in extra)",
    )
    assert doc.warnings[0].startswith("unknown frontmatter key 'owner': not used")


def test_mkdocs_admonitions_read_as_quotes_under_their_title() -> None:
    """MkDocs runbooks indent a warning's text under ``!!!``: Markdown read it as a code
    block, so the page showed the warning as code and a quote began "!!! danger"."""
    doc = parse(
        "# Failover\n\n"
        '!!! danger "Never restart every replica"\n'
        "    Quorum is lost.\n\n"
        "    ```bash\n    kubectl get pods\n    ```\n\n"
        "??? note\n\tCollapsed by default.\n"
        'Text after it.\n\n!!! tip ""\n    No title.\n\n'
        "```\n!!! warning\n    kept as code\n```\n"
    )
    assert doc.body == (
        "# Failover\n\n"
        "> **Never restart every replica**\n> Quorum is lost.\n>\n"
        "> ```bash\n> kubectl get pods\n> ```\n\n"
        "> **Note**\n> Collapsed by default.\n"
        "Text after it.\n\n> No title.\n\n"
        "```\n!!! warning\n    kept as code\n```\n"
    )


def test_docusaurus_and_vitepress_admonitions_read_as_quotes_under_their_title() -> None:
    """Docusaurus and VitePress fence a note in colons: the fence lines were read as
    text, so a quote began ":::tip" and the title was a word of the passage."""
    doc = parse(
        "# 部署\n\n:::tip 提示\n\n先备份配置。\n\n:::\n\n"
        "::::note[Two nodes]\nDrain first.\n:::danger\nNever both.\n:::\n::::\n\n"
        "::: columns\nside by side\n:::\n\n"
        "```\n:::tip\nkept as code\n:::\n```\n\n:::warning never closed\ntext\n"
    )
    assert doc.body == (
        "# 部署\n\n> **提示**\n> 先备份配置。\n\n"
        "> **Two nodes**\n> Drain first.\n> > **Danger**\n> > Never both.\n\n"
        "side by side\n\n"
        "```\n:::tip\nkept as code\n:::\n```\n\n:::warning never closed\ntext\n"
    )


def test_github_alerts_and_obsidian_callouts_read_as_quotes_under_their_title() -> None:
    """GitHub shows ``> [!WARNING]`` as an alert titled "Warning", Obsidian ``> [!faq]-
    Title`` as a callout titled so: read as text, a quote began "[!WARNING]"."""
    doc = parse(
        "# Failover\n\n> [!WARNING]\n> Drain the node first.\n\n"
        "> [!faq]- 为什么切换后只读？\n> 新主库的 read_only 仍为 ON。\n\n"
        "> [!tip]+\n> Restart one replica at a time.\n\n"
        "```md\n> [!TIP]\n> kept as code\n```\n"
    )
    assert doc.body == (
        "# Failover\n\n> **Warning**\n> Drain the node first.\n\n"
        "> **为什么切换后只读？**\n> 新主库的 read_only 仍为 ON。\n\n"
        "> **Tip**\n> Restart one replica at a time.\n\n"
        "```md\n> [!TIP]\n> kept as code\n```\n"
    )


def test_html_comments_and_empty_anchors_are_not_the_documents_text() -> None:
    """Apache projects open every page with their licence in a comment: it became the
    document's when-to-retrieve line on the planner's map. Node.js keeps each API's
    history in ``<!-- YAML`` comments, and quotes began with them."""
    doc = parse(
        "---\ntitle: MySQL CDC\n---\n<!--\nLicensed to the Apache Software Foundation.\n"
        "```\nnot code: commented out\n```\n-->\n\n"
        "Reads the binlog of a MySQL server.<!-- TODO: MariaDB -->\n\n"
        '## Server id\n<a id="server-id"></a>\n<!-- YAML\nadded: v1.0\n-->\n'
        "Each reader needs its own `<!-- id -->` range.\n\n"
        "```xml\n<!-- the dependency -->\n<artifactId>cdc</artifactId>\n```\n"
        "<!-- never closed\n"
    )
    assert derive_metadata(doc)[1] == "Reads the binlog of a MySQL server."
    assert "Licensed" not in doc.body and "YAML" not in doc.body and "TODO" not in doc.body
    assert '<a id="server-id">' not in doc.body
    assert "Each reader needs its own `<!-- id -->` range." in doc.body
    assert "```xml\n<!-- the dependency -->\n<artifactId>cdc</artifactId>\n```" in doc.body
    assert doc.body.endswith("<!-- never closed\n")


def test_html_headings_are_the_pages_sections() -> None:
    """Docs sites anchor each FAQ question in an ``<h4 id=…>``: read as text, the FAQ was
    one section, and an answer had no heading to be found or quoted under."""
    doc = parse(
        "# FAQ\n\n"
        '<h4 id="3.11">Nacos权重不生效</h4>\n\n控制台上编辑的权重没有打通客户端。\n\n'
        '<H2 align="center">\n  Tom &amp; <code>Jerry</code>\n</H2> after it\n'
        "<h3>never closed\n\nText.\n\n<h1><img src=logo.png></h1>\n"
        "```html\n<h4>kept as code</h4>\n```\n"
    )
    assert doc.body == (
        "# FAQ\n\n#### Nacos权重不生效\n\n控制台上编辑的权重没有打通客户端。\n\n"
        "## Tom & Jerry\n after it\n"
        "<h3>never closed\n\nText.\n\n<h1><img src=logo.png></h1>\n"
        "```html\n<h4>kept as code</h4>\n```\n"
    )
    headings = [chunk.heading for chunk in chunk_markdown(doc.body, size=40, overlap=10)]
    assert "FAQ > Nacos权重不生效" in headings


def test_a_site_generators_keys_are_frontmatter_and_no_unknown_keys() -> None:
    """Docs sites give each page its place on the site (Starlight's ``sidebar:`` on 39 of
    Nacos's 53 pages, Docusaurus' ``id`` and ``sidebar_position``): they were named as
    unknown keys on every page, and a block of nothing else was read as the page's text."""
    starlight = parse("---\ntitle: 监控手册\nsidebar:\n  order: 6\nowner: ops\n---\n正文。\n")
    assert starlight.extra == {"sidebar": {"order": 6}, "owner": "ops"}
    [warning] = starlight.warnings
    assert warning.startswith("unknown frontmatter key 'owner'") and "sidebar" not in warning

    docusaurus = parse("---\nid: failover\nSidebar_Position: 2\n---\n# Failover\n\nDrain.\n")
    assert docusaurus.warnings == () and docusaurus.title == "Failover"
    assert docusaurus.body == "# Failover\n\nDrain.\n"
    assert docusaurus.extra == {"id": "failover", "Sidebar_Position": 2}


def test_mdx_markup_never_closed_or_page_long_is_kept_as_written() -> None:
    """A page of ``{/*`` openings never closed, and a page-long line that starts like an
    import, are text: kept as written (each had made the reader's scan quadratic or worse)."""
    openings = "{/* draft " * 50_000
    long_line = "import " + "a " * 100_000 + "!"
    doc = parse(f"---\ntitle: Hostile\n---\n{openings}\n\n{long_line}\n\nimport x from 'y'\n")
    assert doc.body == f"{openings}\n\n{long_line}\n\n"


#: Istio's docs write every command as a Hugo shortcode block, in a step too
ISTIO = """---
title: Debugging Envoy and Istiod
---

## Get an overview of your mesh

{{< text bash >}}
$ istioctl proxy-config endpoint <pod-name> clusters
# list the clusters of one pod
{{< /text >}}

1. Label the namespace:

    {{< text syntax=bash snip_id=label >}}
    $ kubectl label namespace default istio-injection=enabled
    {{< /text >}}

{{< highlight go "linenos=table" >}}
```not a fence of this block```
{{< /highlight >}}

{{< text yaml >}}
never closed
"""


def test_a_hugo_block_of_code_is_code() -> None:
    """``{{< text bash >}}`` … ``{{< /text >}}`` (Istio) and ``highlight`` are what their
    page shows: code, so a ``# comment`` in one is no heading and ``<pod-name>`` no tag."""
    doc = parse_document(ISTIO.encode(), PurePosixPath("ops/envoy.md"))

    assert (
        "```bash\n$ istioctl proxy-config endpoint <pod-name> clusters\n"
        "# list the clusters of one pod\n```" in doc.body
    )
    assert "    ```bash\n    $ kubectl label namespace default" in doc.body
    assert "````go\n```not a fence of this block```\n````" in doc.body
    assert "{{< text yaml >}}\nnever closed" in doc.body  # no closing: as written
    sections = {c.heading_path for c in chunk_markdown(doc.body, 800, 100)}
    assert sections == {("Get an overview of your mesh",)}


def test_a_notion_exports_page_ids_name_no_domain_or_title() -> None:
    """Notion's Markdown export appends each page's id to its file's and folder's names."""
    notion = (
        "Runbooks 8f3e2a1b4c5d6e7f8a9b0c1d2e3f4a5b/Disk full 0123456789abcdef0123456789abcdef.md"
    )
    doc = parse_document(b"Free space on the node first.\n", PurePosixPath(notion))

    assert (doc.domain, doc.title) == ("runbooks", "Disk full")
    assert "Disk full" in doc.aliases
