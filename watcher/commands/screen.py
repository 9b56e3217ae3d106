"""What a command's human view prints on: the :class:`Screen` the CLI hands it.

A view is ``view(result, screen)``: it prints ``result`` for a person with ``screen.out`` and
``screen.err``, rich consoles that pass every string through :func:`watcher.util.visible.visible`
(SPEC §15.5), and imports whatever else of rich it draws (a ``Table``) inside itself, so that
``--json``, the bridge and start-up never load rich. The CLI builds the screen
(``watcher/cli/render.py``); nothing here imports rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from watcher.util.visible import visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from watcher.commands.envelope import EnvelopeError


class Screen(Protocol):
    @property
    def out(self) -> Console:
        """stdout: the result itself."""

    @property
    def err(self) -> Console:
        """stderr: problems and progress."""

    @property
    def error(self) -> EnvelopeError | None:
        """The command's error, for a view that shows it beside the result (a stopped batch)."""


def one_line(text: str | None) -> str:
    """An outside string shown on one line (a name, a title, a summary in a list or a table cell):
    a newline in it would print a line of its own, so it is shown as ``\\n`` (SPEC §15.5)."""
    return visible(text or "", one_line=True)


def as_written(text: str) -> Text:
    """An outside text printed as it is (its escapes made visible, nothing else changed)."""
    from rich.text import Text

    return Text(visible(text))
