"""``watcher watch`` as a real process (SPEC §16.2): a round at once with its notification, rounds
kept going, and SIGTERM / SIGINT between rounds ending it at once with 143 / 130."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _fakes.forem import FakeForem, serving_forem
from _fakes.provider import FakeProvider, running_fake, wait_for
from _proc import ENTRYPOINTS
from _receivers import HttpReceiver


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[dict[str, str], HttpReceiver, FakeProvider]]:
    forem = FakeForem()
    forem.now = datetime.now(UTC) - timedelta(hours=1)
    forem.comment(forem.publish("maya_writes"), "priyan", "TAG:c1 Does the cache work on Windows?")
    receiver = HttpReceiver().start()
    with running_fake() as provider, serving_forem(forem) as base_url:
        forem.site = base_url.removesuffix("/api")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WATCHER_", "DEVTO_"))}
        env.update(provider.env(), WATCHER_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1",
                   DEVTO_USERNAME="maya_writes", DEVTO_BASE_URL=base_url,
                   WATCHER_NOTIFY=f"json://127.0.0.1:{receiver.port}/hook")
        yield env, receiver, provider
    receiver.stop()


def test_once_runs_one_round_and_notifies(setup: tuple[dict[str, str], HttpReceiver, FakeProvider]) -> None:
    """``watch --once``: the round's comment on stdout and in one message; exit 0."""
    env, receiver, provider = setup
    done = subprocess.run([str(ENTRYPOINTS["cli"]), "watch", "--once"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "priyan" in done.stdout and provider.calls == ["c1"]
    (message,) = [r.json() for r in receiver.got]
    assert "TAG:c1 Does the cache work on Windows?" in message["message"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_between_rounds_ends_it(setup: tuple[dict[str, str], HttpReceiver, FakeProvider],
                                         signum: int, code: int) -> None:
    """After its first round's message, SIGTERM (SIGINT) ends watch with 143 (130), whether it
    is still finishing that round or already waiting for the next."""
    env, receiver, _provider = setup
    proc = subprocess.Popen([str(ENTRYPOINTS["cli"]), "watch", "--every", "1m"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(receiver.got) == 1, timeout=60)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err


def test_stderr_lines_carry_the_time(setup: tuple[dict[str, str], HttpReceiver, FakeProvider]) -> None:
    """A problem line of a round starts with the local date and time."""
    env, _receiver, _provider = setup
    env = {**env, "DEVTO_BASE_URL": "http://127.0.0.1:1/api"}  # dev.to unreachable: a problem line
    done = subprocess.run([str(ENTRYPOINTS["cli"]), "watch", "--once"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    lines = done.stderr.splitlines()
    assert lines and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line) for line in lines), lines
