"""Forem ``body_html`` to readable plain text, with the standard library only (SPEC §5).

Paragraphs and other blocks become lines separated by a blank line, ``<pre>`` blocks are kept
verbatim inside a ``` fence, inline ``<code>`` keeps backticks, links keep their text, entities
are unescaped (a control character's reference into that character, as a browser decodes it),
and no tag survives. Forem's code-block chrome (the copy / fullscreen panel and
its SVG icons) is dropped so the model sees the code, not "Enter fullscreen mode".
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "header",
        "footer",
        "aside",
        "main",
        "nav",
        "figure",
        "figcaption",
        "details",
        "summary",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "table",
        "thead",
        "tbody",
        "tr",
        "ul",
        "ol",
        "li",
        "dl",
        "dt",
        "dd",
        "blockquote",
        "hr",
    }
)
_DROPPED = frozenset({"script", "style", "svg", "template", "button", "noscript", "iframe"})
_DROPPED_CLASSES = ("highlight__panel",)
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
# A line break from <br> must survive whitespace collapsing, so it travels as a private-use char.
_BR = "\ue000"
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
# A numeric reference to a control character: html.unescape decodes "&#27;" to nothing, where a
# browser (the HTML standard) decodes it to ESC. Dropped, the comment would show less than it
# holds; kept, the renderer shows it as "\x1b" (SPEC §15.5: made visible after entities are
# decoded). The C1 range and NUL keep html's own mapping (cp1252 glyphs, U+FFFD).
_CONTROL_REF = re.compile(r"&#(?:[xX]0*([0-9a-fA-F]{1,6})|0*([0-9]{1,7}));?")
_KEPT_CONTROLS = frozenset([*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F])


def _control_ref(match: re.Match[str]) -> str:
    code = int(match.group(1), 16) if match.group(1) is not None else int(match.group(2))
    return chr(code) if code in _KEPT_CONTROLS else match.group(0)


class _TextBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[
            tuple[str, bool]
        ] = []  # (text, joins the previous block with one newline)
        self._after_item = False  # the last block was a list item of a list still open
        self._line: list[str] = []
        self._pre: list[str] | None = None
        self._pre_depth = 0
        self._drop_depth = 0
        self._quote_depth = 0
        self._lists: list[int | None] = []  # None for <ul>, next number for <ol>
        self._item_prefix: str | None = None

    # --- parser callbacks -------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._drop_depth:
            self._drop_depth += tag not in _VOID
            return
        classes = dict(attrs).get("class") or ""
        if tag in _DROPPED or any(name in classes for name in _DROPPED_CLASSES):
            self._drop_depth = 0 if tag in _VOID else 1
            return
        if self._pre is not None:
            self._pre_depth += tag == "pre"
            return
        self._open(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._drop_depth:
            self._drop_depth -= 1
            return
        if self._pre is not None:
            if tag == "pre":
                if self._pre_depth:
                    self._pre_depth -= 1
                else:
                    self._close_pre()
            return
        self._close(tag)

    def handle_data(self, data: str) -> None:
        if self._drop_depth:
            return
        if self._pre is not None:
            self._pre.append(data)
        else:
            self._line.append(data)

    # --- structure ----------------------------------------------------------------------
    def _open(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self._flush()
            self._pre = []
        elif tag == "br":
            self._line.append(_BR)
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self._line.append(f" [image: {alt}] ")
        elif tag == "code":
            self._line.append("`")
        elif tag in ("td", "th"):
            self._line.append(" | " if "".join(self._line).strip() else "")
        elif tag in _BLOCKS:
            self._flush()
            self._open_block(tag)

    def _open_block(self, tag: str) -> None:
        if tag == "blockquote":
            self._quote_depth += 1
        elif tag == "ul":
            self._lists.append(None)
        elif tag == "ol":
            self._lists.append(1)
        elif tag == "li":
            number = self._lists[-1] if self._lists else None
            if number is None:
                self._item_prefix = "- "
            else:
                self._item_prefix = f"{number}. "
                self._lists[-1] = number + 1

    def _close(self, tag: str) -> None:
        if tag == "code":
            self._line.append("`")
        elif tag in _BLOCKS:
            self._flush()
            if tag == "blockquote" and self._quote_depth:
                self._quote_depth -= 1
            elif tag in ("ul", "ol") and self._lists:
                self._lists.pop()
                self._after_item = False  # two lists in a row are two blocks, not one

    def _close_pre(self) -> None:
        code = "".join(self._pre or []).strip("\n")
        self._pre = None
        if code.strip():
            self._add("```\n" + code + "\n```", is_item=False)

    def _flush(self) -> None:
        text = _SPACES.sub(" ", "".join(self._line))
        self._line = []
        lines = [part.strip() for part in text.split(_BR)]
        text = "\n".join(lines).strip("\n ")
        if not text:
            return
        is_item = self._item_prefix is not None
        if is_item:
            text = (self._item_prefix or "") + text
            self._item_prefix = None
        self._add(text, is_item=is_item)

    def _add(self, text: str, *, is_item: bool) -> None:
        if self._quote_depth:
            text = "\n".join(
                ("> " * self._quote_depth + line).rstrip() for line in text.split("\n")
            )
        self.blocks.append((text, is_item and self._after_item))
        self._after_item = is_item

    def finish(self) -> str:
        self.close()
        if self._pre is not None:  # an unclosed <pre> still shows its code
            self._close_pre()
        self._flush()
        out: list[str] = []
        for text, tight in self.blocks:
            if out:
                out.append("\n" if tight else "\n\n")
            out.append(text)
        return "".join(out).strip()


def html_to_text(body_html: str) -> str:
    """Readable plain text of a Forem comment's ``body_html``. Never raises on odd markup."""
    builder = _TextBuilder()
    builder.feed(_CONTROL_REF.sub(_control_ref, body_html))
    return builder.finish()
