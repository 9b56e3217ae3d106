"""Human output fits the terminal (SPEC §16.4): the width every view prints at, and the one
wrapping every printed line goes through — at word boundaries, with a hanging indent, a URL never
broken (a broken URL cannot be clicked or pasted), nor a path or a command in backquotes.

:func:`width` imports nothing of rich (the notices of ``--json`` runs use it); :func:`lines`
does the wrapping with rich's own line breaking (``Text.wrap``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

FALLBACK = 80
# A terminal that reports 0 columns (a pty with no size, as some CI runners and editors give) or an
# absurd width gets the width of a pipe: wrapping at 0 or at 50,000 columns helps nobody.
NARROWEST, WIDEST = 20, 1000
_URL = re.compile(r"https?://\S+")
# A path, for the same reason (`rm -rf /tmp/x` with the path broken removes something else).
_PATH = re.compile(r"[~.]?/[^\s/]+/\S+")
# A command to type (`watcher show 3bkf`) is kept on one line, as a URL is: while wrapping, its
# spaces are a private-use character rich does not break at.
_COMMAND = re.compile(r"`[^`\n]{1,40}`")
_BOUND = "\ue000"


def width(stream: TextIO) -> int:
    """The width output on ``stream`` wraps at: ``COLUMNS`` when it is set, else the terminal's,
    else 80 (a pipe, cron's mail)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and NARROWEST <= int(columns) <= WIDEST:
        return int(columns)
    try:
        real = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (OSError, ValueError):
        real = 0
    return real if NARROWEST <= real <= WIDEST else FALLBACK


def hanging(text: str, at: int) -> Text:
    """``text`` printed with its continuations at column ``at`` (a column of details, as in
    ``watcher check``), not the usual 4."""
    from rich.text import Text

    class _Hanging(Text):
        hang = at

    return _Hanging(text)


def lines(console: Console, text: Text, room: int) -> list[Text]:
    """``text`` as lines of at most ``room`` cells (a URL longer than that stays whole on a line of
    its own). A single line's continuations hang under it (4 columns in from a line at column 0, 2
    from an indented one); a text of several lines (a comment as written) keeps each line's own
    indent."""
    chosen: int | None = getattr(text, "hang", None)
    text = text.copy()
    text.plain = _COMMAND.sub(lambda m: m.group().replace(" ", _BOUND), text.plain)
    parts = text.split("\n", allow_blank=True)
    out: list[Text] = []
    for part in parts:
        indent = len(part.plain) - len(part.plain.lstrip(" "))
        hang = indent if len(parts) > 1 else _hang(part.plain, indent)
        hang = hang if chosen is None else chosen
        out.extend(_hanging(console, part, room, min(hang, room // 2)))
    for line in out:
        line.rstrip()
        line.plain = line.plain.replace(_BOUND, " ")
    return out


# "label:   value" (status): its continuations line up under the value.
_LABELLED = re.compile(r"[a-z][a-z ]{0,14}:\s{2,}(?=\S)")


def _hang(line: str, indent: int) -> int:
    labelled = _LABELLED.match(line)
    if labelled:
        return labelled.end()
    return indent + (4 if indent == 0 else 2)


def _hanging(console: Console, line: Text, room: int, hang: int) -> list[Text]:
    from rich.text import Text

    if line.cell_len <= room:
        return [line]
    first = _fit(console, line, room)[0]
    rest = line[len(first.plain) :]
    rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]
    first.rstrip()
    if not rest.plain:
        return [first]
    pad = Text(" " * hang)
    return [first, *(pad + body for body in _fit(console, rest, room - hang))]


def _fit(console: Console, text: Text, room: int) -> list[Text]:
    """Lines of at most ``room`` cells: rich breaks at spaces (``divide_line`` without folding,
    which puts a word longer than the room on a line of its own; ``Text.wrap`` would crop it), and
    such a word is folded unless it is a URL or a path."""
    from rich._wrap import divide_line

    out: list[Text] = []
    for line in text.divide(divide_line(text.plain, room, fold=False)):
        line.rstrip()
        if line.cell_len <= room or _is_whole(line.plain):
            out.append(line)
        else:
            out.extend(line.wrap(console, room, overflow="fold"))
    return out or [text]


def _is_whole(word: str) -> bool:
    """Whether an over-long word is a URL or a path (with at most a bracket or quote or two around
    it), never broken."""
    found = _URL.search(word) or _PATH.search(word)
    return found is not None and len(word.strip()) - len(found.group()) <= 4
