"""The documents of ``superbiz eval scale``: a seed set's corpus and as many distinct
copies of it as a size needs, each with queries whose gold is known.

A copy is not a duplicate. Each copy ``k`` has its own word substitution: the seed's
words, per script (Latin words, Chinese words as jieba cuts them), ranked by frequency
and cut into bands of ``BAND`` words; within a band every word stands for another one
of the band, drawn by a permutation of the copy's own. The most frequent ``KEPT`` words
of each script (function words) stay, numbers get other digits of the same length,
CamelCase names change hump by hump, and each copy goes into domains of its own
(``database`` → ``database-<name of the copy>``). So a copy has the seed's shape —
lengths, headings, code blocks, languages, word frequencies, domains that overlap —
but new titles, entities, numbers and words: it answers none of the seed's questions,
and a seed question's gold stays the one document that answers it, at any size.

Each seed query gets the same substitution as its gold documents: the copy's own
question, whose gold is the copy of the seed's gold.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from superbiz._text import is_cjk, segmenter
from superbiz.evaluation.retrieval import EvalQuery, load_queries
from superbiz.knowledge.documents.frontmatter import split_frontmatter

#: words of each script that every copy keeps (the most frequent: function words; an
#: eighth of a small seed's)
KEPT = 120
#: words that may stand for each other: neighbours in the frequency ranking
BAND = 48

#: a Latin word (CamelCase split into humps), a run of digits, a run of CJK characters
_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SYLLABLES = (
    "ka", "ri", "zo", "mel", "tan", "vor", "shi", "lu", "den", "pa", "qui", "bex",
    "nor", "sa", "tri", "gon", "ly", "fe", "dra", "mo",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeedDocument:
    """One file of a seed corpus: its path (relative to the generated corpus), its
    frontmatter and its body."""

    path: str
    front: dict[str, object]
    body: str


@dataclass(frozen=True, slots=True)
class ScaleQuery:
    """A question whose gold is known: a seed query (``copy`` 0) or a copy's."""

    id: str
    query: str
    lang: str
    gold: tuple[str, ...]
    category: str | None
    copy: int


class Substitution:
    """One copy's word-for-word mapping (see the module docstring)."""

    def __init__(self, vocabulary: Vocabulary, copy: int, seed: int) -> None:
        rng = random.Random(f"{seed}:{copy}")
        self.copy = copy
        self.rng = rng
        self.words: dict[str, str] = {}
        for ranked in (vocabulary.latin, vocabulary.cjk):
            kept = min(KEPT, len(ranked) // 8)  # a small seed keeps fewer
            for start in range(kept, len(ranked), BAND):
                band = ranked[start : start + BAND]
                shuffled = band[:]
                rng.shuffle(shuffled)
                self.words.update(zip(band, shuffled, strict=True))
        self.name = _pseudo_word(rng)

    def text(self, text: str) -> str:
        return _TOKEN.sub(self._token, text)

    def _token(self, match: re.Match[str]) -> str:
        token = match.group(0)
        if token.isdigit():
            return self._number(token)
        if is_cjk(token[0]):
            words = segmenter().lcut(token, HMM=False)
            return "".join(self.words.get(word, word) for word in words)
        other = self.words.get(token.lower())
        if other is None:
            return token
        if token.isupper() and len(token) > 1:
            return other.upper()
        return other.capitalize() if token[0].isupper() else other

    def _number(self, digits: str) -> str:
        """Other digits of the same length, the same for the same number in one copy."""
        local = random.Random(f"{self.copy}:{digits}")
        first = "0" if len(digits) == 1 and digits == "0" else str(local.randint(1, 9))
        return first + "".join(str(local.randint(0, 9)) for _ in digits[1:])

    def domain(self, domain: str) -> str:
        return f"{domain}-{self.name}"


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The seed's words of each script, most frequent first."""

    latin: list[str]
    cjk: list[str]

    @classmethod
    def of(cls, texts: Sequence[str]) -> Vocabulary:
        latin: Counter[str] = Counter()
        cjk: Counter[str] = Counter()
        for text in texts:
            for token in _TOKEN.findall(text):
                if token.isdigit():
                    continue
                if is_cjk(token[0]):
                    cjk.update(segmenter().lcut(token, HMM=False))
                else:
                    latin[token.lower()] += 1
        return cls(_ranked(latin), _ranked(cjk))


def _ranked(counts: Counter[str]) -> list[str]:
    return [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def _pseudo_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3))


class ScaleCorpus:
    """The seed sets (each under ``<set name>/`` in the generated corpus) and their
    copies, written on demand into ``root``; ``write(documents)`` makes the corpus hold
    the first ``documents`` documents of the sequence seed, copy 1, copy 2, …"""

    def __init__(self, seeds: Sequence[Path], root: Path, *, seed: int = 36) -> None:
        self.root = root
        if root.exists():  # an earlier run's, perhaps larger: each size ingests the root
            shutil.rmtree(root)
        self.seed = seed
        self.documents: list[SeedDocument] = []
        self.queries: list[ScaleQuery] = []
        several = len(seeds) > 1
        for dataset in seeds:
            prefix = f"{dataset.name}/" if several else ""
            corpus = dataset / "corpus"
            for file in sorted(corpus.rglob("*.md")):
                front, body = split_frontmatter(file.read_text(encoding="utf-8"), str(file))
                rel = file.relative_to(corpus).as_posix()
                self.documents.append(SeedDocument(prefix + rel, dict(front), body))
            self.queries.extend(
                _seed_query(q, prefix, dataset.name if several else "")
                for q in load_queries(dataset)
            )
        self.vocabulary = Vocabulary.of(
            [d.body + "\n" + str(d.front.get("title", "")) for d in self.documents]
        )
        self._substitutions: dict[int, Substitution] = {}
        self._paths: dict[int, dict[str, str]] = {}
        self._written = 0

    @property
    def seed_size(self) -> int:
        return len(self.documents)

    def substitution(self, copy: int) -> Substitution:
        if copy not in self._substitutions:
            self._substitutions[copy] = Substitution(self.vocabulary, copy, self.seed)
        return self._substitutions[copy]

    def copy_path(self, path: str, copy: int) -> str:
        """Where copy ``copy`` of the seed document ``path`` lives: a path of its own.

        The substitution of a path's words and numbers can give two seed paths the same
        one (``faq-012`` and ``faq-047`` may both become ``faq-389``: numbers are drawn,
        not permuted), and the later document overwrote the earlier (321 of 50,000 on
        dev2); such a path gets the seed document's number.
        """
        if copy == 0:
            return path
        if copy not in self._paths:
            self._paths[copy] = self._copy_paths(copy)
        return self._paths[copy].get(path) or self._moved(path, copy)

    def _copy_paths(self, copy: int) -> dict[str, str]:
        """Every seed document's path in copy ``copy``, each distinct."""
        paths: dict[str, str] = {}
        taken: set[str] = set()
        for number, doc in enumerate(self.documents):
            moved = self._moved(doc.path, copy)
            while moved in taken:
                stem, dot, suffix = moved.rpartition(".")
                moved = f"{stem}-{number}{dot}{suffix}" if dot else f"{moved}-{number}"
            taken.add(moved)
            paths[doc.path] = moved
        return paths

    def _moved(self, path: str, copy: int) -> str:
        swap = self.substitution(copy)
        stem, dot, suffix = path.rpartition(".")
        moved = swap.text(stem) + dot + suffix if dot else swap.text(path)
        return f"copy-{copy:04d}/{moved}"

    def write(self, documents: int, on_file: Callable[[], None] | None = None) -> int:
        """Write documents up to the ``documents``-th (those written before stay); the
        count written now."""
        written = 0
        for number in range(self._written, documents):
            copy, index = divmod(number, self.seed_size)
            path, text = self.render(self.documents[index], copy)
            file = self.root / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
            written += 1
            if on_file:
                on_file()
        self._written = max(self._written, documents)
        return written

    def render(self, doc: SeedDocument, copy: int) -> tuple[str, str]:
        """The path and text of copy ``copy`` of ``doc``."""
        front = dict(doc.front)
        if copy:
            swap = self.substitution(copy)
            front.pop("source", None)
            for key in ("title", "when_to_retrieve"):
                if isinstance(front.get(key), str):
                    front[key] = swap.text(str(front[key]))
            for key in ("tags", "covers", "aliases"):
                values = front.get(key)
                if isinstance(values, list):
                    front[key] = [swap.text(str(v)) for v in values]
            if isinstance(front.get("category"), str):
                front["category"] = swap.domain(str(front["category"]))
            body = swap.text(doc.body)
        else:
            body = doc.body
        header = yaml.safe_dump(front, allow_unicode=True, sort_keys=False) if front else ""
        text = f"---\n{header}---\n\n{body}" if header else body
        return self.copy_path(doc.path, copy), text

    def queries_of(self, copies: int, per_copy: int, *, rng_seed: int = 0) -> list[ScaleQuery]:
        """The seed's queries, and ``per_copy`` of each copy's (up to copy ``copies - 1``;
        the same ones at every size): a copy's question is the seed question under the
        copy's substitution, its gold the copies of the seed's gold."""
        out = list(self.queries)
        for copy in range(1, copies):
            rng = random.Random(f"{rng_seed}:{copy}")
            swap = self.substitution(copy)
            picked = rng.sample(self.queries, min(per_copy, len(self.queries)))
            for query in picked:
                out.append(
                    ScaleQuery(
                        id=f"{query.id}@{copy}",
                        query=swap.text(query.query),
                        lang=query.lang,
                        gold=tuple(self.copy_path(g, copy) for g in query.gold),
                        category=swap.domain(query.category) if query.category else None,
                        copy=copy,
                    )
                )
        return out

    def documents_written(self) -> int:
        return self._written

    def iter_paths(self, documents: int) -> Iterator[str]:
        for number in range(documents):
            copy, index = divmod(number, self.seed_size)
            yield self.copy_path(self.documents[index].path, copy)


def _seed_query(query: EvalQuery, prefix: str, dataset: str) -> ScaleQuery:
    return ScaleQuery(
        id=f"{dataset}:{query.id}" if dataset else query.id,
        query=query.query,
        lang=query.lang,
        gold=tuple(prefix + g for g in query.gold),
        category=query.category,
        copy=0,
    )


def dump_queries(queries: Sequence[ScaleQuery], file: Path) -> None:
    """The queries as ``queries.jsonl`` (what ``eval retrieval`` reads), for a look."""
    lines = [
        json.dumps(
            {"id": q.id, "query": q.query, "lang": q.lang, "gold": list(q.gold),
             "category": q.category},
            ensure_ascii=False,
        )
        for q in queries
    ]  # fmt: skip
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
