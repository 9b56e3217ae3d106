"""Delivery through the outbox to real servers on loopback (SPEC §16.1): once per round, retried,
given up after a day, at most one repeat after a crash, nothing sent before the outbox is written,
and no secret in any file or line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _receivers import HttpReceiver, SmtpReceiver

from watcher.config import Paths
from watcher.notify import deliver as notify
from watcher.notify.message import News
from watcher.notify.models import NewsComment
from watcher.notify.targets import Target, parse_targets

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
LINK = "https://dev.to/priyan/comment/3bkf"
PASSWORD = "s3cretPassw0rd"


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver().start()
    yield receiver
    receiver.stop()


def _json(http: HttpReceiver, path: str = "hook") -> str:
    return f"json://watcher:{PASSWORD}@127.0.0.1:{http.port}/{path}"


def _news(*ids: str) -> News:
    return News(
        comments=[
            NewsComment(
                id=cid, priority="high", category="question", author="priyan", article="Rust",
                summary="Asks how lifetimes work.", excerpt="How do lifetimes work?",
                url=f"https://dev.to/priyan/comment/{cid}",
            )
            for cid in ids
        ]
    )


def _deliver(paths: Paths, urls: str, news: News, now: datetime = T0) -> notify.Delivery:
    return notify.deliver(paths, parse_targets(urls), news, now=now)


def _bodies(http: HttpReceiver, path: str = "/hook") -> list[str]:
    return [r.json()["message"] for r in http.got if r.path == path]


def test_one_message_per_round_and_nothing_on_a_quiet_round(tmp_path: Path, http: HttpReceiver) -> None:
    """Two comments are one message; a round with no news sends nothing."""
    paths = Paths(tmp_path)
    _deliver(paths, _json(http), _news("a1", "b2"))
    _deliver(paths, _json(http), News(), T0 + timedelta(minutes=10))
    (body,) = _bodies(http)
    assert "dev.to/priyan/comment/a1" in body and "dev.to/priyan/comment/b2" in body
    assert http.got[0].json()["title"] == "devto-watcher: 2 comments need a reply"


def test_ntfy_gets_the_comment_link_as_click_action(tmp_path: Path, http: HttpReceiver) -> None:
    """ntfy over plain http to loopback carries the link in X-Click."""
    _deliver(Paths(tmp_path), f"ntfy://127.0.0.1:{http.port}/devto-topic", _news("3bkf"))
    (request,) = http.got
    assert request.headers["x-click"] == LINK
    assert request.json()["topic"] == "devto-topic"


def test_mail_reaches_a_real_smtp_server(tmp_path: Path, smtp: SmtpReceiver) -> None:
    """A mailto:// target hands the message to SMTP, which answers 250."""
    url = f"mailto://127.0.0.1:{smtp.port}?from=watcher@example.com&to=me@example.com"
    result = _deliver(Paths(tmp_path), url, _news("3bkf"))
    (mail,) = smtp.messages
    assert b"Subject: devto-watcher: 1 comment needs a reply" in mail
    assert b"dev.to/priyan/comment/3bkf" in mail
    assert len(result.accepted) == 1


def test_refused_mail_is_retried_next_round(tmp_path: Path, smtp: SmtpReceiver) -> None:
    """An SMTP 554 is a failure, and the next round sends the same message again."""
    url = f"mailto://127.0.0.1:{smtp.port}?from=watcher@example.com&to=me@example.com"
    smtp.refuse = True
    first = _deliver(Paths(tmp_path), url, _news("3bkf"))
    smtp.refuse = False
    _deliver(Paths(tmp_path), url, News(), T0 + timedelta(minutes=10))
    assert first.pending == 1 and len(smtp.messages) == 1


def test_a_failing_target_is_delivered_once_it_recovers(tmp_path: Path, http: HttpReceiver) -> None:
    """A 500 is retried next round; once accepted it is never sent again."""
    paths = Paths(tmp_path)
    http.status = 500
    first = _deliver(paths, _json(http), _news("3bkf"))
    http.status = 200
    _deliver(paths, _json(http), News(), T0 + timedelta(minutes=10))
    _deliver(paths, _json(http), News(), T0 + timedelta(minutes=20))
    assert len(http.got) == 2 and first.pending == 1
    assert first.failed and "later rounds try again" in first.failed[0]


def test_two_targets_one_failing(tmp_path: Path, http: HttpReceiver) -> None:
    """The healthy target gets the message once; only the failing one is retried."""
    paths = Paths(tmp_path)
    urls = f"{_json(http, 'good')} json://127.0.0.1:1/closed"
    _deliver(paths, urls, _news("3bkf"))
    again = _deliver(paths, urls, News(), T0 + timedelta(minutes=10))
    assert len(_bodies(http, "/good")) == 1
    assert again.pending == 1 and not again.accepted
    assert again.failed == []  # said on the first failure only


def test_given_up_after_a_day_and_said_once(tmp_path: Path) -> None:
    """24 h of failures: one line, then no more sends nor lines; status shows it."""
    paths = Paths(tmp_path)
    url = "json://127.0.0.1:1/closed"
    rounds = [_deliver(paths, url, _news("3bkf") if n == 0 else News(), T0 + timedelta(hours=n))
              for n in (0, 12, 24, 25)]
    assert [len(r.gave_up) for r in rounds] == [0, 0, 1, 0]
    assert [r.pending for r in rounds] == [1, 1, 0, 0]
    summary = notify.summary(paths, parse_targets(url))
    assert summary.pending == 0 and len(summary.gave_up) == 1


def test_news_in_a_message_is_not_put_in_another(tmp_path: Path, http: HttpReceiver) -> None:
    """The same news handed twice (a round that crashed before it was marked listed) is one message."""
    paths = Paths(tmp_path)
    _deliver(paths, _json(http), _news("3bkf"))
    again = _deliver(paths, _json(http), _news("3bkf", "new1"), T0 + timedelta(minutes=10))
    first, second = _bodies(http)
    assert "comment/new1" in second and "comment/3bkf" not in second
    assert again.created is not None


_CRASH = """
import os, sys
from pathlib import Path
from datetime import datetime, timezone
from watcher.config import Paths
from watcher.notify import deliver as notify
from watcher.notify.message import News
from watcher.notify.models import NewsComment
from watcher.notify.targets import parse_targets
news = News(comments=[NewsComment(id="3bkf", priority="high", category="question", author="p",
    article="a", summary="s", excerpt="e", url="https://dev.to/p/comment/3bkf")])
seams = notify.Seams(**{sys.argv[3]: lambda message, fate: os._exit(9)})
notify.deliver(Paths(Path(sys.argv[1])), parse_targets(sys.argv[2]), news,
               now=datetime(2026, 12, 3, 9, tzinfo=timezone.utc), seams=seams)
"""


@pytest.mark.parametrize(("point", "copies"), [("before_send", 1), ("after_accept", 2)])
def test_a_kill_around_a_send_loses_nothing_and_repeats_at_most_once(
    tmp_path: Path, http: HttpReceiver, point: str, copies: int
) -> None:
    """Killed with the message written but unsent, the next round sends it once; killed between
    the target's acceptance and its record, the next round sends it again, once; no more after."""
    paths = Paths(tmp_path)
    killed = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path), _json(http), point],
                            check=False)
    _deliver(paths, _json(http), News(), T0 + timedelta(minutes=10))
    _deliver(paths, _json(http), News(), T0 + timedelta(minutes=20))
    assert killed.returncode == 9
    bodies = _bodies(http)
    assert len(bodies) == copies and len(set(bodies)) == 1 and "comment/3bkf" in bodies[0]


_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from datetime import datetime, timezone
from watcher.config import Paths
from watcher.errors import SaveFailed
from watcher.notify import deliver as notify
from watcher.notify.message import News
from watcher.notify.models import NewsComment
from watcher.notify.targets import parse_targets
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # every file write past 64 bytes: EFBIG
news = News(comments=[NewsComment(id="3bkf", priority="high", category="question", author="p",
    article="a", summary="s", excerpt="e", url="https://dev.to/p/comment/3bkf")])
try:
    notify.deliver(Paths(Path(sys.argv[1])), parse_targets(sys.argv[2]), news,
                   now=datetime(2026, 12, 3, 9, tzinfo=timezone.utc))
except SaveFailed as exc:
    print(exc.message)
    sys.exit(5)
"""


def test_an_outbox_that_cannot_be_written_sends_nothing(tmp_path: Path, http: HttpReceiver) -> None:
    """A full disk while writing the message: exit 5 naming the file, and nothing was sent."""
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path), _json(http)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 5, done.stderr
    assert "outbox" in done.stdout and http.got == []
    assert PASSWORD not in done.stdout + done.stderr


def test_the_message_is_on_disk_before_the_send(tmp_path: Path, http: HttpReceiver) -> None:
    """When the send begins, the outbox already holds the message with the target still open."""
    seen: list[list[dict[str, object]]] = []

    def sender(target: Target, *args: object) -> notify.Sent:
        files = sorted((tmp_path / "outbox").glob("*.json"))
        seen.append([json.loads(f.read_text("utf-8")) for f in files])
        return notify.Sent(True)

    notify.deliver(Paths(tmp_path), parse_targets(_json(http)), _news("3bkf"), now=T0,
                   seams=notify.Seams(send=sender))
    ((written,),) = seen
    assert written["news"] == ["comment:3bkf"] and written["targets"][0]["accepted_at"] is None


def test_no_secret_in_files_or_lines(tmp_path: Path, http: HttpReceiver) -> None:
    """The outbox files and every line delivery says hold no part of the URL's secrets."""
    paths = Paths(tmp_path)
    http.status = 500
    urls = f"{_json(http)} json://user:{PASSWORD}@127.0.0.1:1/x"
    rounds = [_deliver(paths, urls, _news("3bkf") if n == 0 else News(), T0 + timedelta(hours=n))
              for n in (0, 25)]
    said = json.dumps([r.__dict__ for r in rounds])
    files = "".join(p.read_text("utf-8") for p in (tmp_path / "outbox").glob("*.json"))
    assert rounds[1].gave_up and "[redacted]" in files
    assert PASSWORD not in said + files


def test_send_test_writes_nothing(tmp_path: Path, http: HttpReceiver) -> None:
    """``notify --test`` sends to each target now and leaves no outbox behind."""
    results = notify.send_test(parse_targets(f"{_json(http)} json://127.0.0.1:1/closed"))
    assert [r.accepted for r in results] == [True, False]
    assert len(http.got) == 1 and not (tmp_path / "outbox").exists()


def test_a_finished_message_is_pruned_after_a_week_but_the_newest_kept(tmp_path: Path, http: HttpReceiver) -> None:
    """Old delivered messages go; the last one stays for status's last delivery."""
    paths = Paths(tmp_path)
    _deliver(paths, _json(http), _news("a1"))
    _deliver(paths, _json(http), _news("b2"), T0 + timedelta(days=1))
    _deliver(paths, _json(http), News(), T0 + timedelta(days=9))
    (kept,) = [json.loads(p.read_text("utf-8")) for p in (tmp_path / "outbox").glob("*.json")]
    assert kept["news"] == ["comment:b2"]
    assert notify.summary(paths, parse_targets(_json(http))).last_delivery is not None


def test_without_targets_nothing_is_written(tmp_path: Path) -> None:
    """No WATCHER_NOTIFY: delivery neither writes a message nor sends."""
    notify.deliver(Paths(tmp_path), (), _news("3bkf"), now=T0)
    assert not list((tmp_path / "outbox").glob("*.json")) if (tmp_path / "outbox").exists() else True
