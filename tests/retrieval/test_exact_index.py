"""L0, the exact-term index: Chinese and English keys, boundaries, normalisation, counting."""

from __future__ import annotations

import os

import pytest

from superbiz._text import segmenter
from superbiz.retrieval.exact_index import (
    ExactEntry,
    ExactIndex,
    MatchField,
    is_specific,
    match_form,
)
from superbiz.retrieval.key_frequency import KeyFrequency

ENTRIES = [
    ExactEntry(
        "payment/支付失败排查.md",
        "支付失败排查",
        "payment",
        aliases=("pay-failure",),
        covers=("支付回调超时", "退款失败"),
        tags=("支付", "订单"),
    ),
    ExactEntry("db/数据库连接.md", "数据库连接失败", "db", tags=("数据",)),
    ExactEntry("data/governance.md", "数据治理", "data", covers=("数据血缘",)),
    ExactEntry(
        "api/rate-limit.md",
        "API rate limiting",
        "api",
        aliases=("rate-limit",),
        covers=("429 Too Many Requests", "throttling"),
        tags=("api", "quota"),
    ),
    ExactEntry(
        "infrastructure/redis-pool.md",
        "Redis 连接池耗尽",
        "infrastructure",
        covers=("连接池", "connection pool exhausted"),
        tags=("redis", "缓存"),
    ),
    ExactEntry("cache/penetration.md", "缓存穿透", "cache", tags=("redis",)),
]


@pytest.fixture(scope="module")
def index() -> ExactIndex:
    return ExactIndex(ENTRIES)


def docs(index: ExactIndex, query: str, domain: str | None = None) -> list[str]:
    return [m.doc_path for m in index.match(query, domain)]


# -- Chinese ---------------------------------------------------------------------------------


def test_chinese_title(index: ExactIndex) -> None:
    [match] = index.match("支付失败排查")
    assert (match.doc_path, match.field, match.domain) == (
        "payment/支付失败排查.md",
        MatchField.TITLE,
        "payment",
    )
    assert match.title == "支付失败排查"


def test_chinese_title_inside_a_question(index: ExactIndex) -> None:
    assert docs(index, "支付失败排查应该怎么做？") == ["payment/支付失败排查.md"]


def test_chinese_cover(index: ExactIndex) -> None:
    [match] = index.match("用户反馈支付回调超时了")
    assert (match.doc_path, match.field, match.key) == (
        "payment/支付失败排查.md",
        MatchField.COVERS,
        "支付回调超时",
    )


def test_chinese_tag(index: ExactIndex) -> None:
    [match] = index.match("订单状态不对")
    assert (match.doc_path, match.field) == ("payment/支付失败排查.md", MatchField.TAG)


def test_cjk_boundary_no_match_inside_a_longer_word(index: ExactIndex) -> None:
    assert docs(index, "数据库") == []  # the tag 数据 is not in 数据库
    assert docs(index, "数据库性能") == []
    assert "db/数据库连接.md" in docs(index, "数据 如何备份")  # the word itself matches


def test_cjk_boundary_allows_a_whole_word_inside_a_sentence(index: ExactIndex) -> None:
    assert docs(index, "数据库连接失败怎么办") == ["db/数据库连接.md"]


def test_single_cjk_character_never_matches() -> None:
    index = ExactIndex([ExactEntry("a.md", "支", "x", tags=("付",))])
    assert index.size == 0
    assert index.match("支付") == []


# -- English ---------------------------------------------------------------------------------


def test_english_title_alias_cover_tag(index: ExactIndex) -> None:
    def field(query: str) -> MatchField:
        [match] = index.match(query)
        assert match.doc_path == "api/rate-limit.md"
        return match.field

    assert field("api rate limiting for tenants") is MatchField.TITLE
    assert field("rate-limit exceeded") is MatchField.ALIAS
    assert field("server says 429 too many requests") is MatchField.COVERS
    assert field("throttling") is MatchField.COVERS
    assert field("quota exceeded") is MatchField.TAG


def test_latin_boundary(index: ExactIndex) -> None:
    assert docs(index, "rapid deployment") == []  # api inside rapid
    assert docs(index, "apis are slow") == []
    assert docs(index, "quotas") == []
    assert docs(index, "the api is slow") == ["api/rate-limit.md"]
    assert docs(index, "api, v2 is slow") == ["api/rate-limit.md"]  # punctuation is a boundary


def test_latin_key_next_to_chinese(index: ExactIndex) -> None:
    assert docs(index, "调用api失败") == ["api/rate-limit.md"]


def test_nfkc_and_case_fold(index: ExactIndex) -> None:
    assert docs(index, "ＡＰＩ rate limiting") == ["api/rate-limit.md"]  # full-width
    assert docs(index, "API RATE LIMITING") == ["api/rate-limit.md"]
    assert docs(index, "Throttling") == ["api/rate-limit.md"]
    assert index.match("ＲＥＤＩＳ 连接池耗尽")[0].field is MatchField.TITLE


def test_spaces_near_cjk_are_ignored(index: ExactIndex) -> None:
    assert match_form("Redis 连接池 耗尽") == match_form("redis连接池耗尽") == "redis连接池耗尽"
    for query in ("Redis 连接池 耗尽", "redis连接池耗尽", "REDIS  连接池耗尽"):
        [first, *_] = index.match(query)
        assert (first.doc_path, first.field) == ("infrastructure/redis-pool.md", MatchField.TITLE)


def test_spaces_between_latin_words_matter(index: ExactIndex) -> None:
    assert docs(index, "apiratelimiting") == []


# -- specificity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "specific"),
    [
        ("支", False),  # 1 CJK character
        ("支付", True),  # 2 CJK characters
        ("db", False),  # 2 Latin letters
        ("api", True),  # 3 Latin letters
        ("ＤＢ", False),
        ("42", False),
        ("v2", False),
        ("the", False),  # stop words
        ("FAQ", False),
        ("问题", False),
        ("怎么办", False),
        ("常见问题", False),
        ("", False),
        ("  ", False),
    ],
)
def test_specificity_rule(term: str, specific: bool) -> None:
    assert is_specific(term) is specific


def test_unspecific_keys_are_not_indexed() -> None:
    entry = ExactEntry("x/faq.md", "FAQ", "x", aliases=("db",), covers=("问题",), tags=("支", "ok"))
    index = ExactIndex([entry])
    assert index.size == 0
    assert index.match("FAQ db 问题 支 ok") == []


# -- counting and ranking ---------------------------------------------------------------------


def test_title_beats_tag(index: ExactIndex) -> None:
    matches = index.match("redis连接池耗尽")
    assert [(m.doc_path, m.field) for m in matches] == [
        ("infrastructure/redis-pool.md", MatchField.TITLE),
        ("cache/penetration.md", MatchField.TAG),
    ]
    naming = ExactIndex.naming(matches)
    assert [m.doc_path for m in naming] == ["infrastructure/redis-pool.md"]  # L0 count 1


def test_one_match_per_document_in_its_strongest_field(index: ExactIndex) -> None:
    # the Redis document matches by title, cover and tag: it is counted once, as a title
    matches = index.match("Redis 连接池耗尽 连接池 redis")
    redis = [m for m in matches if m.doc_path == "infrastructure/redis-pool.md"]
    assert len(redis) == 1 and redis[0].field is MatchField.TITLE


def test_tag_matches_never_count_as_naming_a_document(index: ExactIndex) -> None:
    matches = index.match("redis 很慢")
    assert {m.doc_path for m in matches} == {
        "infrastructure/redis-pool.md",
        "cache/penetration.md",
    }
    assert {m.field for m in matches} == {MatchField.TAG}
    assert ExactIndex.naming(matches) == []  # tags alone never make a result PRECISE


def test_longer_key_first_within_a_field(index: ExactIndex) -> None:
    matches = index.match("数据治理 数据")
    assert matches[0].doc_path == "data/governance.md"  # title
    assert [m.field for m in matches] == [MatchField.TITLE, MatchField.TAG]


def test_naming_of_nothing() -> None:
    assert ExactIndex.naming([]) == []


def test_domain_restriction(index: ExactIndex) -> None:
    assert docs(index, "redis", domain="cache") == ["cache/penetration.md"]
    assert docs(index, "redis", domain="infrastructure") == ["infrastructure/redis-pool.md"]
    assert docs(index, "redis", domain="payment") == []
    assert len(docs(index, "redis")) == 2


def test_empty_query_and_empty_index(index: ExactIndex) -> None:
    assert index.match("") == []
    assert index.match("   ") == []
    assert ExactIndex().match("支付失败排查") == []


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="per-user cache files need a uid")
def test_jieba_caches_its_dictionary_in_a_file_of_this_users() -> None:
    """Another user's /tmp/jieba.cache cannot be rewritten: jieba printed a traceback."""
    jieba = segmenter()
    assert jieba.dt.cache_file == f"jieba.u{os.getuid()}.cache"
    assert jieba.lcut("支付回调超时") == ["支付", "回调", "超时"]


def test_a_file_name_is_named_with_spaces_for_its_hyphens() -> None:
    index = ExactIndex(
        [ExactEntry("db/mysql-failover.md", "MySQL 主从切换", "db", ("mysql-failover",))]
    )
    [match] = ExactIndex.naming(index.match("mysql failover: which replica is promoted?"))
    assert (match.doc_path, match.field) == ("db/mysql-failover.md", MatchField.ALIAS)
    assert index.match("mysql_failover") and not index.match("mysqlfailover")


# -- keys judged by the knowledge base ---------------------------------------------------------

KAFKA_TEAM = [
    ExactEntry("kafka.md", "Kafka", "streaming", aliases=("kafka",)),
    ExactEntry("consumer-lag.md", "Kafka consumer lag", "streaming"),
    ExactEntry("broker-down.md", "Broker down", "streaming"),
    ExactEntry("topic-full.md", "Topic full", "streaming"),
    ExactEntry("zookeeper.md", "ZooKeeper session expired", "streaming"),
]
#: each runbook says "Kafka"; only one says "consumer lag"
KAFKA_TEXTS = [
    "Kafka\nHow our Kafka clusters are laid out.",
    "Kafka consumer lag\nLag grows when Kafka consumers fall behind.",
    "Broker down\nA Kafka broker stopped answering.",
    "Topic full\nA Kafka topic reached its retention size.",
    "ZooKeeper session expired\nKafka lost its ZooKeeper session.",
]


def _with_paths(entries: list[ExactEntry], texts: list[str]) -> list[tuple[str, str]]:
    return [(entry.doc_path, text) for entry, text in zip(entries, texts, strict=True)]


def test_a_key_many_documents_use_names_none_of_them() -> None:
    """The page titled with the product's name matched every question about the product."""
    frequency = ExactIndex(KAFKA_TEAM).frequency(_with_paths(KAFKA_TEAM, KAFKA_TEXTS))
    assert frequency.documents == 5
    assert frequency.counts["kafka"] == 5 and frequency.counts["kafka consumer lag"] == 1

    index = ExactIndex(KAFKA_TEAM, frequency)
    assert docs(index, "Kafka is slow today") == []
    assert docs(index, "kafka consumer lag above 10k") == ["consumer-lag.md"]
    # without the KB's frequencies (never measured) every specific key still counts
    assert docs(ExactIndex(KAFKA_TEAM), "Kafka is slow today") == ["kafka.md"]


def test_a_key_inside_a_url_host_name_path_or_identifier_is_no_match() -> None:
    index = ExactIndex(KAFKA_TEAM)
    for query in (
        "Dashboard grafana.kafka.example.net shows 5xx for broker-7",
        "see https://wiki.example.net/kafka/runbook for the procedure",
        "disk /var/lib/kafka is 95% full",
        "metric kafka_server_requests_total dropped to zero",
        "host kafka:9092 refused the connection",
    ):
        assert docs(index, query) == [], query
    # the word itself, and a key covering the whole identifier, still match
    assert docs(index, "Kafka on grafana.example.net is slow") == ["kafka.md"]
    assert docs(index, "alert on kafka_consumer_lag") == ["consumer-lag.md"]


def test_a_latin_word_of_a_cjk_page_is_judged_by_the_kb_too() -> None:
    """``集群部署(Cluster)`` (file ``cluster.md``) matched every English alert saying
    "cluster"; the full Chinese title still names it."""
    entries = [
        ExactEntry("install/cluster.md", "集群部署(Cluster)", "install", aliases=("cluster",)),
        ExactEntry("alerts/etcd.md", "etcd member down", "alerts"),
        ExactEntry("alerts/nodes.md", "Node not ready", "alerts"),
        ExactEntry("alerts/quorum.md", "Quorum lost", "alerts"),
        ExactEntry("alerts/storage.md", "Storage full", "alerts"),
    ]
    texts = [
        "集群部署(Cluster)\n集群部署需要三台机器。",
        "etcd member down\nAn etcd member of the cluster is down.",
        "Node not ready\nA node of the cluster is not ready.",
        "Quorum lost\nThe cluster lost quorum.",
        "Storage full\nStorage cluster utilization crossed 85%.",
    ]
    index = ExactIndex(entries, ExactIndex(entries).frequency(_with_paths(entries, texts)))
    assert docs(index, "Storage cluster is in error state for more than 10m.") == []
    assert docs(index, "集群部署(Cluster) 需要几台机器") == ["install/cluster.md"]


def test_key_frequency_round_trips_and_unreadable_is_none() -> None:
    frequency = ExactIndex(KAFKA_TEAM).frequency(_with_paths(KAFKA_TEAM, KAFKA_TEXTS))
    assert KeyFrequency.from_json(frequency.to_json()) == frequency
    assert KeyFrequency.from_json("{not json") is None
    assert KeyFrequency.from_json('{"documents": 3}') is None
    assert KeyFrequency.from_json(None) is None


def test_key_frequency_follows_a_change_without_counting_the_others_again() -> None:
    index = ExactIndex(
        [ExactEntry("a.md", "Kafka lag", "ops"), ExactEntry("b.md", "Broker down", "ops")]
    )
    before = index.frequency([("a.md", "Kafka lag on the broker"), ("b.md", "Broker down")])
    before = KeyFrequency(before.documents, before.counts, before.users, {"a.md": "1", "b.md": "1"})
    assert before.users["broker down"] == ("b.md",)

    # b.md changed (no longer says it), c.md is new and says both
    fresh = index.frequency([("b.md", "A broker restarted"), ("c.md", "Kafka lag, broker down")])
    after = before.updated({"a.md": "1", "b.md": "2", "c.md": "1"}, fresh, gone=["b.md"])

    assert after.documents == 3
    assert after.users["broker down"] == ("c.md",) and after.counts["broker down"] == 1
    assert after.users["kafka lag"] == ("a.md", "c.md") and after.counts["kafka lag"] == 2
    assert after.measured == {"a.md": "1", "b.md": "2", "c.md": "1"}
    assert KeyFrequency.from_json(after.to_json()) == after

    # a.md removed, nothing new: only the keys it used lose it
    later = after.updated({"b.md": "2", "c.md": "1"}, KeyFrequency(0), gone=["a.md"])
    assert later.users["kafka lag"] == ("c.md",) and later.counts["kafka lag"] == 1
    assert later.users["broker down"] == ("c.md",) and later.counts["broker down"] == 1
    # nothing gone, nothing new: the same counts
    same = later.updated(later.measured, KeyFrequency(0), gone=[])
    assert (same.counts, same.users, same.documents) == (later.counts, later.users, 2)


def test_block_boundaries_are_jiebas_boundaries_of_the_whole_text() -> None:
    """A document's token boundaries worked out per jieba block (only where a key is
    asked about) are those of segmenting the whole text: Chinese, Latin, digits, joiners,
    CJK characters outside jieba's blocks (U+3400, U+F900), spaces and line breaks."""
    from superbiz.retrieval.exact_index import _BlockBoundaries, _boundaries

    texts = [
        "支付回调超时怎么办？检查 Redis 连接池（redis-cli info clients）。\r\n重试队列配置 v1.2.3",
        "TiKV 扩容后 Region 的 leader 不均衡：调整 scheduler 参数 50% 㐀㐁 豈更 的问题",
        "数据库主从切换 mysql_failover 与 PAY-3002 错误码\n\n## 步骤\n1. 确认主库状态",
    ]
    for text in texts:
        blocks = _BlockBoundaries(text)
        found = {pos for pos in range(len(text) + 1) if pos in blocks}
        assert found == set(_boundaries(text)), text


# -- large buckets ---------------------------------------------------------------------------

#: many keys starting with one word (a KB of generated copies: "kube …" titles by the
#: thousand), many of one length, one document with two keys of one length and field
CROWDED = [
    *[
        ExactEntry(f"alerts/kube-{n}.md", f"Kube {word} down", "alerts", tags=(f"kube {n}",))
        for n, word in enumerate(
            ["pod", "node", "api", "job", "dns", "etcd", "proxy", "quota"] * 6 + ["scheduler"]
        )
    ],
    ExactEntry("alerts/twins.md", "Kube twin", "alerts", aliases=("kube abc", "kube xyz")),
    ExactEntry("alerts/kube-oom.md", "Kube 内存溢出", "alerts", covers=("kube oom killed",)),
]

CROWDED_QUERIES = [
    "kube pod down and kube node down again",
    "Kube scheduler down since the kube 7 rollout",
    "alerts: kube xyz, then kube abc",
    "kube 内存溢出 in prod; kube oom killed twice",
    "kubernetes kube-proxy down",
    "nothing to see",
]


def test_a_crowded_bucket_matches_and_counts_as_trying_each_key_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``_SCANNED_BUCKET`` keys a bucket is looked up by key length: the same
    matches and the same key counts as trying every key."""
    import superbiz.retrieval.exact_index as exact

    texts = [(f"t{n}.md", query) for n, query in enumerate(CROWDED_QUERIES)]

    def observed() -> tuple[list[list[tuple[str, str]]], dict[str, int]]:
        index = ExactIndex(CROWDED)
        matches = [[(m.doc_path, m.key) for m in index.match(q)] for q in CROWDED_QUERIES]
        return matches, index.frequency(texts).counts

    crowded = max(len(b) for b in ExactIndex(CROWDED)._buckets.values())
    assert crowded > exact._SCANNED_BUCKET
    looked_up = observed()
    monkeypatch.setattr(exact, "_SCANNED_BUCKET", 10_000)
    scanned = observed()
    assert looked_up == scanned
    matches, counts = looked_up
    assert ("alerts/twins.md", "kube xyz") in matches[2]  # the first of its two aliases here
    assert counts["kube pod down"] == 1 and counts["kube oom killed"] == 1


def test_a_crowded_bucket_follows_adds_and_removes() -> None:
    index = ExactIndex(CROWDED)
    assert "alerts/twins.md" in docs(index, "kube abc")
    index.remove("alerts/twins.md")
    assert docs(index, "kube abc") == []
    index.add(ExactEntry("alerts/new.md", "Kube brand new", "alerts"))
    assert docs(index, "the kube brand new alert") == ["alerts/new.md"]
