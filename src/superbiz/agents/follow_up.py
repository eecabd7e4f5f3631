"""Whether a question in a session refers back to the turn before it.

A follow-up that nothing answers in its own words is read with the question before it
(``turn_selection``): "And how do I resume it afterwards?" after a question about pausing
a replica's replay, "重试几次之后会放弃？" after one about webhooks. Read so, a question
that stands alone is answered from the previous, unrelated question's documents: asked
five to a running session (``eval answers --running 5``), 20 questions of the four
development sets that a fresh session honestly answered with "nothing answers" quoted an
earlier question's runbook instead, and none of those was right.

What tells the two apart is grammar, not the knowledge base: a follow-up points back, with
a pronoun or a demonstrative ("it", "those", "那台机器"), by opening as a continuation
("And …", "What about …"), or by naming no thing at all: in Chinese, which drops what
both speakers know, no noun ("重试几次之后会放弃？": verbs and a count); in English, a
question of one verb and closed-class words ("Who should I escalate to?"). These word
lists are closed classes of the two languages superbiz reads, chosen from grammar; a
possessive ("renews its certificate") points inside its own sentence and is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from superbiz._text import has_cjk, key_terms, segmenter

__all__ = ["asks_instead", "lookup_words", "names_nothing", "referent", "refers_back"]

#: English pronouns and adverbs that point at something said before; "its" and "their"
#: are left out (a possessive's owner is nearly always in its own sentence: "Kubelet has
#: failed to renew its client certificate"), and so are "this" and "that", which an alert
#: text uses for itself ("Ensure NTP is configured on this host")
_ENGLISH = re.compile(
    r"\b(?:it|they|them|these|those|again|afterwards|instead)\b"
    r"|^\W*(?:and|but|then|so|also|what about|how about|what if)\b",
    re.IGNORECASE,
)
#: an English question that names no thing, only what to do about the thing before ("Who
#: should I escalate to?", "What do we do next?", "How many times do you retry?", "What
#: can I delete safely?"): a question word, an auxiliary, a personal pronoun, one verb,
#: then prepositions or adverbs alone (of time, of manner: "safely", "manually"). Chinese
#: shows it by naming no noun (``_NAMING_TAGS``); English needs no tagger for this shape
_ENGLISH_NO_THING = re.compile(
    r"^\W*(?:what|who|whom|which|when|where|why|how)"
    r"(?:\s+(?:long|much|many|often|soon|else)(?:\s+times)?)?"
    r"\s+(?:do|does|did|should|shall|can|could|would|will|must|may|might)"
    r"\s+(?:i|we|you|they|one)(?:\s+(?:need|have|want|ought)\s+to)?\s+[a-z]+"
    r"(?:\s+(?:to|for|with|about|on|in|at|from|up|out|next|now|first|then|else"
    r"|safely|manually|automatically|quickly|immediately|properly|correctly|permanently"
    r"|temporarily|usually|normally))*\W*$",
    re.IGNORECASE,
)
#: Chinese pronouns, and demonstratives as jieba cuts them: 这 or 那 alone or with a
#: measure word (这个, 那台, 这些, 这笔 for a payment, 这单 for an order, 这起 for an
#: incident); not the place words 这边, 这里 ("我们这边要查什么"), which point at the
#: asker's side, nor 这么, 那么 (so much), nor 这样, 那样, which point inside their own
#: sentence ("像 Oracle 那样的")
_CHINESE_PRONOUNS = frozenset({"它", "它们", "其"})
_DEMONSTRATIVE = re.compile(
    r"[这那][个些台种次条张步项类份位笔单件起家套批段组款篇行列则部轮回例]?"
)
#: jieba's part-of-speech tags of a thing named: nouns, names of people, places and
#: organisations, other proper nouns, a word in Latin letters ("webhook", "Redis"); a
#: verbal noun (``vn``: 重试) names an action, not what it acts on
_NAMING_TAGS = frozenset({"n", "nr", "nrt", "nrfg", "ns", "nt", "nz", "ng", "eng"})
#: "what about X?", or "and X?" with no question word or verb of its own ("And for a
#: lead?"): the question before, asked of something else
_INSTEAD_ENGLISH = re.compile(
    r"^\W*(?:and\s+)?(?:what|how)\s+about\b"
    r"|^\W*and\b(?!.*\b(?:what|who|whom|which|when|where|why|how|do|does|did|is|are|was"
    r"|were|can|could|should|shall|will|would|must|may|might|has|have|had)\b)",
    re.IGNORECASE,
)
#: a Chinese question ending in 呢 ("那签名校验失败呢？") asks "what about" only with no
#: question word of its own ("怎么回事呢？" is a whole question, 呢 only softens it)
_INSTEAD_CHINESE = re.compile(r"呢\s*[？?]?\s*$")
_QUESTION_WORDS = re.compile(
    r"什么|怎|如何|为何|为啥|哪|几|多少|是否|吗|能否|可否|有没有|是不是|要不要|会不会|能不能"
)
#: the most earlier questions a follow-up is read with: its referent and the follow-ups
#: between (a conversation that keeps pointing back stays on its subject, but not forever)
REFERENT_QUESTIONS = 3


def refers_back(question: str) -> bool:
    """Whether ``question`` points back at an earlier turn instead of standing alone.

    >>> refers_back("And how do I resume it afterwards?")
    True
    >>> refers_back("Kubelet has failed to renew its client certificate.")
    False
    >>> refers_back("Who should I escalate to?"), refers_back("What is EXHAUSTED?")
    (True, False)
    >>> refers_back("重试几次之后会放弃？"), refers_back("如果那台机器丢了怎么恢复？")
    (True, True)
    >>> refers_back("如何对比上下游数据的一致性？"), refers_back("签名校验失败呢？")
    (False, True)
    """
    if _ENGLISH.search(question) or names_nothing(question) or asks_instead(question):
        return True
    if not has_cjk(question):
        return False
    segmenter()  # jieba set up as everywhere else (quiet, its cache file)
    import jieba.posseg

    words = [(w.word, w.flag) for w in jieba.posseg.cut(question)]
    if any(word in _CHINESE_PRONOUNS or _DEMONSTRATIVE.fullmatch(word) for word, _ in words):
        return True
    return not any(flag in _NAMING_TAGS for _, flag in words)


def names_nothing(question: str) -> bool:
    """Whether ``question`` is English that names no thing of its own, only what to do
    about the thing before: its lookup is asked with what it points back at, as a
    question without a key term is ("What do I check first?" after a question about the
    Redis pool had looked up checks in general).

    >>> names_nothing("What do I check first?"), names_nothing("What is EXHAUSTED?")
    (True, False)
    """
    return _ENGLISH_NO_THING.match(question) is not None


def referent(asked: Sequence[str]) -> str | None:
    """What a follow-up after the session's questions (``asked``, oldest first) points
    back at: the last question, and the ones before it that it points back at in turn,
    up to the one that stands alone (at most ``REFERENT_QUESTIONS``). "重试几次之后会放弃？"
    after "那签名校验失败呢？" is still about the webhooks asked of before that.

    >>> referent(["How do I pause replication?", "And how do I resume it?"])
    'How do I pause replication?\\nAnd how do I resume it?'
    >>> referent(["How do I pause replication?", "How do I rotate the keys?"])
    'How do I rotate the keys?'
    >>> referent([]) is None
    True
    """
    chain: list[str] = []
    for question in reversed(asked):
        chain.append(question)
        if len(chain) == REFERENT_QUESTIONS or not refers_back(question):
            break
    return "\n".join(reversed(chain)) if chain else None


def asks_instead(question: str) -> bool:
    """Whether ``question`` asks the question before it again, of something else ("What
    about refunds?", "那签名校验失败呢？"): its words alone are not what it asks, so it is
    read with its referent even where they find something (after a question about
    webhooks, the webhook runbook's signature section, not the payment channel's).

    >>> asks_instead("那签名校验失败呢？"), asks_instead("What about refunds?")
    (True, True)
    >>> asks_instead("And for a lead?"), asks_instead("And how do I lift the ban again?")
    (True, False)
    >>> asks_instead("怎么回事呢？"), asks_instead("How do I rotate the keys?")
    (False, False)
    """
    if _INSTEAD_ENGLISH.search(question):
        return True
    return bool(_INSTEAD_CHINESE.search(question)) and not _QUESTION_WORDS.search(question)


def lookup_words(question: str, asked: Sequence[str]) -> str:
    """What a lookup of ``question`` asks after the session's questions (``asked``,
    oldest first): its own words where they stand alone, else its referent's with them. A
    question with no key term ("那怎么办？"), English naming no thing ("What do I check
    first?") or asking the question before of something else ("And for a lead?") cannot
    stand alone; a pronoun alone ("When does it vest?") can: its key terms find the page
    (asked with the referent, no quoted document changed and held runbooks were fetched
    again).

    >>> lookup_words("What do I check first?", ["Why is the Redis pool exhausted?"])
    'Why is the Redis pool exhausted?\\nWhat do I check first?'
    >>> lookup_words("How do I rotate the keys?", ["Why is the Redis pool exhausted?"])
    'How do I rotate the keys?'
    >>> lookup_words("那怎么办？", [])
    '那怎么办？'
    """
    before = referent(asked)
    if before is None or (
        key_terms(question) and not names_nothing(question) and not asks_instead(question)
    ):
        return question
    return f"{before}\n{question}"
