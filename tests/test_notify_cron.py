"""``watcher cron`` with WATCHER_NOTIFY (SPEC §16.1): the round's news as one message to a real
receiver on loopback, stdout as it was, nothing lost when the outbox cannot be written, and the
URL's secrets in no output or file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _receivers import HttpReceiver
from test_cron import Account, World

from watcher.notify.targets import parse_targets

PASSWORD = "n0tifyS3cret"


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def world(data_dir: Path, tmp_path: Path) -> World:
    from _fakes.provider import FakeProvider

    account = Account(tmp_path / "account.json", ["q1", "q2"])
    account.write()
    return World(data_dir, account, FakeProvider())


def _env(http: HttpReceiver) -> dict[str, str]:
    return {"WATCHER_NOTIFY": f"json://watcher:{PASSWORD}@127.0.0.1:{http.port}/hook"}


def _messages(http: HttpReceiver) -> list[dict[str, Any]]:
    return [r.json() for r in http.got]


def test_a_round_sends_one_message_and_keeps_stdout(world: World, http: HttpReceiver) -> None:
    """Two new comments: one message with both (link, first words), and the same stdout as without."""
    answer = world.round(env=_env(http))
    assert answer.returncode == 0, answer.stderr
    (message,) = _messages(http)
    assert message["title"] == "devto-watcher: 2 comments need a reply"
    assert "TAG:q1 How do I configure the cache" in message["message"]
    assert "q1" in answer.stdout and "q2" in answer.stdout and answer.stderr == ""


def test_a_quiet_round_sends_nothing(world: World, http: HttpReceiver) -> None:
    """Nothing new: no second message, nothing printed."""
    world.round(env=_env(http))
    quiet = world.round(env=_env(http))
    assert len(http.got) == 1 and (quiet.stdout, quiet.stderr) == ("", "")


def test_without_notify_no_outbox(world: World) -> None:
    """No WATCHER_NOTIFY: stdout is the channel and no outbox appears."""
    answer = world.round()
    assert "q1" in answer.stdout and not (world.data_dir / "outbox").exists()


def test_an_unwritable_outbox_keeps_the_news_for_the_next_round(world: World, http: HttpReceiver) -> None:
    """The outbox cannot be written: exit 5 with a line, nothing sent; once it can, the same news goes."""
    world.data_dir.mkdir(parents=True, exist_ok=True)
    (world.data_dir / "outbox").write_text("in the way", encoding="utf-8")
    stopped = world.round(env=_env(http))
    sent_while_stopped = len(http.got)
    (world.data_dir / "outbox").unlink()
    after = world.round(env=_env(http))
    assert stopped.returncode == 5 and "notify stopped" in stopped.stderr
    assert sent_while_stopped == 0
    assert after.returncode == 0, after.stderr
    (message,) = _messages(http)
    assert "TAG:q1" in message["message"] and "TAG:q2" in message["message"]


def test_a_failing_target_is_said_once_and_delivered_when_it_recovers(world: World, http: HttpReceiver) -> None:
    """A 500: one stderr line; the next round retries quietly and it arrives."""
    http.status = 500
    failed = world.round(env=_env(http))
    http.status = 200
    recovered = world.round(env=_env(http))
    assert "later rounds try again" in failed.stderr and recovered.stderr == ""
    assert [len(r.body) > 0 for r in http.got] == [True, True]
    assert http.got[0].body == http.got[1].body


def test_no_secret_in_output_or_data_dir(world: World, http: HttpReceiver) -> None:
    """The URL's password is in no line printed and no file of the data dir, failing or not."""
    http.status = 500
    rounds = [world.round(env=_env(http)), world.round("--json", env=_env(http))]
    files = [p.read_text("utf-8", "replace") for p in world.data_dir.rglob("*") if p.is_file()]
    said = "".join(r.stdout + r.stderr for r in rounds)
    assert PASSWORD not in said + "".join(files)
    assert json.loads(rounds[1].stdout)["ok"] is not None


def test_status_names_targets_redacted(world: World, http: HttpReceiver) -> None:
    """status shows each target as scheme://[redacted], the last delivery and what is pending."""
    from _proc import run_main

    world.round(env=_env(http))
    answer = run_main("cli", "status", "--json", data_dir=world.data_dir, env=_env(http))
    notify = json.loads(answer.stdout)["result"]["notify"]
    assert notify["targets"] == [str(t) for t in parse_targets(_env(http)["WATCHER_NOTIFY"])]
    assert notify["last_delivery"] and notify["pending"] == 0
    assert PASSWORD not in answer.stdout


def test_check_validates_the_urls_without_sending(world: World, http: HttpReceiver) -> None:
    """``watcher check``: a row per target, redacted; a URL Apprise cannot use fails its row;
    nothing reaches the receiver."""
    from _fakes.provider import IN_PROCESS_ENV
    from _proc import run_main

    urls = f"{_env(http)['WATCHER_NOTIFY']} nosuchservice://{PASSWORD}"
    answer = run_main("cli", "check", "--json", data_dir=world.data_dir, hooks=world.hooks(),
                      env={**IN_PROCESS_ENV, "DEVTO_USERNAME": "maya_writes", "WATCHER_NOTIFY": urls})
    rows = {c["name"]: c for c in json.loads(answer.stdout)["result"]["checks"]}
    assert (rows["notify #1"]["ok"], rows["notify #2"]["ok"]) == (True, False)
    assert rows["notify #1"]["detail"].startswith("json://[redacted] (#1)")
    assert http.got == [] and PASSWORD not in answer.stdout + answer.stderr


def test_status_says_targets_and_last_delivery_to_a_person(world: World, http: HttpReceiver) -> None:
    """The human status has a notify line: the targets redacted and when the last one arrived."""
    from _proc import run_main

    world.round(env=_env(http))
    answer = run_main("cli", "status", data_dir=world.data_dir, env=_env(http))
    (line,) = [x for x in answer.stdout.splitlines() if x.startswith("notify:")]
    assert "json://[redacted]" in line and "last delivery none yet" not in line
    assert PASSWORD not in answer.stdout


def test_a_round_whose_step_stopped_still_sends_its_news(world: World, http: HttpReceiver) -> None:
    """The provider down (scan and recheck stop, exit non-zero): the round still sends what it
    has to say, here the outage's own line."""
    world.provider_down = True
    down = world.round(env=_env(http))
    assert down.returncode != 0 and "stopped" in down.stderr
    (message,) = _messages(http)
    assert "stopped" in message["message"]
