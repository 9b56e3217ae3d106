"""The files of one data directory (SPEC §4): where each lives, computed, never touched here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


@dataclass(frozen=True)
class Paths:
    """Every file of one data directory (SPEC §4). Pure: building it touches nothing.

    Each path is built once per instance (a run asks for ``inbox`` and ``quarantine`` thousands
    of times in a big batch); ``cached_property`` stores it in the instance's ``__dict__``,
    which a frozen dataclass still has."""

    root: Path
    # The part of ``root`` the user chose — WATCHER_DATA_DIR or --data-dir as given, or the
    # platform's data directory the default sits in: links there are theirs to make. Every
    # directory below it is watcher's own and must be a real one, never a link that would carry
    # state out of the data dir (SPEC §15.5). ``None``: all of ``root`` is the user's.
    chosen: Path | None = None

    @cached_property
    def user_part(self) -> Path:
        """Where watcher's own directories begin (see :attr:`chosen`)."""
        return self.root if self.chosen is None else self.chosen

    @cached_property
    def inbox(self) -> Path:
        return self.root / "inbox"

    def inbox_file(self, comment_id: str) -> Path:
        return self._child(self._inbox_files, self.inbox, f"{comment_id}.json")

    @cached_property
    def _inbox_files(self) -> dict[str, Path]:
        return {}

    @staticmethod
    def _child(made: dict[str, Path], directory: Path, name: str) -> Path:
        """``directory / name``, built once per name: a model call asks for its comment's file six
        times, and a Path made anew parses its parts and formats its string again each time
        (bench/run.py figure 1)."""
        path = made.get(name)
        if path is None:
            path = made[name] = directory / name
        return path

    @cached_property
    def seen(self) -> Path:
        return self.root / "seen.json"

    @cached_property
    def provider_state(self) -> Path:
        return self.root / "provider.json"

    @cached_property
    def observations(self) -> Path:
        return self.root / "observations.jsonl"

    @cached_property
    def cron_state(self) -> Path:
        return self.root / "cron.json"

    @cached_property
    def tokens(self) -> Path:
        """The month's token tally (SPEC §16.4, watcher/state/tokens.py)."""
        return self.root / "tokens.json"

    @cached_property
    def signals_dir(self) -> Path:
        return self.root / "signals"

    @cached_property
    def signals_state(self) -> Path:
        return self.signals_dir / "state.json"

    @cached_property
    def signals_cursor(self) -> Path:
        return self.signals_dir / "cursor.json"

    @cached_property
    def locks(self) -> Path:
        return self.root / "locks"

    @cached_property
    def pipeline_lock_file(self) -> Path:
        return self.locks / "pipeline.lock"

    @cached_property
    def seen_lock_file(self) -> Path:
        return self.locks / "seen.lock"

    @cached_property
    def signals_lock_file(self) -> Path:
        return self.locks / "signals.lock"

    @cached_property
    def call_lock_dir(self) -> Path:
        return self.locks / "calls"

    def call_lock_file(self, comment_id: str) -> Path:
        """The comment's call lock (SPEC §15.1): held while its model call is in flight."""
        return self._child(self._call_lock_files, self.call_lock_dir, f"{comment_id}.lock")

    @cached_property
    def _call_lock_files(self) -> dict[str, Path]:
        return {}

    @cached_property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @cached_property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @cached_property
    def outbox(self) -> Path:
        """One file per notification message (SPEC §16.1)."""
        return self.root / "outbox"

    @cached_property
    def outbox_lock_file(self) -> Path:
        """Held to add a message or to deliver: two rounds never send one message at once."""
        return self.locks / "outbox.lock"

    @cached_property
    def round_lock_file(self) -> Path:
        """Held by a whole ``watch`` round: never two rounds at once (SPEC §16.2)."""
        return self.locks / "round.lock"

    # The names 0.2.0 gave these paths, for code written against it (the test suites of that
    # release among them); they read like locks, so watcher itself uses the *_file names above.
    @property
    def pipeline_lock(self) -> Path:
        return self.pipeline_lock_file

    @property
    def seen_lock(self) -> Path:
        return self.seen_lock_file

    @property
    def signals_lock(self) -> Path:
        return self.signals_lock_file

    @property
    def call_locks(self) -> Path:
        return self.call_lock_dir

    def call_lock(self, comment_id: str) -> Path:
        return self.call_lock_file(comment_id)
