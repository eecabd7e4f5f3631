"""Text helpers shared by ingestion, the exact index and the normaliser (no I/O)."""

from __future__ import annotations

import html
import logging
import os
import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import Literal

Language = Literal["zh", "en"]

#: the CJK characters (unified ideographs, extension A, compatibility ideographs)
_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
#: the characters jieba segments with its dictionary (its ``re_han_default``'s CJK range)
_JIEBA_CJK = re.compile(r"[\u4e00-\u9fd5]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


# Words too common to identify a document or to count as a question's key term.
STOP_WORDS = frozenset(
    """
    the and for with from that this what which when where how why who are was were
    can could should would does did not any all how-to guide faq doc docs document
    has have had than then there their they these those been being its will may might
    into over under more most only very also but about between
    readme overview general misc other notes index error errors issue issues problem
    问题 如何 怎么 怎么办 什么 为什么 是否 可以 哪些 哪个 以及 或者 如果 使用 相关 说明
    文档 介绍 概述 常见问题 注意事项 其他 方法 处理 解决 是不是 怎样 有没有 一下 需要 应该
    我们 你们 这个 那个 时候 出现 导致
    """.split()
)
#: Chinese function words of two characters, closed classes chosen from grammar: time and
#: place words, conjunctions, adverbs of time and degree, demonstratives, quantifiers, light
#: verbs and prepositions, passive markers (受到, and 会受 as jieba cuts 会 + 受). A
#: question is full of them and its answer need not be:
#: "切换之后怎么确认数据没丢？" is answered by a runbook that says 切换后, not 之后. They stay
#: terms of BM25, whose weights already make them cheap; they are no *key* terms.
KEY_TERM_STOP_WORDS_ZH = frozenset(
    """
    之后 以后 之前 以前 之间 之中 之内 之外 以上 以下 以内 以外 然后 随后 此后 期间 同时
    目前 当前 现在 已经 曾经 正在 一直 总是 经常 通常 一般 有时 马上 立即
    但是 而且 并且 因为 所以 因此 虽然 然而 还是 或是 假如 即使 不过 只要 只有 除了 还有
    就是 只是 可能 能够 必须 非常 比较 特别 这些 那些 这样 那样 这里 那里 这边 那边
    这种 那种 自己 他们 它们 一些 一个 一种 所有 每个 某个 某些 某种 其中
    进行 对于 关于 通过 根据 按照 的话 受到 遭到 会受
    """.split()
)
_KEY_TERM_STOP_WORDS = STOP_WORDS | KEY_TERM_STOP_WORDS_ZH
#: a two-letter word in capitals: an acronym ("DB", "CI", "IO") that ``key_terms`` keeps
_ACRONYM = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}(?![A-Za-z0-9])")
_EN_WORD = re.compile(r"[a-z][a-z0-9_.-]*[a-z0-9]|[a-z]")


#: Chinese function words, one character each: they carry no topic
CHINESE_FUNCTION_WORDS = frozenset(
    "的 了 是 吗 呢 吧 啊 在 和 与 及 或 把 被 对 将 会 能 有 要 也 就 都 而 还 该 这 那 么 怎 "
    "时 中 上 下 个 为 以 等 后".split()
)


def key_terms(text: str) -> list[str]:
    """The words of ``text`` that carry meaning, in order, without repeats: jieba words
    of two or more CJK characters, Latin words of three or more letters and two-letter
    acronyms written in capitals ("DB", "CI": "is" or "ok" in a sentence carry none),
    stop words and Chinese function words (``KEY_TERM_STOP_WORDS_ZH``) removed. Used to
    match questions to passages without any index.

    >>> key_terms("支付回调超时，是不是 Redis 连接池的问题？")
    ['支付', '回调', '超时', 'redis', '连接池']
    >>> key_terms("DB 慢"), key_terms("It is ok")
    (['db'], [])
    >>> key_terms("切换之后怎么确认数据没丢？"), key_terms("业务会受影响吗？")
    (['切换', '确认', '数据'], ['业务', '影响'])
    """
    return _terms(text, _KEY_TERM_STOP_WORDS)


#: a question's measure ("how many", "how long", 多少, 多久): what it asks, not of what
_MEASURE = re.compile(
    r"\bhow\s+(?:many|much|long|often)(?:\s+times)?\b|多长时间|多久|多少|多大", re.I
)


def without_measure(question: str) -> str:
    """``question`` without its measure ("how many times", "how much", "how long", "how
    often"; 多少, 多久, 多长时间, 多大): what it asks for, not what it asks about, so no
    word a passage, a heading or a supplement lookup must name.

    >>> key_terms(without_measure("How long is the sabbatical?"))
    ['sabbatical']
    >>> key_terms(without_measure("DDL 在正常情况下的耗时是多少？"))
    ['ddl', '正常', '情况', '耗时']
    """
    return _MEASURE.sub(" ", question)


#: English inflections a term may carry where its document has another ("downloaded" for
#: "downloads", "evicted" for "evicts"), longest first
_INFLECTIONS = ("ing", "ed", "es", "s")
#: the shortest word whose final "e" is dropped ("cache", "state" keep theirs: "stat" is
#: in "status")
_SILENT_E_LENGTH = 6


def stem(term: str) -> str:
    """``term`` without an English inflection, where at least three letters stay, or
    without the silent "e" a longer verb ends in, which its nouns drop ("escalate" is
    named by "Escalation", "rotate" by "rotation"); Chinese terms and short words as they
    are.

    >>> stem("downloaded"), stem("evicting"), stem("pods"), stem("file"), stem("重试")
    ('download', 'evict', 'pod', 'file', '重试')
    >>> stem("escalate"), stem("cache")
    ('escalat', 'cache')
    """
    if not term.isascii() or not term.isalpha():
        return term
    for suffix in _INFLECTIONS:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    if term.endswith("e") and len(term) >= _SILENT_E_LENGTH:
        return term[:-1]
    return term


def indexed_terms(text: str) -> list[str]:
    """``key_terms`` with the Chinese function words BM25 still reads: the words of
    ``text`` a lexical index can match (``fusion.lexical_reach``).

    >>> indexed_terms("切换之后怎么确认数据没丢？")
    ['切换', '之后', '确认', '数据']
    """
    return _terms(text, STOP_WORDS)


def all_terms(text: str) -> list[str]:
    """``key_terms`` with no word left out: what a heading of common words alone says.

    >>> all_terms("怎么处理？"), all_terms("Overview")
    (['怎么', '处理'], ['overview'])
    """
    return _terms(text, frozenset())


def _terms(text: str, stop: frozenset[str]) -> list[str]:
    terms: list[str] = []
    acronyms = {a.lower() for a in _ACRONYM.findall(text)}
    for token in words(normalize(text)):
        token = token.strip()
        if not token or token in stop:
            continue
        cjk = sum(1 for ch in token if is_cjk(ch))
        latin = not cjk and _EN_WORD.fullmatch(token)
        if cjk >= 2 or (latin and (len(token) >= 3 or token in acronyms)):
            terms.append(token)
    return list(dict.fromkeys(terms))


#: a number of three or more digits standing alone: a status, exit or error code
_CODE = re.compile(r"(?<![\w.])\d{3,}(?![\w.])")


def codes(text: str) -> list[str]:
    """The codes ``text`` names (``429``, ``137``, ``42903``: a number of three or more
    digits standing alone), in order, without repeats: a runbook named on its own.

    >>> codes("What does error 42903 mean? (HTTP 429, v1.2, 429)")
    ['42903', '429']
    """
    return list(dict.fromkeys(_CODE.findall(normalize(text))))


def unknown_words(text: str) -> list[str]:
    """The words of ``text`` jieba's dictionary lacks, as far as they can be told: runs of
    two or more Chinese characters it cut one by one, function words apart. "到账" is no
    word of jieba's: "退款多久到账？" is cut 退款 / 多久 / 到 / 账, and ``key_terms``,
    keeping words of two characters or more, lost it.

    >>> unknown_words("退款多久到账？"), unknown_words("节点挂了会影响服务吗")
    (['到账'], [])
    """
    found: list[str] = []
    run: list[str] = []
    for token in [*words(normalize(text)), ""]:
        if len(token) == 1 and is_cjk(token) and token not in CHINESE_FUNCTION_WORDS:
            run.append(token)
            continue
        if len(run) >= 2:
            found.append("".join(run))
        run = []
    return list(dict.fromkeys(found))


@cache
def segmenter() -> ModuleType:
    """jieba, imported on first use (it loads its dictionary), kept quiet, and caching its
    dictionary in a file of this user's: the shared ``/tmp/jieba.cache`` of another user
    cannot be written and jieba printed a traceback for it. Every use of jieba here goes
    through this (Milvus Lite's analyzer shares the same tokenizer)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    if jieba.dt.cache_file is None and hasattr(os, "getuid"):
        jieba.dt.cache_file = f"jieba.u{os.getuid()}.cache"
    module: ModuleType = jieba
    return module


def words(text: str) -> Iterator[str]:
    """``text`` cut as ``jieba.cut`` cuts it; text without Chinese that holds none of the
    dictionary's ASCII words is cut without loading the dictionary (``block_words``),
    which took 0.6 s and 50 MB of every command on an English knowledge base.

    >>> list(words("redis pool v1.2 full")), list(words("c++ build"))
    (['redis', ' ', 'pool', ' ', 'v1.2', ' ', 'full'], ['c++', ' ', 'build'])
    """
    jieba = segmenter()
    if not cut_without_dictionary(text):
        return iter(jieba.cut(text))
    blocks = jieba.re_han_default.split(text)
    return (token for block in blocks if block for token in block_words(block))


def cut_without_dictionary(text: str) -> bool:
    """Whether jieba cuts ``text`` as ``block_words`` does: no character of the CJK block
    jieba segments (U+4E00–U+9FD5; every other character outside ASCII it cuts one by one)
    and none of the dictionary's ASCII words (``C++``, ``AT&T``: five in jieba 0.42).

    >>> cut_without_dictionary("naïve émigré, Straße"), cut_without_dictionary("支付 pool")
    (True, False)
    """
    if _JIEBA_CJK.search(text):
        return False
    return not any(word in text for word in _dictionary_ascii_words())


@cache
def _dictionary_ascii_words() -> tuple[str, ...]:
    """The words of jieba's dictionary written in ASCII, read from its file (50 ms)
    rather than from the dictionary loaded (0.6 s)."""
    with segmenter().dt.get_dict_file() as lines:
        data = lines.read()
    return tuple(
        word.decode() for word in re.findall(rb"^([\x21-\x7e]+) [1-9]", data, re.MULTILINE)
    )


def block_words(block: str) -> list[str]:
    """What ``jieba.cut`` and ``cut_for_search`` give for one block of jieba's
    ``re_han_default.split`` of a text ``cut_without_dictionary`` allows. Such a block is
    a run of ASCII letters, digits and ``+#&._%-``, every character of which is its own
    word in the dictionary's absence, so the run goes to jieba's HMM stage, which splits
    off each run of letters and digits (a decimal part and a percent sign with it); or
    it lies between runs, where whitespace is kept and every other character (an
    accent, a full-width letter, a kana) is a word. No piece is in the dictionary, so
    search mode adds no n-gram.

    >>> block_words("Apache-2.0"), block_words("v1.2%"), block_words(", (")
    (['Apache', '-', '2.0'], ['v1.2%'], [',', ' ', '('])
    """
    jieba = segmenter()
    from jieba import finalseg

    if jieba.re_han_default.match(block):
        return [block] if len(block) == 1 else [p for p in finalseg.re_skip.split(block) if p]
    skip = jieba.re_skip_default
    return [w for p in skip.split(block) for w in ([p] if skip.match(p) else p)]


def load_segmenter() -> None:
    """Load jieba's dictionary now (about 1 s) rather than on the first Chinese text;
    Milvus Lite's BM25 analyzer segments with the same jieba."""
    segmenter().initialize()


#: control characters other than tab and line breaks: PostgreSQL refuses NUL in text,
#: and an escape sequence printed back would act on the reader's terminal
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: the longest question a turn takes, and the longest query a lookup takes, from every
#: entry point (a model's, an MCP client's or a person's): past it a lookup's embedding,
#: BM25 analysis and exact matching grow with the text (475,000 characters took 24 s)
MAX_QUESTION_CHARS = 4000


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut.

    >>> clip("abcdef", 4)
    'abc…'
    """
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def normalize(text: str) -> str:
    """NFKC + case-fold + collapsed whitespace: the form exact matching compares."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_cjk(char: str) -> bool:
    return bool(_CJK.match(char))


def cjk_count(text: str) -> int:
    """How many CJK characters ``text`` holds.

    >>> cjk_count("Redis 连接池")
    3
    """
    return len(_CJK.findall(text))


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character anywhere."""
    return _CJK.search(text) is not None


def introduces(text: str) -> bool:
    """Whether ``text`` ends introducing what follows it ("Run:", "如下："): the quote keeps
    what follows such a line with it.

    >>> introduces("Recreate it:\\n"), introduces("可以通过以下方式绕过："), introduces("Done.")
    (True, True, False)
    """
    return text.rstrip().endswith((":", "："))


def has_latin(text: str) -> bool:
    """Whether ``text`` holds a Latin letter anywhere."""
    return _LATIN_WORD.search(text) is not None


#: quoted text: "…", “…”, ‘…’, 「…」, 『…』, `…` (a pasted log line or term)
_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|‘[^’\n]*’|「[^」\n]*」|『[^』\n]*』|`[^`\n]*`')
#: a run of Latin text (words, digits, punctuation) with CJK text on both sides
_ENCLOSED_LATIN = re.compile(f"(?<=[{_CJK_CHARS}])[^{_CJK_CHARS}]+(?=[{_CJK_CHARS}])")


#: a run of text without CJK characters or Chinese punctuation: what stands between a
#: Chinese sentence's words
_NON_CJK_RUN = re.compile(f"[^{_CJK_CHARS}，。？！、：；（）《》“”]+")
#: a Latin name: letters first, then letters, digits and ``_ . -`` (``node-sass``, ``v2``)
_LATIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]")


def latin_subject(question: str) -> str | None:
    """What a Chinese question asks about when it names it in Latin letters: its first
    Latin word of three characters or more that stands alone between its Chinese words
    (a product, a command, a setting: "DolphinScheduler 的 worker 分组怎么配置？"),
    lowercased, stop words aside. Several Latin words in a row are a pasted line (an
    error) and quoted text is quoted: neither names it. A question without Chinese has
    none (every word is Latin there).

    >>> latin_subject("DolphinScheduler 的 worker 分组怎么配置？")
    'dolphinscheduler'
    >>> latin_subject("HikariCP 报 Connection is not available 怎么办？")
    'hikaricp'
    >>> latin_subject("“ERROR 1290” 是什么意思"), latin_subject("Why is TiDB slow?")
    (None, None)
    """
    if not has_cjk(question):
        return None
    for run in _NON_CJK_RUN.findall(_QUOTED.sub(" ", question)):
        found: list[str] = _LATIN_NAME.findall(run)
        if len(found) == 1 and len(found[0]) >= 3 and found[0].lower() not in STOP_WORDS:
            return found[0].lower()
    return None


def asker_language(question: str) -> Language:
    """The language of the asker's own words: ``detect_language`` once what they quote is
    set aside — text in quotes or backticks, and Latin text of two or more words standing
    between Chinese on both sides (an error line pasted into a Chinese sentence). Chinese
    engineers paste English errors all the time; the answer follows their sentence.

    >>> asker_language("HikariCP 报 Connection is not available, timed out after 3000ms 怎么排查？")
    'zh'
    >>> asker_language("What does 幂等 mean"), asker_language('What does "支付超时" mean?')
    ('en', 'en')
    >>> asker_language("Redis 连接池 exhausted pool"), asker_language("Pod OOMKilled")
    ('zh', 'en')
    """

    def pasted(match: re.Match[str]) -> str:
        return " " if len(_LATIN_WORD.findall(match.group(0))) >= 2 else match.group(0)

    own = _ENCLOSED_LATIN.sub(pasted, _QUOTED.sub(" ", question))
    if not (_CJK.search(own) or _LATIN_WORD.search(own)):
        return detect_language(question)
    return detect_language(own)


_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|quot|apos|amp|lt|gt|nbsp);")


def unescape_entities(text: str) -> str:
    """``text`` with HTML character references written out, twice-escaped ones too:
    llama.cpp's function-calling format sends a model's quotes as ``&#34;`` / ``&#39;``
    (``&amp;#34;`` after a repair turn), which no reader of an answer should see.

    >>> print(unescape_entities("refund&#39;s &#34;支付超时&#34; &amp;#34;x&amp;#34; a &lt; b & c"))
    refund's "支付超时" "x" a < b & c
    """
    for _ in range(2):
        unescaped = _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
        if unescaped == text:
            break
        text = unescaped
    return text


def detect_language(text: str) -> Language:
    """``zh`` when there are at least as many CJK characters as Latin words, else ``en``
    (a Chinese character carries about as much as an English word).

    >>> detect_language("支付失败怎么办"), detect_language("Redis 连接池 exhausted pool")
    ('zh', 'zh')
    >>> detect_language("payment failed"), detect_language("What does 幂等 mean for refunds")
    ('en', 'en')
    """
    cjk = len(_CJK.findall(text))
    return "zh" if cjk and cjk >= len(_LATIN_WORD.findall(text)) else "en"
