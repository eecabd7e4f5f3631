"""Heading-aware chunking: heading paths, fences, merging, windows with overlap."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from superbiz.config import IngestSettings
from superbiz.knowledge.documents.chunking import chunk_markdown, split_sections


def _filler(label: str, n: int = 70) -> str:
    """A paragraph of about ``n`` characters, unique to ``label``."""
    text = f"{label} paragraph text "
    return (text * (n // len(text) + 1))[:n].strip()


def _overlap(a: str, b: str) -> int:
    """Length of the longest suffix of ``a`` that starts ``b``."""
    return max((k for k in range(1, min(len(a), len(b)) + 1) if a.endswith(b[:k])), default=0)


def test_heading_paths() -> None:
    body = "\n".join(
        [
            "# Runbook",
            _filler("intro"),
            "## Symptoms",
            _filler("symptoms"),
            "### Logs",
            _filler("logs"),
            "## Fix",
            _filler("fix"),
            "# Appendix",
            _filler("appendix"),
        ]
    )
    chunks = chunk_markdown(body, size=100, overlap=10)
    assert [c.heading_path for c in chunks] == [
        ("Runbook",),
        ("Runbook", "Symptoms"),
        ("Runbook", "Symptoms", "Logs"),
        ("Runbook", "Fix"),
        ("Appendix",),
    ]
    assert [c.heading for c in chunks][2] == "Runbook > Symptoms > Logs"
    assert [c.index for c in chunks] == list(range(5))
    # the heading line stays with its text
    assert chunks[3].text.startswith("## Fix\nfix paragraph")


def test_text_before_the_first_heading_has_an_empty_path() -> None:
    chunks = chunk_markdown(_filler("preface") + "\n# A\n" + _filler("a"), size=100, overlap=10)
    assert [c.heading_path for c in chunks] == [(), ("A",)]
    assert chunks[0].heading == ""


def test_chinese_headings() -> None:
    body = f"# 支付失败排查\n{_filler('简介')}\n## 回调超时\n{_filler('回调')}\n"
    chunks = chunk_markdown(body, size=100, overlap=10)
    assert chunks[-1].heading_path == ("支付失败排查", "回调超时")


def test_code_fences_are_not_headings() -> None:
    body = (
        "# Script\n```bash\n# restart the pool\nsystemctl restart app\n```\n~~~\n## nor this\n~~~\n"
    )
    sections = split_sections(body)
    assert [s.heading_path for s in sections] == [("Script",)]
    chunks = chunk_markdown(body)
    assert len(chunks) == 1
    assert "# restart the pool" in chunks[0].text
    assert "## nor this" in chunks[0].text


def test_small_sections_are_merged() -> None:
    body = "# A\nalpha\n## B\nbeta\n## C\ngamma\n"
    chunks = chunk_markdown(body)  # default size 800
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("A",)
    assert chunks[0].text == "# A\nalpha\n\n## B\nbeta\n\n## C\ngamma"


def test_merging_stops_at_size() -> None:
    body = "\n".join(f"## S{i}\n{_filler(f's{i}', 60)}" for i in range(6))
    chunks = chunk_markdown(body, size=150, overlap=10)
    assert 1 < len(chunks) < 6
    assert all(len(c.text) <= 150 for c in chunks)
    assert "".join(c.text for c in chunks).count("## S") == 6  # nothing lost, nothing doubled


def test_long_sections_are_windowed_with_overlap() -> None:
    size, overlap = 300, 60
    words = " ".join(f"word{i}" for i in range(400))
    chunks = chunk_markdown(f"# Long\n{words}\n", size=size, overlap=overlap)
    assert len(chunks) > 5
    assert all(c.heading_path == ("Long",) for c in chunks)
    assert all(len(c.text) <= size for c in chunks)
    assert all(len(c.text) >= size // 2 for c in chunks[:-1])  # about ``size`` each
    for before, after in itertools.pairwise(chunks):
        shared = _overlap(before.text, after.text)
        assert overlap // 2 <= shared <= overlap, (before.text[-80:], after.text[:80])
        assert after.text.startswith("word")  # windows start on a word, not inside one
    assert chunks[0].text.startswith("# Long\nword0 ")
    assert chunks[-1].text.endswith("word399")


def test_chinese_long_section_windows_overlap() -> None:
    sentences = "".join(f"第{i}条说明支付回调超时的处理办法。" for i in range(80))
    chunks = chunk_markdown(f"# 回调\n{sentences}", size=200, overlap=40)
    assert len(chunks) > 3
    assert all(len(c.text) <= 200 for c in chunks)
    for before, after in itertools.pairwise(chunks):
        assert _overlap(before.text, after.text) > 0


def _fences(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.lstrip().startswith("```"))


def test_a_window_ends_before_a_code_block_rather_than_inside_it() -> None:
    """A runbook's commands cut from their fence read as prose and embed as half a
    block; a window ends at a break outside the block when its second half has one."""
    prose = " ".join(f"Step {i} checks the replica lag first." for i in range(8))
    block = "```bash\n" + "\n".join(f"kubectl -n db get pod mysql-{i}" for i in range(6)) + "\n```"
    body = f"# Failover\n\n{prose}\n\n{block}\n\n{prose}\n"
    chunks = chunk_markdown(body, size=400, overlap=60)
    assert len(chunks) > 2
    assert all(_fences(c.text) % 2 == 0 for c in chunks), [c.text for c in chunks]
    assert sum(block in c.text for c in chunks) == 1  # whole in one chunk, not repeated


def test_a_block_longer_than_a_window_is_still_cut_at_a_line() -> None:
    block = "```\n" + "\n".join(f"line {i:03} of the log" for i in range(60)) + "\n```"
    chunks = chunk_markdown(f"# Log\n\n{block}\n", size=300, overlap=40)
    assert len(chunks) > 3 and all(len(c.text) <= 300 for c in chunks)
    assert all(c.text.endswith(("of the log", "```")) for c in chunks)


#: ``_table``'s header as a later window repeats it: without its padding
REPEATED = ["| Code | Meaning |", "|---|---|"]


def _table(rows: int, width: int = 60) -> str:
    """A pipe table of error codes, each row about ``width`` characters."""
    cells = (f"| 40{i:03} | {_filler(f'code{i}', width - 14)} |" for i in range(rows))
    return "| Code | Meaning |\n|------|---------|\n" + "\n".join(cells)


@pytest.mark.parametrize(("size", "overlap"), [(300, 60), (800, 100), (200, 150)])
def test_a_window_begun_among_a_tables_rows_starts_on_a_row_under_its_header(
    size: int, overlap: int
) -> None:
    """A table's rows cut from their header read, and embed, as cells of nothing: every
    window begun among the rows starts on a row, with the header repeated above it."""
    table = _table(40)
    body = f"# Errors\n\n{_filler('intro', 200)}\n\n{table}\n\n{_filler('after', 300)}\n"
    chunks = chunk_markdown(body, size=size, overlap=overlap)
    rows = table.split("\n")[2:]
    holding = [c for c in chunks if any(row in c.text for row in rows)]
    assert len(holding) > 2
    for chunk in holding:
        lines = chunk.text.split("\n")
        first_row = next(i for i, line in enumerate(lines) if line.startswith("| 40"))
        head = lines[first_row - 2 : first_row]
        assert head in (table.split("\n")[:2], REPEATED), chunk.text
        assert all(line in rows for line in lines[first_row:] if line.startswith("|"))
    assert {row for c in holding for row in c.text.split("\n")} >= set(rows)  # none lost
    for before, after in itertools.pairwise(holding):  # rows shared as far as the overlap
        shared = set(before.text.split("\n")) & set(after.text.split("\n")) & set(rows)
        assert sum(len(row) + 1 for row in shared) <= overlap
    assert all(len(c.text) <= size for c in chunks)


def test_a_table_after_its_rows_are_cut_gives_the_text_below_it_a_window_of_its_own() -> None:
    body = f"# Errors\n\n{_table(6)}\n\n{_filler('after', 150)}\n"
    chunks = chunk_markdown(body, size=200, overlap=40)
    assert chunks[-1].text == _filler("after", 150)


def test_a_padded_header_is_repeated_without_its_padding_and_a_wide_one_not_at_all() -> None:
    """A table aligned in its source pads every cell to its column's widest (DolphinScheduler's
    settings tables: 200 spaces a row): its header is repeated as its cells; a header wider
    than half a window is not repeated, and the rows under it still start on a row."""
    head = "| Setting" + " " * 60 + "| Default" + " " * 40 + "| Meaning" + " " * 40 + "|"
    rule = "|" + "-" * 67 + "|" + "-" * 47 + "|" + "-" * 47 + "|"
    rows = "\n".join(
        f"| key.{i:02}{' ' * 55}| {i}{' ' * 40}| {_filler(f'm{i}', 40)} |" for i in range(30)
    )
    chunks = chunk_markdown(f"# Settings\n\n{head}\n{rule}\n{rows}\n", size=800, overlap=100)
    header = "| Setting | Default | Meaning |\n|---|---|---|\n| key."
    assert all(c.text.startswith(header) for c in chunks[1:]), [c.text[:60] for c in chunks]

    wide = "| " + " | ".join(f"the setting's column number {n}" for n in range(6)) + " |"
    rule = "|" + "---|" * 6
    rows = "\n".join("| " + " | ".join(f"v{i}.{n}" for n in range(6)) + " |" for i in range(60))
    chunks = chunk_markdown(f"# Settings\n\n{wide}\n{rule}\n{rows}\n", size=300, overlap=50)
    assert chunks[1].text.startswith(wide), [c.text[:40] for c in chunks]  # the table's start
    assert all(c.text.startswith("| v") for c in chunks[2:]), [c.text[:40] for c in chunks]


def test_a_row_too_long_for_a_window_under_its_header_is_split_into_rows_of_its_columns() -> None:
    """RocketMQ's comparison with ActiveMQ and Kafka: 16 columns, rows of 500 characters
    under a header of 375. A window cut a row, and its tail began the next as cells of
    nothing ("storage|Supported timestamp…"), which the answer quoted. Such a row is now
    split into rows of the same columns, each keeping the row's first cell: every window
    begins on a row under the header, every cell is kept in its column."""
    names = [f"Feature {n}" for n in range(16)]
    products = ["ActiveMQ", "Kafka", "RocketMQ"]
    cells = {p: [p, *(f"{p} {_filler(f'f{n}', 30)}" for n in range(1, 16))] for p in products}
    head = "| " + " | ".join(names) + " |\n|" + "---|" * 16
    table = "\n".join([head, *("| " + " | ".join(cells[p]) + " |" for p in products)])
    body = f"# Why\n\n{_filler('intro', 300)}\n\n## Compared\n\n{table}\n"
    chunks = chunk_markdown(body, size=800, overlap=100)
    compared = [c.text for c in chunks if c.heading_path[-1] == "Compared"]
    assert len(compared) > 3 and all(len(c) <= 800 for c in compared)
    for text in compared[1:]:
        assert text.startswith(head), text[:80]
    rows = [line for text in compared for line in text.split("\n")[2:] if line.strip()]
    for product in products:
        held = [
            [cell.strip() for cell in row.strip().strip("|").split("|")]
            for row in rows
            if row.startswith(f"| {product} |")
        ]
        assert len(held) > 1 and all(len(piece) == 16 for piece in held)  # keyed, aligned
        for column, cell in enumerate(cells[product][1:], start=1):
            assert any(piece[column] == cell for piece in held), (product, column)

    # a row that fits under its header stays whole
    narrow = chunk_markdown(f"# Errors\n\n{_table(40, width=300)}\n", size=400, overlap=60)
    assert all(c.text.startswith("| Code | Meaning |") for c in narrow[1:])
    assert all(line.startswith("| 40") for c in narrow[1:] for line in c.text.split("\n")[2:])


def test_a_table_indented_in_a_list_item_is_a_table() -> None:
    table = "\n".join(f"    {line}" for line in _table(30).split("\n"))
    chunks = chunk_markdown(f"# Errors\n\n1. Look the code up:\n\n{table}\n", size=400, overlap=60)
    repeated = "    | Code | Meaning |\n    |---|---|\n    | 40"  # indented as its rows
    assert all(c.text.startswith(repeated) for c in chunks[1:]), [c.text for c in chunks]


def test_a_pipe_inside_a_code_block_or_prose_is_no_table() -> None:
    """Only a line with a ``|`` above a delimiter row starts a table: a shell pipeline,
    in a block or not, is cut as the text it is."""
    block = "```\n| a | b |\n|---|---|\n" + "\n".join(f"| {i} | x |" for i in range(40)) + "\n```"
    prose = " ".join(f"ps aux | grep worker-{i} | wc -l" for i in range(20))
    for body in (f"# Log\n\n{block}\n", f"# Log\n\n{prose}\n"):
        chunks = chunk_markdown(body, size=200, overlap=40)
        assert not any(c.text.startswith("| a | b |") for c in chunks[1:])


def test_a_window_begun_at_an_indented_line_keeps_its_indent() -> None:
    """TiDB's TiFlash runbook nests code blocks and items in numbered steps: a window
    begun there had its first line moved to the margin and the rest left indented, so the
    block's fence opened at the margin and its closing fence, four spaces in, closed nothing."""
    body = (
        "## Disk full\n\n1. Check the disk of every node first.\n\n    ```bash\n"
        "    tiup ctl pd config set low-space-ratio 0.9 --with-a-long-flag\n    ```\n\n"
        "    Then watch the Regions move.\n"
    )
    windows = [c.text for c in chunk_markdown(body, size=120, overlap=20)]
    assert windows[1].startswith("    ```bash\n    tiup ctl pd config set"), windows
    begun_in_a_line = chunk_markdown("## A\n\n" + "word " * 60, size=120, overlap=20)
    assert all(not c.text.startswith(" ") for c in begun_in_a_line)


@pytest.mark.parametrize(("size", "overlap"), [(200, 20), (500, 120), (1000, 0)])
def test_size_and_overlap_are_configurable(size: int, overlap: int) -> None:
    words = " ".join(f"w{i}" for i in range(1500))
    chunks = chunk_markdown(f"# T\n{words}", size=size, overlap=overlap)
    assert all(len(c.text) <= size for c in chunks)
    assert max(len(c.text) for c in chunks) > size * 0.8
    for before, after in itertools.pairwise(chunks):
        assert _overlap(before.text, after.text) <= overlap


def test_default_size_is_about_800() -> None:
    words = " ".join(f"token{i}" for i in range(1000))
    chunks = chunk_markdown(f"# T\n{words}")
    assert all(600 <= len(c.text) <= 800 for c in chunks[:-1])


@pytest.mark.parametrize(("size", "overlap"), [(100, 100), (100, 150)])
def test_overlap_not_smaller_than_size_is_rejected(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="overlap must be smaller than size"):
        chunk_markdown("# T\ntext", size=size, overlap=overlap)


def test_settings_reject_overlap_not_smaller_than_size() -> None:
    with pytest.raises(ValidationError, match="chunk-overlap must be smaller"):
        IngestSettings(chunk_size=200, chunk_overlap=200)
    settings = IngestSettings(**{"chunk-size": 300, "chunk-overlap": 30})
    assert (settings.chunk_size, settings.chunk_overlap) == (300, 30)
    assert (IngestSettings().chunk_size, IngestSettings().chunk_overlap) == (800, 100)


def test_empty_body_has_no_chunks() -> None:
    assert chunk_markdown("") == []
    assert chunk_markdown("\n\n  \n") == []


def test_a_page_break_line_cuts_a_section_and_every_later_chunk_names_its_page() -> None:
    body = (
        "# Manual\n"
        + _filler("intro", 300)
        + "\n\f2\n"
        + _filler("carried", 300)
        + "\n## Limits\n"
        + _filler("limits", 300)
        + "\n```\n\f9\n```\n"
    )
    chunks = chunk_markdown(body, size=320, overlap=20)

    assert list(dict.fromkeys(c.heading for c in chunks)) == [
        "Manual",
        "Manual > page 2",  # the section goes on over the page break
        "Manual > Limits > page 2",  # a heading after the break keeps the page
    ]
    assert not any("\f2" in c.text for c in chunks)  # the marker line is not text…
    assert "```\n\f9\n```" in chunks[-1].text  # …and inside a code block it is not a marker
    # covers are made from headings only, never from a page
    assert [s.heading_path for s in split_sections(body)][-1] == ("Manual", "Limits")
