"""A dev.to account whose news goes to two real targets on loopback (SPEC §16.1), for the rig's
delivery cases (test_rel_notify_crash.py, test_rel_notify_power_loss.py).

The first target (an HTTP receiver of tests/_receivers.py) answers 500 until
:meth:`Account.recover`; the second always accepts. Both are ``json://`` targets of
``WATCHER_NOTIFY``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from _fakes.clock import FakeClock
from _fakes.forem import FakeForem, ForemSource, serving_forem
from _fakes.provider import FakeProvider, in_process, running_fake
from _proc import Answer, run_main
from _receivers import HttpReceiver
from _rel_harness import RunPidStore

from watcher.notify.targets import parse_targets
from watcher.pipeline import Hooks
from watcher.source import resolve_source
from watcher.util.timeutil import utcnow

AUTHOR = "maya"


@dataclass
class Account:
    """A dev.to with one article, the model, and the two targets."""

    forem: FakeForem
    base_url: str
    fake: FakeProvider
    failing: HttpReceiver  # answers 500 until :meth:`recover`
    good: HttpReceiver
    article: int = 0
    refused: int = 0  # the requests ``failing`` answered 500 (the first ones)
    ids: dict[str, str] = field(default_factory=dict)  # TAG label -> comment id

    @property
    def urls(self) -> str:
        return (
            f"json://127.0.0.1:{self.failing.port}/first json://127.0.0.1:{self.good.port}/second"
        )

    def env(self) -> dict[str, str]:
        return {
            **self.fake.env(),
            "DEVTO_USERNAME": AUTHOR,
            "DEVTO_BASE_URL": self.base_url,
            "WATCHER_NOTIFY": self.urls,
        }

    def say(self, label: str, text: str) -> str:
        self.ids[label] = self.forem.comment(self.article, f"reader{label}", f"TAG:{label} {text}")
        return self.ids[label]

    def first_comments(self) -> set[str]:
        """Two questions and a thanks (the model reads it as one); the ids of the questions."""
        self.fake.script("t1", "no-reply")
        self.say("t1", "Thanks, great post!")
        return {
            self.say("q1", "How do I configure this?"),
            self.say("q2", "Does it run on Windows?"),
        }

    def calls(self) -> list[str]:
        """The model's call log by comment id (the fake logs each call by its TAG label)."""
        return [self.ids.get(label, label) for label in self.fake.calls]

    def recover(self) -> None:
        with self.failing.lock:
            self.failing.status = 200
            self.refused = len(self.failing.got)

    def received(self) -> dict[str, list[str]]:
        """Per target (its ``Target.id``, as the outbox names it), the bodies it accepted."""
        first, second = parse_targets(self.urls)
        return {first.id: _bodies(self.failing, self.refused), second.id: _bodies(self.good, 0)}

    def requests(self) -> int:
        return len(self.failing.got) + len(self.good.got)


def _bodies(receiver: HttpReceiver, start: int) -> list[str]:
    with receiver.lock:
        return [r.json()["message"] for r in receiver.got[start:]]


@contextmanager
def account() -> Iterator[Account]:
    forem = FakeForem(now=utcnow() - timedelta(hours=3))
    failing, good = HttpReceiver(status=500).start(), HttpReceiver().start()
    try:
        with running_fake() as fake, serving_forem(forem) as base_url:
            forem.site = base_url.removesuffix("/api")
            yield Account(
                forem, base_url, fake, failing, good, forem.publish(AUTHOR, "Configuring things")
            )
    finally:
        failing.stop()
        good.stop()


def in_process_run(acc: Account, data: Path, *args: str) -> Answer:
    """A command in this process: the same code, the fakes reached without a socket to the model
    and without the source's pacing."""
    source = ForemSource(FakeClock())
    hooks = Hooks(
        make_store=RunPidStore,
        make_provider=in_process(acc.fake),
        make_source=lambda name: source if name == "devto" else resolve_source(name),
    )
    return run_main("cli", *args, "--json", data_dir=data, env=acc.env(), hooks=hooks)
