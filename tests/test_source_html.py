"""body_html to plain text with the standard library (SPEC §5)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from watcher.source import html_to_text

FOREM_CODE_BLOCK = (
    '<div class="highlight js-code-highlight">\n<pre class="highlight python"><code>'
    '<span class="k">def</span> <span class="nf">f</span><span class="p">():</span>\n'
    "    <span class=\"k\">return</span> <span class=\"mi\">1</span> &lt; 2\n</code></pre>\n"
    '<div class="highlight__panel js-actions-panel"><div class="highlight__panel-action">'
    "<svg><title>Enter fullscreen mode</title><path d=\"M0\"></path></svg>"
    "<svg><title>Exit fullscreen mode</title><path d=\"M1\"/></svg></div></div>\n</div>\n"
)


def test_paragraphs_are_separated_by_a_blank_line() -> None:
    """Each <p> becomes its own block, one blank line apart, inner whitespace collapsed."""
    assert html_to_text("<p>First   one\nwraps.</p>\n\n<p>Second.</p>") == "First one wraps.\n\nSecond."


def test_entities_are_unescaped() -> None:
    """&amp;, &lt;, numeric references and friends come out as characters."""
    assert html_to_text("<p>a &amp; b &lt;c&gt; &#39;d&#39; &quot;e&quot; &#x1F44F;</p>") == "a & b <c> 'd' \"e\" 👏"


def test_a_control_character_reference_decodes_to_that_character_not_to_nothing() -> None:
    """&#27; is the ESC a browser would decode, kept so that it is shown (SPEC §15.5), not dropped
    as html.unescape drops it; the text keeps exactly what was sent, the renderer makes it visible."""
    assert html_to_text("<p>a&#27;[2Jb&#x1B;]0;t&#7; &#127;x &#0;</p>") == "a\x1b[2Jb\x1b]0;t\x07 \x7fx \ufffd"
    assert html_to_text("<pre>&#27;[1A</pre>") == "```\n\x1b[1A\n```"
    assert html_to_text("<p>&amp;#27; &#155; &#x202e;</p>") == "&#27; \u203a \u202e"  # as before


def test_link_text_is_kept_and_the_markup_dropped() -> None:
    """A link keeps its visible text; no tag or href leaks into the text."""
    text = html_to_text('<p>See <a href="https://example.com/x" rel="noopener">the docs</a> now.</p>')
    assert text == "See the docs now."


def test_forem_code_block_is_kept_verbatim_without_its_button_panel() -> None:
    """A highlighted <pre> keeps its lines and indentation in a fence; the fullscreen panel is gone."""
    text = html_to_text("<p>Try:</p>\n" + FOREM_CODE_BLOCK + "<p>Done.</p>")
    assert text == "Try:\n\n```\ndef f():\n    return 1 < 2\n```\n\nDone."
    assert "fullscreen" not in text


def test_inline_code_keeps_backticks() -> None:
    """Inline <code> is marked with backticks so identifiers stay recognisable."""
    assert html_to_text("<p>Call <code>session.commit()</code> once.</p>") == "Call `session.commit()` once."


def test_br_becomes_a_line_break() -> None:
    """<br> splits lines inside a paragraph."""
    assert html_to_text("<p>one<br>two<br/>three</p>") == "one\ntwo\nthree"


def test_lists_become_one_item_per_line() -> None:
    """Unordered items get dashes, ordered items numbers, and items sit on consecutive lines."""
    html = "<ul><li>alpha</li><li>beta</li></ul><ol><li>first</li><li><p>second</p></li></ol>"
    assert html_to_text(html) == "- alpha\n- beta\n\n1. first\n2. second"


def test_blockquote_lines_are_prefixed() -> None:
    """Quoted text is marked with '> ' so a reply's quote is not mistaken for its own words."""
    assert html_to_text("<blockquote><p>you said this</p></blockquote><p>and I reply</p>") == (
        "> you said this\n\nand I reply"
    )


def test_script_and_style_contents_are_dropped() -> None:
    """Non-visible elements contribute no text."""
    assert html_to_text("<p>hi</p><script>alert(1)</script><style>p{}</style>") == "hi"


def test_deleted_marker_survives_as_text() -> None:
    """Forem's deleted marker is recognisable after conversion (the parser relies on it)."""
    assert html_to_text("<p>[deleted]</p>\n") == "[deleted]"


def test_unclosed_pre_still_shows_its_code() -> None:
    """Truncated markup never loses the code it did contain."""
    assert html_to_text("<pre><code>x = 1") == "```\nx = 1\n```"


_TAGS = st.sampled_from(["p", "div", "pre", "code", "a", "ul", "li", "blockquote", "svg", "em", "br", "span"])
_WORDS = st.text(alphabet=st.characters(blacklist_characters="<>&", blacklist_categories=("Cs",)), max_size=12)


@st.composite
def _markup(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 12))):
        tag = draw(_TAGS)
        kind = draw(st.sampled_from(["open", "close", "text"]))
        parts.append({"open": f"<{tag}>", "close": f"</{tag}>", "text": draw(_WORDS)}[kind])
    return "".join(parts)


@given(_markup())
def test_any_tag_soup_converts_without_raising_or_leaking_tags(html: str) -> None:
    """Arbitrary, unbalanced markup never raises and never leaves a tag in the text."""
    text = html_to_text(html)
    assert "<" not in text and ">" not in text.replace("> ", "")
