"""One dev.to account and one model, fakes both, for whole scans in this process (SPEC §15.2).

``World`` holds a :class:`FakeForem` served on 127.0.0.1 and the provider fake (in process); its
``watcher(...)`` runs a command as the user types it (``_proc.run_main``), its scans reading the
loopback Forem through the real devto source. Comment texts carry ``TAG:<label>`` so the provider's
call log says which text each call judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from _fakes.clock import FakeClock
from _fakes.forem import FakeForem, ForemSource, serving_forem
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import Answer, run_main

from watcher.source import resolve_source
from watcher.util.timeutil import utcnow

AUTHOR = "maya"


@dataclass
class World:
    data_dir: Path
    forem: FakeForem
    base_url: str
    provider: FakeProvider = field(default_factory=FakeProvider)
    clock: FakeClock = field(default_factory=FakeClock)
    article: int = 0

    def env(self) -> dict[str, str]:
        return {**IN_PROCESS_ENV, "DEVTO_USERNAME": AUTHOR, "DEVTO_BASE_URL": self.base_url}

    def watcher(self, *args: str, entry: str = "cli", **hooks: Any) -> Answer:
        source = ForemSource(self.clock)
        return run_main(entry, *args, data_dir=self.data_dir, env=self.env(),
                        hooks=in_process_hooks(self.provider, make_source=lambda name: source if name == "devto"
                                               else resolve_source(name), **hooks))

    def json(self, *args: str, entry: str = "cli") -> dict[str, Any]:
        done = self.watcher(*args, "--json", entry=entry)
        assert done.envelope is not None, done.stderr
        return done.envelope

    def say(self, label: str, text: str = "How do I configure this?", *, parent: str | None = None,
            user: str = "reader") -> str:
        """A comment on the article (a reply with ``parent``); returns its id."""
        return self.forem.comment(self.article, user, f"TAG:{label} {text}", parent=parent)

    def reply(self, parent: str, text: str = "Thanks, fixed!") -> str:
        """The author's own reply on dev.to."""
        return self.forem.comment(self.article, AUTHOR, text, parent=parent)

    def inbox(self) -> set[str]:
        return {c["id"] for c in self.json("inbox")["result"]["comments"]}

    def record(self, cid: str) -> dict[str, Any]:
        import json

        return json.loads((self.data_dir / "inbox" / f"{cid}.json").read_text(encoding="utf-8"))


@contextmanager
def world(tmp_path: Path) -> Iterator[World]:
    """An account with one article; dev.to's clock starts an hour ago (inside the backlog window)."""
    forem = FakeForem(now=utcnow() - timedelta(hours=3))
    with serving_forem(forem) as base_url:
        forem.site = base_url.removesuffix("/api")
        w = World(tmp_path / "data", forem, base_url)
        w.article = forem.publish(AUTHOR, "Configuring things")
        yield w
