"""``watcher notify --test`` and ``watcher schedule`` (SPEC §16.1, §16.2).

``notify --test`` sends a short test message to every WATCHER_NOTIFY target now: no model call,
no outbox, nothing written. It exits 0 only when every target accepted; otherwise 2 (the line says
which target and why, redacted).

``schedule`` prints a unit for this install (:mod:`watcher.commands.schedule`); it writes nothing.

Both are the person's own: the bridge and the MCP server do not offer them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from watcher.commands.core import Context
from watcher.commands.results import Result
from watcher.commands.screen import Screen, one_line
from watcher.commands.spec import Command, Param
from watcher.errors import ConfigError, UsageError
from watcher.pipeline import Partial

if TYPE_CHECKING:
    from watcher.notify.deliver import Seams


class NotifyFailed(ConfigError):
    """A notification target did not accept the test message: a setup to fix (the URL, the
    service's account) or a service to wait for — the test exists to find either before a round
    needs it, so it fails as the setup does (exit 2)."""

    kind = "notify_failed"


class NotifyTarget(Result):
    target: str = Field(description="The target as scheme://[redacted]; never its URL.")
    accepted: bool
    error: str | None = Field(description="Why it did not accept (redacted); null if it did.")


class NotifyTestResult(Result):
    """``watcher notify --test``: each target's answer to a test message."""

    ok: bool = Field(description="Every target accepted.")
    targets: list[NotifyTarget]


class ScheduleResult(Result):
    """``watcher schedule``: the unit for this install, as printed (nothing is written)."""

    kind: str = Field(description="systemd, launchd or cron.")
    text: str = Field(description="The unit file, plist or crontab line.")


def notify_test(ctx: Context, *, seams: Seams | None = None) -> Partial[NotifyTestResult]:
    """A test message to each target now; the error names those that did not accept."""
    from watcher.notify.deliver import send_test

    targets = ctx.settings.notify
    if not targets:
        raise ConfigError(
            "WATCHER_NOTIFY is not set: set it to one or more Apprise URLs (e.g. "
            "WATCHER_NOTIFY=ntfy://your-long-random-topic), then `watcher notify --test`"
        )
    sent = send_test(targets, seams=seams)
    rows = [NotifyTarget(target=s.target, accepted=s.accepted, error=s.error) for s in sent]
    failed = [r for r in rows if not r.accepted]
    error = (
        NotifyFailed(
            f"{len(failed)} of {len(rows)} notification target(s) did not accept the test: "
            + "; ".join(f"{r.target}: {r.error}" for r in failed)
            + " — `watcher check` checks the URLs"
        )
        if failed
        else None
    )
    return Partial(NotifyTestResult(ok=not failed, targets=rows), error)


def schedule(ctx: Context, kind: str, *, every: str | None = None) -> ScheduleResult:
    """The unit for ``kind``, for this executable and ``~/.config/devto-watcher.env``."""
    from watcher.commands.schedule import KINDS, render, this_install
    from watcher.commands.watch import DEFAULT_EVERY, parse_every

    if kind not in KINDS:
        raise UsageError(f"schedule takes one of {', '.join(KINDS)}, got {kind!r}")
    every_text = every or ("30m" if kind == "cron" else DEFAULT_EVERY)
    interval = parse_every(every_text)
    install = this_install(ctx.data_dir)
    return ScheduleResult(kind=kind, text=render(kind, install, interval, every_text))


def _notify(ctx: Context, test: bool) -> Partial[NotifyTestResult]:
    if not test:
        raise UsageError("notify takes --test: `watcher notify --test` sends a test message now")
    return notify_test(ctx)


def view_notify_test(result: NotifyTestResult, screen: Screen) -> None:
    for row in result.targets:
        said = "accepted" if row.accepted else f"not accepted: {one_line(row.error)}"
        screen.out.print(f"{row.target}: {said}", markup=False, highlight=False)


def view_schedule(result: ScheduleResult, screen: Screen) -> None:
    """The unit as it is, to redirect into its file: no wrapping, no markup."""
    screen.out.file.write(result.text)
    screen.out.file.flush()


NOTIFY = Command(
    name="notify",
    summary="Send a test message to each WATCHER_NOTIFY target now.",
    help="Send a short test message to each WATCHER_NOTIFY target now (Apprise URLs: ntfy, "
    "mail, Discord,\nSlack, Telegram…). No model call, nothing written. Each target is named "
    "redacted.",
    examples=("watcher notify --test",),
    codes="0 every target accepted · 2 WATCHER_NOTIFY unset or a target did not accept",
    result=NotifyTestResult,
    run=lambda c, a: _notify(c, a["test"]),
    view="watcher.commands.notifying:view_notify_test",
    params=(
        Param(
            name="test",
            type=bool,
            default=False,
            flags=("--test",),
            help="Send the test message (required: notify does nothing else).",
        ),
    ),
    bridge=False,
)

SCHEDULE = Command(
    name="schedule",
    summary="Print a systemd, launchd or cron unit for this install.",
    help="Print a ready systemd user service or launchd agent (both run `watcher watch`), or a "
    "crontab\nline (`watcher cron`), for this install: the absolute path of this watcher and of "
    "the env file\n~/.config/devto-watcher.env. Writes nothing: redirect it where it goes "
    '(README,\n"Running it unattended").',
    examples=(
        "watcher schedule systemd > ~/.config/systemd/user/devto-watcher.service",
        "watcher schedule launchd > ~/Library/LaunchAgents/dev.devto-watcher.plist",
        "(crontab -l; watcher schedule cron --every 30m) | crontab -",
    ),
    codes="0 printed · 2 unknown kind or interval",
    result=ScheduleResult,
    run=lambda c, a: schedule(c, a["kind"], every=a["every"]),
    view="watcher.commands.notifying:view_schedule",
    params=(
        Param(name="kind", type=str, metavar="systemd|launchd|cron"),
        Param(
            name="every",
            type=str | None,
            default=None,
            flags=("--every",),
            metavar="DURATION",
            help="How often (1m to 1d: 90s, 10m, 1h); default 10m for watch, 30m for cron.",
            show_default=False,
        ),
    ),
    bridge=False,
)
