"""A page that gathers the others (mdBook's print.html) does not outrank the page a
passage belongs to: the rule on its own, then a small book ingested as mdBook writes it
(real USE, Milvus Lite, SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import ingested_kb

from superbiz.retrieval.gathered import gathered_copies
from superbiz.retrieval.records import ChunkHit


def hit(id_: str, path: str, text: str) -> ChunkHit:
    return ChunkHit(id_, path, "book", path, "", 0, text, 0.0)


def test_a_passage_counts_for_the_smallest_document_holding_it() -> None:
    hits = [
        hit("print-1", "print.html", "# opt-level\n\nopt-level sets the optimisation"),
        hit("profiles-1", "profiles.html", "# opt-level\n\nopt-level sets the optimisation"),
        hit("excerpt-1", "excerpt.html", "# opt-level\n\nopt-level sets the optimisation"),
        hit("print-2", "print.html", "# The Cargo Book\n\nopt-level sets the optimisation"),
    ]
    sizes = {"print.html": 2027, "profiles.html": 28, "excerpt.html": 3}

    # the print page's own title is nowhere else: that passage stays its own
    assert gathered_copies(hits, sizes) == {"print-1", "profiles-1"}


def test_a_passage_joining_two_small_pages_is_theirs() -> None:
    """A gathering page runs small pages together into one passage."""
    joined = hit("print-1", "print.html", "# Login\n\nRun login.\n\n# Yank\n\nRun yank.")
    login = hit("login-1", "login.html", "# Login\n\nRun login.")
    yank = hit("yank-1", "yank.html", "# Yank\n\nRun yank.")
    sizes = {"print.html": 90, "login.html": 1, "yank.html": 1}

    assert gathered_copies([joined, login, yank], sizes) == {"print-1"}
    # one of the two pages not among the hits: the passage holds what no other shows
    assert gathered_copies([joined, login], sizes) == frozenset()


def test_documents_of_one_size_or_of_unknown_size_keep_a_shared_passage() -> None:
    """A footer every runbook repeats: nothing says which runbook it belongs to."""
    footer = [hit("a", "disk.md", "Page the on-call"), hit("b", "dns.md", "Page the on-call")]

    assert gathered_copies(footer, {"disk.md": 4, "dns.md": 4}) == frozenset()
    assert gathered_copies(footer, {"disk.md": 4}) == frozenset()
    assert gathered_copies(footer, {}) == frozenset()
    assert gathered_copies([hit("e", "empty.md", "\n\n")], {"empty.md": 9}) == frozenset()


CHAPTERS = {
    "profiles": (
        "Profiles",
        """<p>Profiles provide a way to alter the compiler settings, influencing things
like optimizations and debugging symbols.</p>
<h2 id="opt-level"><a class="header" href="#opt-level">opt-level</a></h2>
<p>The <code>opt-level</code> setting controls the optimization level of the dev and
release profiles: 0 for no optimizations, 3 for all of them, "s" and "z" for binary
size. Set it in the <code>[profile.dev]</code> table of the manifest.</p>""",
    ),
    "publishing": (
        "Publishing on crates.io",
        """<p>Once you have a library you would like to share, publish it on crates.io.
Run <code>cargo login</code> with the API token from your account settings, then
<code>cargo publish</code> uploads the package. A published version cannot be
overwritten; yank it to keep new projects from depending on it.</p>""",
    ),
    "vendoring": (
        "Vendoring dependencies",
        """<p>To build without network access, copy every dependency's source into the
project with <code>cargo vendor</code>, and point the source replacement in
<code>.cargo/config.toml</code> at the vendor directory; an offline build then finds
every crate on disk.</p>""",
    ),
}


def _page(title: str, main: str) -> str:
    """A page as mdBook writes it: a sidebar of every chapter beside the chapter."""
    sidebar = "".join(f'<li><a href="{n}.html">{t}</a></li>' for n, (t, _) in CHAPTERS.items())
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        f'<nav id="sidebar" class="sidebar"><ol class="chapter">{sidebar}</ol></nav>'
        f'<div id="page-wrapper"><main>{main}</main></div></body></html>'
    )


def _chapter(name: str) -> str:
    title, body = CHAPTERS[name]
    return f'<h1 id="{name}"><a class="header" href="#{name}">{title}</a></h1>\n{body}'


BOOK = {
    **{
        f"book/{name}.html": _page(f"{title} - The Book", _chapter(name))
        for name, (title, _) in CHAPTERS.items()
    },
    # every chapter again, one after the other: what mdBook's print.html holds
    "book/print.html": _page(
        "The Book",
        '<div style="break-before: page"></div>'.join(_chapter(name) for name in CHAPTERS),
    ),
}

QUESTIONS = {
    "How do I set the optimization level of the dev profile?": "book/profiles.html",
    "How do I publish my library and what if a version is broken?": "book/publishing.html",
    "怎么在没有网络的机器上构建，依赖要怎么准备？": "book/vendoring.html",
}


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Any]:
    with ingested_kb(tmp_path_factory.mktemp("book"), dict(BOOK), use_embedder) as kb:
        yield kb


@pytest.mark.parametrize("question", QUESTIONS, ids=[Path(p).stem for p in QUESTIONS.values()])
def test_the_chapter_not_the_print_page_answers(book: Any, question: str) -> None:
    ranked = [doc.doc_path for doc in book.retriever.candidates(question).ranked]

    assert ranked[0] == QUESTIONS[question], ranked
    # the print page's passages that matched all stand in the chapters it gathers
    assert "book/print.html" not in ranked, ranked
