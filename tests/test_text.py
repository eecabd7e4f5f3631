"""jieba's words of ASCII text without its dictionary: the same words, the dictionary
never loaded."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from superbiz._text import key_terms, segmenter, unknown_words, words

EXAMPLES = Path(__file__).parents[1] / "src" / "superbiz" / "examples" / "corpus"


def _texts() -> list[str]:
    pieces = [*"aZ09+#&._%-", *"!\"'()*,/:;<=>?@[]^`{|}~", " ", "\t", "\n", "\r\n"]
    pieces += ["C++", "c#", "c++", "AT&T", "the", "Redis", "v1.2", "3.14%", "x86_64", "页"]
    pieces += ["é", "ü", "ß", "ｆ", "Ｃ＋＋", "カ", "한", "🙂", "—", "\u3400", "\u9fe0", "\u00a0"]
    rng = random.Random(11)
    generated = ["".join(rng.choices(pieces, k=rng.randint(1, 12))) for _ in range(3000)]
    english = [
        line
        for path in sorted(EXAMPLES.rglob("*.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and line.isascii()
    ]
    assert len(english) > 200
    return generated + english


def test_ascii_text_is_cut_as_jieba_cuts_it() -> None:
    jieba = segmenter()
    for text in _texts():
        assert list(words(text)) == list(jieba.cut(text)), text


def test_an_english_question_on_an_english_text_never_loads_the_dictionary() -> None:
    """It took 0.6 s of every command on an English knowledge base (``jieba.dt``'s
    ``initialized`` stays false); a Chinese word, or C++, still loads it."""
    probe = (
        "import jieba; from superbiz._text import key_terms; "
        "print(key_terms('Pod is crash looping after the v1.2 deploy: check OOMKilled'), "
        "jieba.dt.initialized, key_terms('c++ 构建失败'), jieba.dt.initialized)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split("] ") == [
        "['pod', 'crash', 'looping', 'after', 'v1.2', 'deploy', 'check', 'oomkilled'",
        "False ['构建', '失败'",
        "True\n",
    ]
    assert key_terms("Redis pool exhausted") == ["redis", "pool", "exhausted"]


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("退款多久到账？", ["到账"]),  # 到 / 账: jieba's dictionary has no 到账
        ("超过 5 个工作日仍未到账", ["仍未到账"]),
        ("节点挂了会影响服务吗", []),  # 挂 了 会: function words break the run
        ("Redis 连接池耗尽", []),
        ("", []),
    ],
)
def test_unknown_words_are_runs_of_single_characters(text: str, unknown: list[str]) -> None:
    assert unknown_words(text) == unknown


def test_english_function_words_are_no_key_terms() -> None:
    """The words BM25 already ignores ("has", "been", "into") carry no topic either: "etcd
    has no leader" had its runbook, ``etcdNoLeader``, ranked first by both title and dense
    search and shown nothing, because the runbook says "have", not "has"."""
    assert key_terms("etcd has no leader") == ["etcd", "leader"]
    assert key_terms("Has the backup been moved into the bucket?") == ["backup", "moved", "bucket"]
    # the prepositions "about" and "between", like "into" and "over": "What about pet
    # insurance?" had sent a supplement lookup for the missing dimension "about"
    assert key_terms("What about pet insurance?") == ["pet", "insurance"]
    assert key_terms("The difference between senior and lead?") == ["difference", "senior", "lead"]


def test_chinese_determiners_are_no_key_terms() -> None:
    """The determiner 某个 ("a certain") names no topic: "怎么查看某个方法的入参和返回值？" of
    Arthas' docs sent a supplement lookup for the missing dimension "某个"."""
    assert key_terms("怎么查看某个方法的入参和返回值？") == ["查看", "返回值"]
    assert key_terms("如何重启集群中的某些 DataNode？") == ["重启", "集群", "datanode"]
