"""SPEC §15.3: `watcher cron` speaks only when there is news or trouble.

Cron mails whatever a command prints. So a round with nothing new and nothing wrong prints
nothing; a new comment needing a reply is listed once; a problem is one stderr line with its fix,
when it starts or changes, and at most once a day while it lasts; every step runs, and the exit
code says a step stopped even when its line was said already.

The many-round logic runs in process (``run_main``, the clock moved by ``Hooks.clock``, the source
an export named "devto" so a first scan's backlog rule applies); two rounds run as real processes
under ``env -i`` with the README's cron line, because what cron's bare environment does to the
process is the point there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process, running_fake
from _proc import ENTRYPOINTS, run_main

from watcher.config import Settings
from watcher.errors import SourceUnavailable
from watcher.models import SeenFile
from watcher.pipeline import Hooks
from watcher.providers import make_provider
from watcher.source import FetchResult, Source, read_export, resolve_source

ROUND = timedelta(minutes=30)
# A night of half-hourly rounds is 16; the quick lane runs 6 of them (each is a whole scan, recheck
# and listing in process), the long lane (WATCHER_RELIABILITY=long) the whole night.
NIGHT = 16 if os.environ.get("WATCHER_RELIABILITY") == "long" else 6


def _comment(label: str, minutes_ago: float) -> dict[str, Any]:
    created = (datetime.now(UTC) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type_of": "comment", "id_code": label, "created_at": created,
            "body_html": f"<p>TAG:{label} How do I configure the cache, and does it work on Windows?</p>",
            "user": {"name": f"Reader {label}", "username": f"reader_{label}"}, "children": []}


@dataclass
class Account:
    """dev.to as the pipeline sees it (a source named "devto"): the comments of ``labels``, each a
    few minutes old; ``down`` makes the fetch fail as a dev.to outage does."""

    path: Path
    labels: list[str] = field(default_factory=list)
    down: bool = False
    name: str = "devto"

    def write(self) -> None:
        comments = [_comment(label, 30 - i) for i, label in enumerate(self.labels)]
        doc = {"username": "maya_writes", "articles": [{
            "id": 1201, "title": "Caching in Python", "url": "https://dev.to/maya_writes/caching-in-python",
            "comments_count": len(comments), "comments": comments}]}
        self.path.write_text(json.dumps(doc))

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        if self.down:
            raise SourceUnavailable("dev.to is unavailable (HTTP 503 for GET /articles); try again later")
        return read_export(self.path, settings)


@dataclass
class World:
    """One data dir, a dev.to account, a model provider that can go down, and a clock cron reads."""

    data_dir: Path
    account: Account
    fake: FakeProvider
    provider_down: bool = False
    shift: timedelta = timedelta(0)

    def hooks(self) -> Hooks:
        def provider(settings: Settings) -> Any:
            if self.provider_down:
                def refuse(request: httpx.Request) -> httpx.Response:
                    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
                return make_provider(settings, transport=httpx.MockTransport(refuse))
            return in_process(self.fake)(settings)

        def source(name: str) -> Source:
            return self.account if name == "devto" else resolve_source(name)

        shift = self.shift
        return Hooks(make_provider=provider, make_source=source,
                     clock=lambda: datetime.now(UTC) + shift)

    def round(self, *args: str, env: dict[str, str] | None = None) -> Any:
        """One cron round, then the clock moves on by half an hour."""
        answer = run_main("cli", "cron", *args, data_dir=self.data_dir, hooks=self.hooks(),
                          env={**IN_PROCESS_ENV, "DEVTO_USERNAME": "maya_writes", **(env or {})})
        self.shift += ROUND
        return answer


@pytest.fixture
def world(data_dir: Path, tmp_path: Path) -> World:
    account = Account(tmp_path / "account.json", ["q1", "q2"])
    account.write()
    return World(data_dir, account, FakeProvider())


def test_new_comments_are_listed_once_and_a_quiet_round_prints_nothing(world: World) -> None:
    """The first round lists the comments needing a reply; the next round, with nothing new and
    nothing wrong, prints nothing at all and exits 0."""
    first = world.round()
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    assert "q1" in first.stdout and "q2" in first.stdout
    quiet = world.round()
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    world.account.labels.append("q3")
    world.account.write()
    news = world.round()
    assert (news.returncode, news.stderr) == (0, "")
    assert "q3" in news.stdout and "q1" not in news.stdout


def test_a_night_long_outage_is_one_line_and_the_recovery_lists_what_came_meanwhile(world: World) -> None:
    """A night of rounds against a stopped provider: one stderr line (with its fix) in all, a non-zero
    exit on every round, at most one attempt spent; the round after it comes back prints only the
    comments that arrived during the night."""
    assert world.round().returncode == 0
    world.provider_down = True
    world.account.labels.append("n1")
    world.account.write()
    night = [world.round() for _ in range(NIGHT)]
    assert all(r.returncode == 3 for r in night), [r.returncode for r in night]
    said = [r.stderr for r in night if r.stderr]
    assert len(said) == 1, said
    assert said[0].count("\n") == 1 and "unreachable" in said[0] and "watcher check" in said[0]
    assert all(r.stdout == "" for r in night)
    record = json.loads((world.data_dir / "inbox" / "n1.json").read_text())
    assert len(record["attempts"]) == 1  # the one attempt that opened the breaker
    world.provider_down = False
    morning = world.round()
    assert (morning.returncode, morning.stderr) == (0, "")
    assert "n1" in morning.stdout and "q1" not in morning.stdout
    assert world.round().stdout == ""


def test_a_problem_that_lasts_is_said_again_after_a_day_and_again_when_it_changes(world: World) -> None:
    """A day into an outage the line is said once more; a different problem (the key refused
    instead of the server down) is said when it starts; a recovery says nothing."""
    world.provider_down = True
    world.account.labels = ["d1"]
    world.account.write()
    assert world.round().stderr != ""
    world.shift += timedelta(hours=23)
    assert world.round().stderr == ""
    world.shift += timedelta(hours=1)
    again = world.round()
    assert again.stderr.count("\n") == 1 and "could not connect" in again.stderr
    world.provider_down = False
    world.fake.default = "401"
    world.fake.models_endpoint = False
    world.account.labels.append("d2")
    world.account.write()
    changed = world.round()
    assert changed.returncode == 2
    assert changed.stderr.count("\n") == 1 and "API key" in changed.stderr, changed.stderr
    assert world.round().stderr == ""


def test_a_stopped_scan_still_rechecks_and_lists_and_the_exit_says_so(world: World) -> None:
    """dev.to down: scan exits 3, but recheck and the listing still run (a comment whose first
    attempt failed gets its verdict and is listed); the line names dev.to, not the provider."""
    world.fake.script("q1", "500", "verdict")  # round 1's recheck waits 10 minutes (SPEC §16.3)
    first = world.round()
    assert "q2" in first.stdout and "q1" not in first.stdout
    world.account.down = True
    stopped = world.round()
    assert stopped.returncode == 3
    assert "q1" in stopped.stdout
    assert stopped.stderr.count("\n") == 1 and "dev.to" in stopped.stderr and "provider" not in stopped.stderr


def test_a_comment_whose_attempts_are_spent_is_named_once_with_the_command_that_helps(world: World) -> None:
    """Three failed attempts: the round that spends the last one names the comment by id with
    `watcher show` and `watcher grant`; later rounds do not name it again."""
    world.fake.script("q1", "malformed")
    rounds = [world.round() for _ in range(4)]
    named = [r.stdout for r in rounds if "watcher grant q1" in r.stdout]
    assert len(named) == 1, [r.stdout for r in rounds]
    assert "watcher show q1" in named[0]
    assert all(r.returncode == 0 and r.stderr == "" for r in rounds)


def test_a_comment_the_model_cannot_judge_is_named_once_while_rounds_retry_it(world: World) -> None:
    """Answers that are not JSON (a round's scan and recheck each try once): the first round names
    both comments (id, author, `watcher show`); the next names q1, now spent, with `watcher grant`
    instead and lists q2, whose third answer is a verdict, as any comment needing a reply; then
    silence. A comment failing in an outage is the outage's one line instead
    (test_a_night_long_outage_is_one_line_and_the_recovery_lists_what_came_meanwhile)."""
    world.fake.script("q1", "malformed")
    world.fake.script("q2", "malformed", "malformed", "verdict")
    first, second, third = (world.round() for _ in range(3))
    for cid in ("q1", "q2"):
        assert f"{cid}: no verdict yet, attempt 2 failed (malformed_json) — @reader_{cid}" in first.stdout, first.stdout
        assert f"watcher show {cid}" in first.stdout
    assert "watcher grant" not in first.stdout
    assert "watcher grant q1" in second.stdout and "no verdict yet" not in second.stdout, second.stdout
    assert "q2  normal" in second.stdout
    assert (third.returncode, third.stdout, third.stderr) == (0, "", "")
    assert "named_failing" not in json.loads((world.data_dir / "cron.json").read_text())


def test_a_broken_setting_is_said_once_and_exits_2_every_round(world: World) -> None:
    """A misspelt WATCHER_PROVIDER (no settings at all can be loaded): one line, then silence, and
    exit 2 on every round — cron.json is still kept in the data dir the environment names."""
    rounds = [world.round(env={"WATCHER_PROVIDER": "openia"}) for _ in range(3)]
    assert [r.returncode for r in rounds] == [2, 2, 2]
    assert rounds[0].stderr.count("\n") == 1 and "WATCHER_PROVIDER" in rounds[0].stderr
    assert [r.stderr for r in rounds[1:]] == ["", ""]
    assert (world.data_dir / "cron.json").exists()


def test_json_says_every_problem_and_whether_it_was_said(world: World) -> None:
    """--json is one envelope with each step's result and each problem, said or held back."""
    world.provider_down = True
    world.round("--json")
    doc = json.loads(world.round("--json").stdout)
    assert doc["command"] == "cron" and doc["exit_code"] == 3
    assert [p["said"] for p in doc["result"]["problems"]] == [False]
    assert doc["result"]["scan"]["stopped"] == "breaker"


# ---- real processes under cron's bare environment ----------------------------------------------------


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with running_fake() as fake:
        yield fake


def _cron_line(env_file: Path) -> list[str]:
    """The README's cron line, as cron runs it: `sh -c` under an empty environment but HOME and PATH."""
    watcher = ENTRYPOINTS["cli"]
    line = f". {shlex.quote(str(env_file))} && {shlex.quote(str(watcher))} cron"
    return ["env", "-i", f"HOME={env_file.parent}", "PATH=/usr/bin:/bin", "sh", "-c", line]


def test_under_env_i_the_cron_line_lists_news_once_then_is_silent(tmp_path: Path, provider: FakeProvider) -> None:
    """Two rounds as real processes with nothing but the env file (cron's bare environment), against
    dev.to and a model on loopback: the new comment on stdout once, then nothing at all. (A broken
    setting, an outage and a recovery over many rounds are the in-process tests above.)"""
    from _fakes.forem import FakeForem, serving_forem

    forem = FakeForem()
    forem.now = datetime.now(UTC) - timedelta(hours=1)
    forem.comment(forem.publish("maya_writes"), "priyan", "TAG:c1 Does the cache work on Windows?")
    with serving_forem(forem) as base_url:
        forem.site = base_url.removesuffix("/api")
        env_file = tmp_path / "devto-watcher.env"
        settings = {**provider.env(), "WATCHER_DATA_DIR": str(tmp_path / "data"), "DEVTO_USERNAME": "maya_writes",
                    "DEVTO_BASE_URL": base_url}
        env_file.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in settings.items()))

        def run_round() -> subprocess.CompletedProcess[str]:
            return subprocess.run(_cron_line(env_file), capture_output=True, text=True, timeout=60, check=False)

        news = run_round()
        assert (news.returncode, news.stderr) == (0, ""), news.stderr
        assert "priyan" in news.stdout and provider.calls == ["c1"]
        quiet = run_round()
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_cron_is_in_the_readme_as_the_cron_line() -> None:
    """The README's cron block runs `watcher cron`, and its env-file block starts with mkdir."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = readme.split("```")[1::2]
    cron = [b for b in blocks if b.startswith("cron")]
    assert cron and all("watcher cron" in b and "&& .venv/bin/watcher inbox" not in b for b in cron)
    env = [b for b in blocks if "devto-watcher.env" in b and not b.startswith("cron")]
    assert env and env[0].split("\n", 1)[1].startswith("mkdir -p ~/.config")



# ---- stderr as cron's mail and a log scraper read it, and as a person does ----------------------------

def _refusing_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# dev.to unreachable at a URL longer than any line: the problem line quotes it.
_LONG_URL = f"http://127.0.0.1:{_refusing_port()}/{'/'.join(['a-rather-long-segment'] * 5)}/api"
_UNREACHABLE = {"WATCHER_PROVIDER": "offline", "DEVTO_BASE_URL": _LONG_URL,
                "DEVTO_USERNAME": "maya_writes"}


@pytest.mark.parametrize("told", [{}, {"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1"}])
def test_a_problem_line_stays_one_line_through_a_pipe(data_dir: Path, told: dict[str, str]) -> None:  # noqa: E501
    """stderr a pipe (also when FORCE_COLOR or TTY_COMPATIBLE makes rich take it for a terminal):
    the problem is one line, whole, however long (SPEC §15.3)."""
    from _proc import run

    done = run("cli", "cron", data_dir=data_dir, env={**_UNREACHABLE, **told})
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("watcher cron: scan stopped: cannot reach dev.to at ")
    assert _LONG_URL in line
    assert line.endswith("the next round fetches what this one missed")


def test_a_problem_line_on_a_terminal_is_wrapped_to_its_width(data_dir: Path) -> None:
    """stderr a terminal of 80 columns: the problem is wrapped at word boundaries, the URL whole
    (SPEC §16.4)."""
    from test_views_terminal import on_terminal

    code, shown = on_terminal("cron", data_dir=data_dir, columns=80, env=_UNREACHABLE)
    assert code == 3, shown
    lines = shown.splitlines()
    assert len(lines) > 1 and all(len(line) <= 80 for line in lines if _LONG_URL not in line), shown
    assert any(_LONG_URL in line for line in lines), shown
