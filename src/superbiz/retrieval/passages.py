"""How well one passage answers a question: its dense cosine plus the share of the
question's terms that it, its headings and its document's title name.

The answer selection (``superbiz.agents.answer_selection``) scores every stored passage of
the documents it may quote this way; the learned ranker scores the passages a lookup
retrieved the same way, so that a document is ranked by the passage that answers, as it
will be quoted. Pure: text and cosines in, numbers out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache

from superbiz._text import (
    all_terms,
    codes,
    has_cjk,
    key_terms,
    normalize,
    stem,
    unknown_words,
    without_measure,
)

#: weight of the share of the question's terms a passage (with its headings and title)
#: names, beside the dense cosine
TERM_WEIGHT = 0.3

_COMPOUND = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)+")
#: a list item that is a link and nothing else: ``- [Nacos是什么](#1.1)``
_LINK_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+\[[^\]]+\]\([^)]*\)[ \t]*$")
#: a heading that asks what its section answers: a FAQ's question ("How long do we have
#: to respond?", "如何配置集群？") or a how-to's ("How to rotate the keys")
_ASKS = re.compile(
    r"[?？]\s*$|^\W*(?:how\s+(?:to|do|does|can|should)\b|如何|怎么|怎样|为什么|为何)", re.I
)
#: the fewest headings in a document whose common words count as its title's
_COMMON_HEADINGS = 3
#: the share of a passage's lines (headings and blank lines aside) that are links, and
#: how many, that make it a table of contents
_NAVIGATION_SHARE = 0.6
_NAVIGATION_LINKS = 3


def question_terms(question: str) -> list[str]:
    """What a passage is matched on: the question's key terms, its numbers of three or
    more digits (a status or exit code, ``429``, ``137``, names a runbook on its own) and
    its compound names as written (``max-active``, which segmentation splits in two)
    and the Chinese words segmentation does not know (``unknown_words``: "到账").

    >>> question_terms("API gateway returns 429 for one partner")
    ['api', 'gateway', 'returns', 'one', 'partner', '429']
    >>> question_terms("那 max-active 应该调到多少？")
    ['max', 'active', '多少', 'max-active', '调到']
    """
    compounds = [c.casefold() for c in _COMPOUND.findall(normalize(question))]
    unknown = unknown_words(question)
    return list(dict.fromkeys([*key_terms(question), *codes(question), *compounds, *unknown]))


def coverage(terms: Sequence[str], text: str, unwritten: int = 0) -> float:
    """The share of ``terms`` that ``text`` (normalised) names, beside ``unwritten``
    further terms counted as named (``split_unwritten``).

    >>> coverage(["redis", "连接池"], "redis 连接池耗尽"), coverage([], "x")
    (1.0, 0.0)
    >>> coverage(["wall"], "target_compile_options", unwritten=3)
    0.75
    """
    if not terms and not unwritten:
        return 0.0
    return (sum(names(text, term) for term in terms) + unwritten) / (len(terms) + unwritten)


def names(text: str, term: str) -> bool:
    """Whether ``text`` names ``term``: as a substring ("deploy" is named by
    "deployment", and Chinese has no spaces between words), but a code only as the whole
    number: "429" is not named by "42903" or "1429", another error's code. A setting's
    name written as one word counts where it is written in words (``_joined``):
    "maximumPoolSize" is the runbook's ``maximum-pool-size`` (a name written in words,
    ``node-exporter``, is matched by its words already).

    >>> names("error 42903", "429"), names("http 429 too many", "429")
    (False, True)
    >>> names("deployments", "deploy"), names("重试间隔", "重试")
    (True, True)
    >>> names("调 `maximum-pool-size`", "maximumpoolsize"), names("node_exporter", "node-exporter")
    (True, False)
    """
    if term.isdigit():
        return term in text and _whole_number(term).search(text) is not None
    if term in text:
        return True
    return (
        len(term) >= _SETTING_CHARS and term.isascii() and term.isalnum() and term in _joined(text)
    )


#: the fewest letters of a setting's name in one word matched where written in words
_SETTING_CHARS = 10
#: a hyphen or an underscore inside a word: how a setting's name is written in one style
_WORD_JOINER = re.compile(r"(?<=[a-z0-9])[-_](?=[a-z0-9])")


def _joined(text: str) -> str:
    """``text`` without the hyphens and underscores inside its words (normalised text is
    lower case, so ``maxActive``, ``max-active`` and ``max_active`` read alike)."""
    return _WORD_JOINER.sub("", text)


@cache
def _whole_number(code: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![0-9]){code}(?![0-9])")


def split_unwritten(terms: Sequence[str], chinese: bool) -> tuple[list[str], int]:
    """``terms`` a passage is matched on, and how many of them no passage can name: the
    Chinese ones when the knowledge base writes no Chinese (``chinese`` False).

    >>> split_unwritten(["目标", "wall", "编译"], chinese=False)
    (['wall'], 2)
    >>> split_unwritten(["目标", "wall"], chinese=True)
    (['目标', 'wall'], 0)
    """
    if chinese:
        return list(terms), 0
    written = [term for term in terms if not has_cjk(term)]
    return written, len(terms) - len(written)


def passage_text(title: str, heading: str, text: str) -> str:
    """What a passage's terms are read in: its document's title, its headings, its text."""
    return normalize(f"{title}\n{heading}\n{text}")


def passage_score(
    cosine: float | None, terms: Sequence[str], text: str, unwritten: int = 0
) -> float:
    """``cosine`` (None: no vector) plus ``TERM_WEIGHT`` × the share of ``terms`` that
    ``text`` (``passage_text``) names, ``unwritten`` more counted as named (``coverage``).

    >>> round(passage_score(0.5, ["redis", "pool"], "redis 连接池"), 2)
    0.65
    """
    share = coverage(terms, text, unwritten)
    return TERM_WEIGHT * share + (cosine if cosine is not None else 0.0)


def heading_match(question: str, title: str, heading: str) -> int:
    """How many words a section's ``heading`` and ``question`` share when the heading is
    what the question asks, else 0: a question (``_ASKS``) every word of which, beyond
    the document's ``title``, ``question`` names (a FAQ answers under its questions:
    "…, how long do we have to respond?" is asked under "How long do we have to
    respond?", where the cosine preferred the entry about customers disputing a refund),
    or a heading that names at least half the words of ``question`` beyond the title
    ("Escalation" for "Who should I escalate to?": a short follow-up's cosine with every
    section is noise; "Inactive replication slots" for "How do I check for inactive
    replication slots?", where the cosine preferred "Alerts"). A question that names
    nothing beyond the title asks for a heading every word of which it says, common
    words too ("怎么处理？" of the Redis runbook: its "处理"). English words count with
    or without an inflection (``stem``); "how many times" or "how long" is what is asked,
    not of what: "How long is the sabbatical?" asks for the handbook's "Sabbatical".

    >>> heading_match("A card was disputed, how long do we have to respond?",
    ...               "Chargeback FAQ", "How long do we have to respond?")
    2
    >>> heading_match("Who should I escalate to?", "CrashLoopBackOff runbook", "Escalation")
    1
    >>> heading_match("How do I configure Nacos?", "Nacos", "What is Nacos?")  # the title's
    0
    >>> heading_match("How long do we keep logs?", "FAQ", "Log retention")
    1
    >>> heading_match("怎么处理？", "Redis 连接池耗尽处理", "处理")
    1
    >>> heading_match("How many times do you retry?", "Webhooks", "Retry schedule")
    1
    >>> heading_match("PersistentVolume is filling up.", "Kube Persistent Volume Filling Up",
    ...               "KubePersistentVolumeFillingUp")
    0
    """
    return heading_matcher(question, title)(heading)


def heading_matcher(
    question: str, title: str, headings: Sequence[str] = ()
) -> Callable[[str], int]:
    """``heading_match`` of ``question`` in a document titled ``title``, for each of its
    ``headings``: the question's and the title's words are read once, not once a passage.
    A word in most of the document's headings is no more what is asked than a word of
    its title: TiDB's error page heads each error "… 处理单元报错 `…`", and "Load 单元报错
    Unknown character set" named three words of the heading of another error.

    >>> headings = ["load 处理单元报错 packet", "dump 处理单元报错 timeout", "relay 处理单元报错"]
    >>> match = heading_matcher("Load 单元报错 Unknown character set", "DM", headings)
    >>> [match(heading) for heading in headings]
    [0, 0, 0]
    """
    titled = set(question_terms(title))
    distinct = list(dict.fromkeys(headings))
    if len(distinct) >= _COMMON_HEADINGS:
        counts = Counter(term for heading in distinct for term in set(question_terms(heading)))
        titled |= {term for term, n in counts.items() if 2 * n > len(distinct)}
    said, whole_title = normalize(question), _squashed(normalize(title))
    measured = without_measure(question)
    asked = [term for term in question_terms(measured) if term not in titled]

    def match(heading: str) -> int:
        named = normalize(heading)
        if not asked:  # its words are the title's: a part of the title may be what it asks
            said_all = all_terms(heading) if _squashed(named) != whole_title else []
            return len(said_all) if said_all and all(_inflected(said, t) for t in said_all) else 0
        if _squashed(named) in whole_title:
            return 0  # the document's own title, written otherwise ("KubePodCrashLooping")
        if _ASKS.search(heading):
            own = [term for term in question_terms(heading) if term not in titled]
            if own and all(_inflected(said, term) for term in own):
                return len(own)
        count = sum(_inflected(named, term) for term in asked)
        return count if count and 2 * count >= len(asked) else 0

    return match


def _inflected(text: str, term: str) -> bool:
    """Whether ``text`` names ``term`` with or without an English inflection (``stem``)."""
    return names(text, term) or names(text, stem(term))


def _squashed(text: str) -> str:
    return "".join(filter(str.isalnum, text))


def is_navigation(text: str) -> bool:
    """Whether a passage is a list of links: a table of contents or a hub page's index,
    which says where answers are and answers nothing. A FAQ's contents list every
    question the page answers, so it named each question's terms and matched its words
    better than the answer did: it was quoted instead of the answer.

    >>> is_navigation("# FAQ\\n- 常规\\n  - [是什么](#1.1)\\n  - [可用](#1.3)\\n  - [依赖](#1.4)")
    True
    >>> is_navigation("## See also\\n- [Runbook](r.md)\\n- [Dashboard](d.md)\\n- [Logs](l.md)")
    True
    >>> is_navigation("Drain the node first.\\nThen restart it.\\n- [Runbook](r.md)")
    False
    """
    lines = _body_lines(text)
    links = sum(1 for line in lines if _LINK_ITEM.match(line))
    return links >= _NAVIGATION_LINKS and links >= _NAVIGATION_SHARE * len(lines)


def is_bare_heading(text: str) -> bool:
    """Whether a passage is headings alone: a page's title stored as a chunk of its own
    (an alert runbook's ``# etcdGRPCReadRequestsSlow`` above its first section). Its words
    are the question's, so it scored best, and the quote under it was empty.

    >>> is_bare_heading("# etcdGRPCReadRequestsSlow"), is_bare_heading("# T\\n\\nRestart it.")
    (True, False)
    """
    return not _body_lines(text)


def _body_lines(text: str) -> list[str]:
    """The lines of ``text`` that are neither blank nor a heading."""
    return [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("#")]
