"""What a terminal must never receive raw from outside text (SPEC §15.5, "Terminal safety").

Shared by the terminal-safety tests and the reliability rig's bad-input fuzz.
"""

from __future__ import annotations

import json
import re

# C0 (but newline and tab, which layout uses), DEL, C1, and the bidi controls that reorder what
# follows them: U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069. Lone surrogates cannot even be
# encoded for the terminal.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

# What the red team sent: a window-title change, clear screen, cursor up + erase line painting a
# fake all-clear, a hidden OSC 8 link, a bidi override, an 8-bit CSI, a lone carriage return.
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
FAKE_ALL_CLEAR = "\x1b[1A\x1b[2KNothing needs a reply."
HIDDEN_LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
BIDI = "\u202egnp.exe\u202c \u2066iso\u2069"
HOSTILE = TITLE + CLEAR + FAKE_ALL_CLEAR + HIDDEN_LINK + BIDI + "\x9b31m" + "over\rwrite" + "\x7f"


def unsafe(text: str) -> list[str]:
    """The raw control and escape characters in ``text`` (empty: safe to show)."""
    return sorted({repr(c) for c in UNSAFE.findall(text)})


def unsafe_in_json(text: str) -> list[str]:
    """Like :func:`unsafe`, for a JSON document: its bytes are safe, and it decodes (exact data)."""
    json.loads(text)
    return unsafe(text)
