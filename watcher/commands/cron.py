"""``watcher cron`` (SPEC §15.3): scan, recheck, then the new comments — one command for cron,
which mails whatever a command prints.

- stdout carries only news: the comments that need a reply and no earlier round listed (the
  ``inbox --new`` listing), and, once each, a comment that needs the author but has no verdict
  — its attempts spent, or failing because the model could not judge it — with the command that
  helps;
- stderr carries one line per problem (a step stopped, a warning), with its fix, when the problem
  starts or changes, and again at most once a day while it lasts — ``cron.json`` in the data dir
  remembers what was said, so a night-long outage is one mail, not sixteen;
- nothing at all is printed when nothing is new and nothing is wrong.

Every step runs whatever the one before it did (``scan && recheck && inbox --new`` listed nothing
after a scan that exited 3), and the exit code is the first stopped step's: non-zero whenever a
step was stopped, printed or not.

A problem is known by what went wrong, not by one round's wording (:func:`problem_key`): an
outage reads "provider unreachable" on the round that opened the breaker and "provider
unavailable since …" on every round after, and is one problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from watcher.commands import runs
from watcher.commands.core import Context, signal_failure
from watcher.commands.inbox import inbox_view
from watcher.commands.results import CronNamed, CronProblemResult, CronResult, InboxResult
from watcher.commands.spec import BATCH_CODES, LIMIT, Command
from watcher.commands.unmigrated import EMPTY_BESIDE_DEFAULT
from watcher.config import data_paths
from watcher.errors import ProviderSetup, StateError, WatcherError
from watcher.models import CronProblem, CronState
from watcher.notify.targets import Target
from watcher.pipeline import DEFAULT_LIMIT, Partial, open_store
from watcher.state import records
from watcher.store import Store
from watcher.util.timeutil import iso, parse_iso, utcnow
from watcher.util.visible import visible

# While a problem lasts it is said again after this long: a person back from a weekend still
# learns that the provider has been down since Friday (one mail a day, not one a round).
REPEAT_AFTER = timedelta(days=1)

# Kinds whose wording changes from round to round while the problem is the same: each is one
# problem. A 429 and the cooldown it starts are one problem too.
_ONE_PROBLEM = {
    "rate_limited": "provider_rate_limited",
    "cooldown": "provider_rate_limited",
    "provider_unavailable": "provider_unavailable",
    "quota_exhausted": "quota_exhausted",
    "source_unavailable": "source_unavailable",
    "lock_busy": "lock_busy",
    "interrupted": "interrupted",
}

# The fix that follows a message which does not already say it (house style: "… — do this").
FIXES: dict[str, str] = {
    "provider_rate_limited": "nothing to do: later rounds call again once the cooldown ends",
    "provider_unavailable": (
        "nothing to do if it passes: each round checks the provider for free and calls again "
        "once it answers; `watcher check` tests it now"
    ),
    "quota_exhausted": "raise the plan's spend limit, or wait until the quota renews",
    "token_budget": "until then new comments wait unjudged",
    "source_unavailable": "nothing to do: the next round fetches what this one missed",
    "lock_busy": (
        "another watcher run was working; if this repeats, look for a stuck watcher process"
    ),
    "interrupted": "the round was stopped; the next one goes on",
    "config": "fix it, then `watcher check` (free) tells whether the setup works",
    "usage": "fix the cron line",
    "provider_setup": "then `watcher check` (free) tells whether the setup works",
    "state": "`watcher status` shows the state; moved files are in the data dir's quarantine/",
    "internal": "a bug in watcher: run the same with --verbose and report what it prints",
}

_DIGITS = re.compile(r"\d+")


def problem_key(error: WatcherError) -> str:
    """What went wrong, independent of one round's wording (times, counts, the probe's words)."""
    kind = error.kind
    if kind in _ONE_PROBLEM:
        return _ONE_PROBLEM[kind]
    if isinstance(error, ProviderSetup):
        return (
            f"provider_setup:{error.cause}"
            if error.cause
            else f"provider_setup:{_shape(error.message)}"
        )
    return f"{kind}:{_shape(error.message)}"


def _shape(text: str) -> str:
    return _DIGITS.sub("#", text)


def _fix(error: WatcherError) -> str:
    key = problem_key(error).partition(":")[0]
    if key in FIXES:
        return FIXES[key]
    return FIXES["state"] if isinstance(error, StateError) else FIXES["internal"]


def problem_line(step: str, error: WatcherError) -> str:
    """One line: what stopped, what it said, and the fix — unless the message already points at
    `watcher check` (a refused setup names its setting and the check itself)."""
    said = f"watcher cron: {step} stopped: {error.message}"
    return said if "`watcher check`" in error.message else f"{said} — {_fix(error)}"


def _is_problem(notice: str) -> bool:
    """The notices that are trouble (a warning; a named data dir with no comments while the
    default one holds some, which would make cron watch an empty store on a budget of its own:
    watcher/commands/unmigrated.py), not news of a recovery or a note for a person."""
    return notice.startswith("warning:") or (
        notice.startswith("note:") and EMPTY_BESIDE_DEFAULT in notice
    )


def cron(ctx: Context, *, limit: int = DEFAULT_LIMIT) -> Partial[CronResult]:
    """One cron round: scan, recheck, the new comments; what to say, and what was said already."""
    notices: list[str] = []
    quiet = replace(ctx, notice=notices.append)  # the steps' notices are sorted below, not printed
    found: list[tuple[str, str, str, WatcherError | None]] = []  # key, step, line, error
    first: WatcherError | None = None
    results: dict[str, Any] = {}
    targets = _notify_targets(quiet)
    for step, fn in _steps(limit, claim=not targets):
        result, error = _run(quiet, step, fn)
        results[step] = result
        if error is not None:
            first = first or error
            found.append((problem_key(error), step, problem_line(step, error), error))
    for notice in notices:
        if _is_problem(notice):
            found.append((f"notice:{_shape(notice)}", "cron", f"watcher cron: {notice}", None))
    inbox = results.get("inbox")
    named, problems, save_error = _remember(quiet, found, inbox)
    if save_error is not None:
        first = first or save_error
    done = CronResult(
        scan=results.get("scan"),
        recheck=results.get("recheck"),
        inbox=inbox,
        problems=problems,
        named=named,
        notices=notices,
    )
    if targets:
        # Also after a stopped step: the news found and the trouble itself still go out (§16.1).
        stopped = _notify(quiet, done, targets)
        first = first or stopped
    return Partial(done, first)


def _steps(
    limit: int, *, claim: bool = True
) -> list[tuple[str, Callable[[Context], BaseModel | Partial[Any]]]]:
    return [
        ("scan", lambda c: runs.scan(c, limit=limit)),
        ("recheck", lambda c: runs.recheck(c, limit=limit)),
        ("inbox", lambda c: inbox_view(c, new=True, claim=claim)),
    ]


def _notify_targets(ctx: Context) -> tuple[Target, ...]:
    """WATCHER_NOTIFY's targets; none when the settings cannot be read (a scan step says why)."""
    try:
        return ctx.settings.notify
    except WatcherError:
        return ()


def _notify(ctx: Context, result: CronResult, targets: tuple[Target, ...]) -> WatcherError | None:
    """The round's news to the outbox, its comments marked listed, what is pending sent (SPEC
    §16.1, :mod:`watcher.notify.round`): the outbox's error, if it stopped that."""
    from watcher.notify.round import deliver_round

    store = _memory(ctx)
    if store is None:
        return None
    return deliver_round(
        result,
        paths=store.paths,
        targets=targets,
        claim=store.claim_listed,
        now=(ctx.hooks.clock or utcnow)(),
    )


def _run(
    ctx: Context,
    step: str,
    fn: Callable[[Context], BaseModel | Partial[Any]],
) -> tuple[BaseModel | None, WatcherError | None]:
    """One step as :func:`watcher.commands.core.execute` runs a command (its failure signal
    included), keeping the error itself: its kind and cause name the problem."""
    try:
        out = fn(ctx)
    except WatcherError as exc:
        signal_failure(ctx, exc)
        return None, exc
    return (out.result, out.error) if isinstance(out, Partial) else (out, None)


def _remember(
    ctx: Context,
    found: list[tuple[str, str, str, WatcherError | None]],
    inbox: InboxResult | None,
) -> tuple[list[CronNamed], list[CronProblemResult], WatcherError | None]:
    """Decide what this round says, from what cron.json says was said, and save the new memory.

    A problem is said when it is new (its key was not there last round: it started, or it
    changed into another) or was last said a day ago; one that is gone is forgotten, silently —
    a recovery is not news. A state that cannot be read or written is itself a problem, and
    then everything is said (better a repeated mail than a lost one)."""
    now = (ctx.hooks.clock or utcnow)()
    store = _memory(ctx)
    trouble: WatcherError | None = None
    try:
        before = store.load_cron_state() if store is not None else CronState()
    except StateError as exc:
        before, trouble = CronState(), exc
    kept: dict[str, CronProblem] = {}
    problems: list[CronProblemResult] = []
    for key, step, line, error in found:
        if key in kept:
            continue  # scan and recheck stopped by one outage: one line
        old = before.problems.get(key)
        # A said_at ahead of now (a round run with a clock gone wrong) is not trusted: said again.
        say = old is None or not timedelta(0) <= now - parse_iso(old.said_at) < REPEAT_AFTER
        kept[key] = CronProblem(
            line=line,
            since=old.since if old else iso(now),
            said_at=iso(now) if say or old is None else old.said_at,
        )
        problems.append(
            CronProblemResult(
                key=key,
                step=step,
                kind=error.kind if error else "warning",
                line=line,
                said=say,
                since=kept[key].since,
            )
        )
    named = (
        _needing_you(store, set(before.named), set(before.named_failing))
        if store is not None
        else []
    )
    after = CronState(
        problems=kept,
        named=sorted(n.id for n in named if n.state == "exhausted"),
        named_failing=sorted(n.id for n in named if n.state == "failed"),
    )
    if store is None:
        for p in problems:
            p.said = True  # no data dir to remember in: better a repeated line than a lost one
    elif trouble is None and after != before:
        try:
            store.save_cron_state(after)
        except StateError as exc:
            trouble = exc
    if trouble is not None:
        for p in problems:
            p.said = True
        problems.append(
            CronProblemResult(
                key="cron_state",
                step="cron",
                kind=trouble.kind,
                said=True,
                since=iso(now),
                line=problem_line("cron", trouble),
            )
        )
    return named, problems, trouble


def _memory(ctx: Context) -> Store | None:
    """The data dir's store, also when another setting is wrong (a misspelt provider must be one
    line, not one a round); ``None`` when even the data dir cannot be told."""
    try:
        return ctx.store
    except WatcherError:
        pass
    try:
        return open_store(data_paths(data_dir=ctx.data_dir), ctx.hooks)
    except WatcherError:
        return None


def _needing_you(store: Store, named_before: set[str], failing_before: set[str]) -> list[CronNamed]:
    """Comments without a verdict the author should know of, each with the command that helps:
    those only the author can move on (all attempts spent), and those the model could not judge
    (an answer it failed to give, ``ANSWER_KINDS``) while rounds retry them. A failure of the
    setup or the network is not named: it is the round's problem line, and the comments it
    left are judged once it is over. ``said`` for those no earlier round named in that state."""
    from watcher.pipeline.gate import ANSWER_KINDS

    try:
        index = store.load_index()
    except StateError:
        return []  # the inbox step said why the index cannot be read
    found: list[CronNamed] = []
    for cid, entry in sorted(index.comments.items()):
        if entry.status not in ("exhausted", "failed") or entry.triage != "open":
            continue
        said = cid not in (named_before if entry.status == "exhausted" else failing_before)
        record = None
        if said:
            try:
                record = store.load_record(cid)
            except StateError:
                record = None
        if entry.status == "failed":
            if not said:
                found.append(CronNamed(id=cid, state="failed", said=False, line=""))
                continue
            last = record.attempts[-1].error if record is not None and record.attempts else None
            if last is None or last.kind not in ANSWER_KINDS:
                continue
            found.append(
                CronNamed(id=cid, state="failed", said=True, line=_failing_line(cid, record))
            )
            continue
        found.append(
            CronNamed(
                id=cid, state=entry.status, said=said, line=_named_line(cid, record) if said else ""
            )
        )
    return found


def _who(record: Any) -> str:
    author = visible(record.comment.author, one_line=True)
    return f"@{author} on “{visible(record.comment.article_title, one_line=True)}”"


def _failing_line(cid: str, record: Any) -> str:
    last = record.attempts[-1]
    return (
        f"{cid}: no verdict yet, attempt {len(record.attempts)} failed ({last.error.kind}) — "
        f"{_who(record)}; "
        f"the next round tries again, or read it now with `watcher show {cid}`"
    )


def _named_line(cid: str, record: Any) -> str:
    if record is None:
        return f"{cid}: no verdict, all attempts spent — `watcher show {cid}`"
    last = record.attempts[-1].error if record.attempts else None
    why = f" (last: {last.kind})" if last is not None else ""
    if (
        record.edits
        and record.edits[-1].judged
        and record.edits[-1].attempts == len(record.attempts)
    ):
        why += ", edited on dev.to since"  # its attempts were the old text's; a grant tries the new
    who = _who(record)
    if records.grant_refusal(record, 1) is None:
        return (
            f"{cid}: no verdict, its {len(record.attempts)} attempts all failed{why} — {who}; "
            "read it with "
            f"`watcher show {cid}`, or `watcher grant {cid}` gives it one more try"
        )
    return (
        f"{cid}: no verdict after the most attempts a comment gets{why} — {who}; read it with "
        f"`watcher show {cid}`"
    )


# The registry's entry (watcher/commands/registry.py).
CRON = Command(
    name="cron",
    summary="For cron: scan, recheck, list what is new; else quiet.",
    help="For cron: scan, recheck, then the new comments that need a reply — quiet "
    "otherwise.\n\nStdout: each new comment needing a reply, once; a comment whose attempts "
    "are all spent,\nnamed once with the command that helps. Stderr: a problem as one line "
    "with its fix, when it\nstarts or changes, and at most once a day while it lasts. "
    "Nothing at all when nothing is\nnew and nothing is wrong. Each step runs even when the "
    "one before it stopped; the exit code\nis non-zero whenever one did.",
    examples=(
        "watcher cron",
        (
            "*/30 * * * * . $HOME/.config/devto-watcher.env && "
            "/path/to/devto-watcher/.venv/bin/watcher cron"
        ),
    ),
    codes=BATCH_CODES.replace("0 ran (per-comment errors are in the table)", "0 every step ran"),
    result=CronResult,
    run=lambda c, a: cron(c, limit=a["limit"]),
    view="watcher.cli.views.reading:cron",
    own_errors=True,
    params=(replace(LIMIT, help="Most model calls for scan, and again for recheck (1–20 each)."),),
)
