"""The views of the commands that run a batch or an agent's turn: scan, recheck, demo, claim,
submit (``view(result, screen)``, :mod:`watcher.commands.screen`)."""

from __future__ import annotations

from watcher.cli.views.reading import inbox, offline_said, said
from watcher.commands.envelope import EnvelopeError
from watcher.commands.results import (
    BatchResult,
    ClaimResult,
    DemoResult,
    ItemResult,
    SubmitResult,
)
from watcher.commands.screen import Screen, one_line


def describe(item: ItemResult) -> str:
    if item.verdict:
        return said(item.verdict)
    if item.kind and item.message:
        return f"{item.kind}: {one_line(item.message)}"
    return item.kind or one_line(item.message)


def _cells(item: ItemResult) -> tuple[str, str, str]:
    """An item's comment, outcome and attempts columns (attempts blank where it has none)."""
    return item.id, item.outcome, "" if item.attempts is None else str(item.attempts)


def batch(doc: BatchResult, screen: Screen) -> None:
    """A batch's table, its counts and the next step; the run's error is said beside them."""
    if doc.items:
        _table(doc, screen)
        offline_said((item.verdict for item in doc.items), screen)
    screen.out.print(_counts(doc))
    if not doc.dry_run:
        screen.out.print(f"next: {_next_step(doc, screen.error)}")


def _table(doc: BatchResult, screen: Screen) -> None:
    """One line per comment, the table as wide as the output (the same width from run to run):
    the summary is cut to fit, not wrapped."""
    from rich.table import Table

    error = screen.error
    table = Table(title=f"{doc.command} ({doc.provider} {doc.model})", expand=True)
    used = 4 * 3 + 1  # borders and padding of four columns
    rows = [_cells(item) for item in doc.items]
    for column, name in enumerate(("comment", "outcome", "attempts")):
        # These never shrink: the detail column gives way on a narrow terminal.
        width = max([len(name), *(len(row[column]) for row in rows)])
        table.add_column(name, no_wrap=True, width=width)
        used += width
    table.add_column("detail", no_wrap=True, ratio=1)  # the room the others leave
    room = max(20, screen.out.width - used)
    for item, row in zip(doc.items, rows, strict=True):
        detail = describe(item)
        if item.outcome == "not_started" and error is not None and item.message == error["message"]:
            detail = "not reached: the run stopped (the reason is below)"  # said once, on stderr
        detail = detail if len(detail) <= room else detail[: room - 1] + "…"
        table.add_row(*row, detail)
    screen.out.print(table, soft_wrap=False)


def _counts(doc: BatchResult) -> str:
    """The run's one line of counts: calls against the limit, outcomes, and what else it found."""
    counts = ", ".join(f"{k} {v}" for k, v in sorted(doc.counts.items())) or "nothing to do"
    if doc.articles == 0:
        counts += " (the account has no published articles: check DEVTO_USERNAME if it should)"
    verb = "would call" if doc.dry_run else "model calls"
    calls = len(doc.would_call) if doc.dry_run else doc.calls
    parts = [f"{verb}: {calls} (limit {doc.limit}) · {counts}"]
    for shown, text in (
        (doc.discovered, f"new comments: {doc.discovered}"),
        (doc.remaining, f"remaining: {doc.remaining} (run again)"),
        (doc.repaired, f"seen.json brought up to date from inbox/: {len(doc.repaired)}"),
        (doc.baseline, f"baseline (older than the backlog window, not checked): {doc.baseline}"),
        (doc.answered, f"already answered by you: {doc.answered}"),
        (doc.replied, f"marked replied (you answered on dev.to): {len(doc.replied)}"),
        (doc.for_agent, f"waiting for the agent: {doc.for_agent}"),
    ):
        if shown:
            parts.append(text)
    return " · ".join(parts)


# What to do after a run stopped, by the error's kind: each says what is true of that stop.
_AFTER_STOP: dict[str, str] = {
    "provider_setup": "fix the setup named below, then `watcher check` (free) before the next run",
    "config": "fix the setting named below, then `watcher check` (free) before the next run",
    "usage": "fix the command line (`watcher COMMAND -h` has examples)",
    "provider_unavailable": (
        "wait: the next run checks the provider for free before it spends an attempt"
    ),
    "rate_limited": (
        "wait: no model call until the cooldown named below ends; the run after it calls again"
    ),
    "cooldown": (
        "wait: no model call until the cooldown named below ends; the run after it calls again"
    ),
    "quota_exhausted": (
        "raise the plan's spend limit or wait until the quota renews; no call until then"
    ),
    "source_unavailable": "wait: dev.to did not answer; the next scan fetches what this one missed",
    "interrupted": "run it again when you like; the interrupted attempt stays counted",
    "cancelled": "run it again when you like",
    "lock_busy": "another run is working; try again in a minute",
}


def _next_step(doc: BatchResult, error: EnvelopeError | None) -> str:
    """The one next step that fits what happened (the error itself is printed on stderr)."""
    needs = sum(1 for i in doc.items if i.verdict and i.verdict.needs_reply)
    if error is not None:
        return _AFTER_STOP.get(
            error["kind"], "see the error below; `watcher status` shows the state"
        )
    if doc.for_agent:
        return (
            f"{doc.for_agent} comment(s) wait for the agent: claim them over MCP (tool claim) or "
            "`watcher claim`"
        )
    if doc.spent:
        ids = " ".join(doc.spent[:3]) + (" …" if len(doc.spent) > 3 else "")
        return (
            f"{len(doc.spent)} comment(s) spent their last attempt without a verdict ({ids}): only "
            f"`watcher grant {doc.spent[0]}` tries one again — `watcher show {doc.spent[0]}` first"
        )
    if needs:
        return f"`watcher inbox` shows the {needs} new comment(s) that need a reply"
    if any(i.outcome == "error" for i in doc.items):
        return "`watcher recheck` later retries the failed ones (3 attempts per comment in all)"
    if doc.unmarked:
        return (
            "nothing new needs you; `watcher inbox` lists what still waits for a reply (from "
            f"{doc.unmarked} "
            "checked comment(s) you have not marked)"
        )
    return "nothing needs you now"


def demo(doc: DemoResult, screen: Screen) -> None:
    calls = sum(run.calls for run in doc.scans)
    answered = sum(run.answered for run in doc.scans)
    if calls:
        screen.out.print(
            f"demo: {calls} bundled sample comments checked with the offline classifier, through "
            "the real "
            f"pipeline, in {doc.data_dir}"
        )
    else:
        screen.out.print(
            "demo: the bundled sample comments were checked by an earlier `watcher demo` in "
            f"{doc.data_dir} "
            "(nothing new to check; remove that directory to see it afresh)"
        )
    if doc.account_data_dir:
        screen.out.print(
            f"      your data dir {doc.account_data_dir} (WATCHER_DATA_DIR) was not touched"
        )
    if answered:
        screen.out.print(
            f"      {answered} more the author had already answered on dev.to: never sent to the "
            "model"
        )
    screen.out.print("")
    inbox(doc.inbox, screen)
    screen.out.print("")
    screen.out.print("This was the sample, offline; remove it with:")
    # A command to copy is one line, however wide (soft_wrap: printed as given).
    screen.out.print(f"    rm -rf {doc.data_dir}", soft_wrap=True)
    if doc.account_ready:
        screen.out.print(
            "Your own comments: `watcher check` tests your setup for free, then `watcher scan`."
        )
    else:
        screen.out.print(
            "Your own comments: set DEVTO_USERNAME and WATCHER_PROVIDER (and its key), run "
            "`watcher check`, "
            "then `watcher scan` — `watcher --help` lists every setting."
        )


def claim(doc: ClaimResult, screen: Screen) -> None:
    for c in doc.claimed:
        screen.out.print(f"{c.id}  attempt {c.n}  claimed until {c.lease_until}")
    for item in doc.items:
        screen.out.print(f"{item.id}  {item.outcome}: {describe(item)}")
    if not doc.claimed:
        screen.out.print(
            "nothing to claim: no comment waits for a verdict"
            + (" that is free now" if doc.items else "")
        )
        return
    more = f" · {doc.remaining} more wait (claim again)" if doc.remaining else ""
    screen.out.print(f"claimed {len(doc.claimed)} (lease {doc.lease_minutes} min){more}")
    screen.out.print(
        "prompts: each is in `watcher show ID --json` (prompt.system, prompt.user; `claim --json` "
        "gives them "
        "with the verdict schema). Answer with `watcher submit ID N VERDICT` before the lease ends"
    )


def submit(doc: SubmitResult, screen: Screen) -> None:
    head = f"{doc.id} attempt {doc.n}: "
    if doc.verdict:
        screen.out.print(head + "verdict stored — " + said(doc.verdict))
    else:
        screen.out.print(head + f"{doc.kind}: {one_line(doc.message)}")
    screen.out.print(
        f"state {doc.state} · {doc.attempts} attempt(s) used, {doc.attempts_left} left"
    )
