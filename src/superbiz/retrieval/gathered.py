"""A passage stored in several documents is cited from the page it belongs to.

A site exported whole carries pages that gather the others: mdBook's ``print.html`` (the
Cargo book's holds its 103 pages, 2,027 chunks), Sphinx's single-page build, a wiki's
"all pages" view. Every passage of the book stands there a second time, so for any
question that page's best passage ties the page the passage belongs to, its many
matches lift it, and it was ranked first and quoted for 6 of 16 questions asked of the
Cargo book, above the page that answers. So a passage counts for the smaller documents
that hold it: among a lookup's hits, one whose every paragraph stands in hits of
documents of at most a ``GATHERS``-th of its own document's chunks is left out
(paragraphs, not whole passages: a gathering page runs small pages together into one
passage). Where documents of about one size share a passage (two formats of one page, a
footer every runbook repeats, the options every command page lists), nothing tells which
is its page, and each keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from superbiz.retrieval.records import ChunkHit

__all__ = ["GATHERS", "gathered_copies", "paragraphs"]

#: how many times the chunks of a page a document must hold to have gathered it: a
#: gathering page holds that page and more. Command pages that repeat the same options
#: (``cargo build`` and ``cargo check``, 23 and 22 chunks) gather nothing of each other
GATHERS = 2
_ABOVE_ANY = 1 << 62  # larger than any document


def paragraphs(text: str) -> list[str]:
    r"""The blocks of ``text`` between blank lines, stripped.

    >>> paragraphs("# Profiles\n\nopt-level sets it.\n  \n\n## debug\n")
    ['# Profiles', 'opt-level sets it.', '## debug']
    """
    return [kept for block in text.split("\n\n") if (kept := block.strip())]


def _opening(text: str) -> str:
    """The first of ``paragraphs(text)``, without splitting the rest."""
    return text.strip().partition("\n\n")[0].strip()


def gathered_copies(hits: Sequence[ChunkHit], sizes: Mapping[str, int]) -> frozenset[str]:
    r"""The ids of ``hits`` that open as a passage among ``hits`` does and whose every
    paragraph stands among ``hits``, both in documents of at most a ``GATHERS``-th of
    their own document's chunks (``sizes``: each document's chunk count; a document
    missing from it is never judged either way). It costs a lookup 0.08 ms on dev2 (30
    hits) and 0.27 ms at the 11,925 documents of ``eval scale`` (74 hits; its generated
    copies share paragraphs, so most of its lookups read every paragraph).

    >>> hit = lambda id, path, text: ChunkHit(id, path, "d", path, "", 0, text, 0.0)
    >>> hits = [hit("p7", "print.html", "# Profiles\n\nopt-level: 0-3\n\n# Publish\n\nlogin"),
    ...         hit("r2", "profiles.html", "# Profiles\n\nopt-level: 0-3"),
    ...         hit("u1", "publish.html", "# Publish\n\nlogin"),
    ...         hit("p9", "print.html", "# Profiles\n\nCargo is the Rust package manager")]
    >>> sizes = {"print.html": 2027, "profiles.html": 28, "publish.html": 9}
    >>> sorted(gathered_copies(hits, sizes))
    ['p7']
    >>> gathered_copies(hits, {"print.html": 30, "profiles.html": 28, "publish.html": 9})
    frozenset()
    """
    unique = {hit.id: hit for hit in hits}  # a chunk both searches found, once
    sized = [(sizes[h.doc_path], h) for h in unique.values() if h.doc_path in sizes]
    least = min((size for size, _ in sized), default=0)
    judged = [(size, hit) for size, hit in sized if size >= GATHERS * least > 0]
    if not judged:  # no document among the hits holds twice another's chunks
        return frozenset()
    reach = max(size for size, _ in judged) // GATHERS
    yielding = [(size, hit) for size, hit in sized if size <= reach]
    # a copy opens as a passage of a smaller document does: most lookups stop here
    opens: dict[str, int] = {}
    for size, hit in yielding:
        opening = _opening(hit.text)
        if size < opens.get(opening, _ABOVE_ANY):
            opens[opening] = size
    judged = [(s, hit) for s, hit in judged if GATHERS * opens.get(_opening(hit.text), s) <= s]
    if not judged:
        return frozenset()
    blocks = {hit.id: paragraphs(hit.text) for _, hit in yielding}
    smallest: dict[str, int] = {}  # each paragraph's smallest document that may yield it
    for size, hit in yielding:
        for block in blocks[hit.id]:
            if size < smallest.get(block, _ABOVE_ANY):
                smallest[block] = size
    copies = set()
    for size, hit in judged:
        own = blocks.get(hit.id) or paragraphs(hit.text)
        if own and all(GATHERS * smallest.get(b, size) <= size for b in own):
            copies.add(hit.id)
    return frozenset(copies)
