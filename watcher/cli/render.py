"""Human output: the consoles every view prints on, a progress bar on stderr during a batch, and
the dispatch to each command's view (the registry names it).

Imported only by the human front end, so ``--json`` runs and the bridge never load rich.
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.text import Text

from watcher.cli import wrap
from watcher.commands import registry
from watcher.commands.envelope import EnvelopeError
from watcher.commands.results import ItemResult
from watcher.util.timeutil import local_minutes
from watcher.util.visible import visible


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the front end ends quietly with the command's own exit code.
        raise BrokenPipeError

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Every string rich draws passes here (print, table cells and their measuring, titles):
        # the render boundary of SPEC §15.5. Control and bidi characters from a comment, a name,
        # a title or a model's answer are shown as escapes (watcher.util.visible), so none reaches
        # the terminal raw. Fields shown on one line are also passed through _line first.
        # Stored times are shown local, to the minute (JSON keeps UTC). A comment's own text is
        # printed as a Text (_as_written), so a date inside it is never rewritten.
        return super().render_str(visible(local_minutes(text)), **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        # The one wrapping of every view's lines (SPEC §16.4, watcher.cli.wrap): a string or a
        # Text is cut into lines that fit the width, with a hanging indent and URLs whole. A table
        # lays itself out at the width; soft_wrap=True asks for the line exactly as given.
        if kwargs.get("soft_wrap") or len(objects) != 1 or not isinstance(objects[0], str | Text):
            super().print(*objects, **kwargs)
            return
        kwargs.pop("soft_wrap", None)  # soft_wrap=False: wrapped here, each line printed as cut
        text = objects[0] if isinstance(objects[0], Text) else self.render_str(objects[0])
        for line in wrap.lines(self, text, self.width):
            super().print(line, soft_wrap=True, **kwargs)


def _consoles() -> tuple[_Console, _Console]:
    """stdout's and stderr's consoles, at the width each wraps at (watcher.cli.wrap.width)."""
    # markup=False: comment text and model output are untrusted and may contain "[...]". Colour
    # follows rich's rules (a terminal, NO_COLOR honoured).
    out = _Console(highlight=False, markup=False, width=wrap.width(sys.stdout))
    err = _Console(stderr=True, highlight=False, markup=False, width=wrap.width(sys.stderr))
    return out, err


_err = _Console(stderr=True, highlight=False, markup=False)  # the progress display's


class BatchProgress:
    """A transient rich progress bar on stderr: which comments are with the model (up to
    ``--parallel`` at once, SPEC §15.1) and for how long (one call may take a minute); with
    --verbose, one line per item as well."""

    def __init__(self, *, verbose: bool) -> None:
        self.verbose = verbose
        self._progress: Any = None
        self._task: Any = None
        self._out: list[str] = []  # the comments whose call is out, oldest first
        self._fetching: Any = None

    def fetching(self, what: str) -> None:
        """A line while dev.to is fetched (tens of seconds on a big account: requests are paced)."""
        if _err.is_terminal:
            self._fetching = _err.status(what)
            self._fetching.start()

    def _fetched(self) -> None:
        if self._fetching is not None:
            self._fetching.stop()
            self._fetching = None

    def start(self, total: int) -> None:
        self._fetched()
        if not _err.is_terminal:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_err,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("checking comments", total=max(total, 1))

    def calling(self, comment_id: str) -> None:
        self._out.append(comment_id)
        self._describe()
        if self.verbose:
            _err.print(f"{comment_id}: calling the model")

    def advance(self, item: ItemResult) -> None:
        if (
            item.id in self._out
        ):  # one of this run's calls came back (or was cut): it counts as done
            self._out.remove(item.id)
            self._describe()
            if self._progress is not None:
                self._progress.advance(self._task)
        if self.verbose:
            _err.print(f"{item.id}: {item.outcome}" + (f" ({item.kind})" if item.kind else ""))

    def _describe(self) -> None:
        if self._progress is None:
            return
        out = self._out
        if not out:
            text = "checking comments"
        elif len(out) == 1:
            text = f"asking the model about {out[0]}"
        else:
            text = f"{len(out)} calls out: {', '.join(out[:3])}{' …' if len(out) > 3 else ''}"
        self._progress.update(self._task, description=text)

    def stop(self) -> None:
        self._fetched()
        if self._progress is not None:
            self._progress.stop()


@dataclass(frozen=True)
class _Screen:
    """The :class:`watcher.commands.screen.Screen` every view gets."""

    out: Console
    err: Console
    error: EnvelopeError | None


def human(
    command: str, result: BaseModel, error: EnvelopeError | None = None, *, pager: bool = True
) -> None:
    """Print ``command``'s result for a person, with the view its registry entry names; on a
    terminal, output longer than the screen goes through the pager (SPEC §16.4)."""
    module, _, name = registry.command(command).view.partition(":")
    view: Callable[[Any, _Screen], None] = getattr(importlib.import_module(module), name)
    out, err = _consoles()
    if not (pager and out.is_terminal):
        view(result, _Screen(out, err, error))
        return
    with out.capture() as drawn:
        view(result, _Screen(out, err, error))
    page(drawn.get(), out.height)


def page(text: str, height: int) -> None:
    """``text`` on stdout, through ``PAGER`` (``less -FRX``: it quits when the text fits, keeps
    the colours and leaves the text on the screen) when it is longer than the screen."""
    command = shlex.split(os.environ.get("PAGER", "less -FRX"))
    if text.count("\n") < height or not command or command == ["cat"]:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    try:
        subprocess.run(command, input=text.encode(), check=False)
    except OSError:  # no such pager: the text itself
        sys.stdout.write(text)


def says_its_own_errors(command: str) -> bool:
    """Whether a command's view prints its errors itself (cron says each problem once, its way)."""
    return command in _NAMES and registry.command(command).own_errors


_NAMES = frozenset(registry.RESULTS)
