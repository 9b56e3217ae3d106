"""Outside text made safe to show on a terminal (SPEC §15.5, "Terminal safety").

    visible(text) -> str               for a person: each control or reordering character as
                                       its escape (ESC -> ``\\x1b``, RLO -> ``\\u202e``)
    visible(text, one_line=True)       the same, newline and tab escaped too (a table cell,
                                       a name, a one-line summary)
    json_safe(json_text) -> str        a JSON document with the characters JSON leaves raw
                                       spelled as ``\\uXXXX``: it decodes to the same data

A comment's text, its author's name, the article title and the model's answer are written by
others. A terminal obeys what they contain: ESC sequences change the window title, clear the
screen, move the cursor up and erase a line (painting a fake "Nothing needs a reply"), or hide
a link (OSC 8); C1 controls (``\\x9b`` is an 8-bit CSI) do the same on terminals that read them;
bidi overrides reorder what follows them. rich's ``markup=False`` passes all of it through, and
the HTML conversion decodes ``&#27;`` into a real ESC, so the one place to stop it is where text
leaves for a terminal: the human renderer (:mod:`watcher.cli.render`, for every string rich draws),
the front ends' notices on stderr, and the MCP server's text (:mod:`bridge.mcp_server`).

The characters are shown, not dropped: a person sees that the comment holds an escape sequence
(and which), and nothing that could hide text is itself hidden. One notation for all of them,
Python's (``\\x1b``, ``\\u202e``, ``\\U000e0041``): control pictures (␛) exist for C0 only, and
an escape names the exact code point. The escapes are plain ASCII, so showing a text twice
changes nothing more. A CRLF line ending is a newline; a lone carriage return (which would
overwrite its line) is shown as ``\\r``.

The stored data is never changed: inbox files and JSON output keep the exact text (JSON
escaping carries every character; :func:`json_safe` only spells more of them as escapes).
"""

from __future__ import annotations

import re

# C0 but tab and newline (layout) and DEL, C1, lone surrogates (unprintable, and an encoding
# error on output), and the invisible format characters that reorder or hide text: the bidi
# marks, embeddings, overrides and isolates (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069),
# zero-width space and the invisible operators (U+200B, U+2060–U+2064), the deprecated format
# controls (U+206A–U+206F), line and paragraph separators (U+2028/9), the BOM (U+FEFF), the
# interlinear annotation controls (U+FFF9–U+FFFB) and the tag characters (U+E0000–U+E007F, which
# spell invisible ASCII). ZWJ and ZWNJ (U+200C/D) stay: emoji sequences and scripts need them.
_FORMAT = (
    "\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0000-\U000e007f"
)
_HIDDEN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]")
_HIDDEN_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]")
# What json.dumps(ensure_ascii=False) writes raw although a terminal acts on it: it already
# escapes C0 (and '"' and '\\'); the rest of the set above it leaves as it is.
_RAW_IN_JSON = re.compile(f"[\x7f-\x9f\ud800-\udfff{_FORMAT}]")


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control, bidi and hidden format character shown as its escape.

    Newline and tab are kept unless ``one_line`` (where a newline would start a line of its own
    in a table or a list: an author name must not print a second, fake line)."""
    if not one_line:
        text = text.replace("\r\n", "\n")
    pattern = _HIDDEN_ONE_LINE if one_line else _HIDDEN
    return pattern.sub(_escape, text)


def json_safe(json_text: str) -> str:
    """A JSON document (as ``json.dumps(..., ensure_ascii=False)`` writes it) with DEL, C1, lone
    surrogates and the hidden format characters as ``\\uXXXX`` escapes.

    Outside its strings JSON text is ASCII, so every such character is inside a string, where
    the escape is the same character: the document decodes to exactly the same data."""
    return _RAW_IN_JSON.sub(_json_escape, json_text)


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)  # JSON spells an astral character as a surrogate pair
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"
