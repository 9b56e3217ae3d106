"""Human output: a progress bar on stderr during a batch, short tables on stdout after.

Imported only by the human front end, so ``--json`` runs and the bridge never load rich.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from watcher.commands.envelope import EnvelopeError
from watcher.commands.results import (
    ArticlesResult,
    BatchResult,
    CheckResult,
    ClaimResult,
    CommentRecord,
    CronResult,
    DemoResult,
    EvalGroup,
    EvalResult,
    GrantResult,
    InboxResult,
    ItemResult,
    ItemVerdict,
    MarkResult,
    SignalsResult,
    StatusResult,
    SubmitResult,
)
from watcher.models import Verdict
from watcher.util.timeutil import local_minutes
from watcher.util.visible import visible


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the front end ends quietly with the command's own exit code.
        raise BrokenPipeError

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Every string rich draws passes here (print, table cells and their measuring, titles):
        # the render boundary of SPEC §15.5. Control and bidi characters from a comment, a name,
        # a title or a model's answer are shown as escapes (watcher.util.visible), so none reaches
        # the terminal raw. Fields shown on one line are also passed through _line first.
        # Stored times are shown local, to the minute (JSON keeps UTC). A comment's own text is
        # printed as a Text (_as_written), so a date inside it is never rewritten.
        return super().render_str(visible(local_minutes(text)), **kwargs)


# How wide output that is not a terminal (a pipe, cron's mail) may be: a table fits in it, its
# detail column cut (a wrong-model table was ~450 columns); prose lines stay whole (soft_wrap) for
# grep and for the mail reader, which wraps them itself.
PIPED_WIDTH = 120
_TTY = sys.stdout.isatty()
# markup=False: comment text and model output are untrusted and may contain "[...]". On a terminal
# rich wraps at word boundaries; colour follows rich's rules (a terminal, NO_COLOR honoured).
_out = _Console(
    highlight=False, markup=False, soft_wrap=not _TTY, width=None if _TTY else PIPED_WIDTH
)
_err = _Console(stderr=True, highlight=False, markup=False)
HIGH = "bold red"  # how a high-priority comment stands out on a terminal


def _as_written(text: str) -> Text:
    """An outside text printed as it is (its escapes made visible, nothing else changed)."""
    return Text(visible(text))


def _line(text: str | None) -> str:
    """An outside string shown on one line (a name, a title, a summary in a list or a table cell):
    a newline in it would print a line of its own, so it is shown as ``\\n`` (SPEC §15.5)."""
    return visible(text or "", one_line=True)


class BatchProgress:
    """A transient rich progress bar on stderr: which comments are with the model (up to
    ``--parallel`` at once, SPEC §15.1) and for how long (one call may take a minute); with
    --verbose, one line per item as well."""

    def __init__(self, *, verbose: bool) -> None:
        self.verbose = verbose
        self._progress: Any = None
        self._task: Any = None
        self._out: list[str] = []  # the comments whose call is out, oldest first
        self._fetching: Any = None

    def fetching(self, what: str) -> None:
        """A line while dev.to is fetched (tens of seconds on a big account: requests are paced)."""
        if _err.is_terminal:
            self._fetching = _err.status(what)
            self._fetching.start()

    def _fetched(self) -> None:
        if self._fetching is not None:
            self._fetching.stop()
            self._fetching = None

    def start(self, total: int) -> None:
        self._fetched()
        if not _err.is_terminal:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_err,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("checking comments", total=max(total, 1))

    def calling(self, comment_id: str) -> None:
        self._out.append(comment_id)
        self._describe()
        if self.verbose:
            _err.print(f"{comment_id}: calling the model")

    def advance(self, item: ItemResult) -> None:
        if (
            item.id in self._out
        ):  # one of this run's calls came back (or was cut): it counts as done
            self._out.remove(item.id)
            self._describe()
            if self._progress is not None:
                self._progress.advance(self._task)
        if self.verbose:
            _err.print(f"{item.id}: {item.outcome}" + (f" ({item.kind})" if item.kind else ""))

    def _describe(self) -> None:
        if self._progress is None:
            return
        out = self._out
        if not out:
            text = "checking comments"
        elif len(out) == 1:
            text = f"asking the model about {out[0]}"
        else:
            text = f"{len(out)} calls out: {', '.join(out[:3])}{' …' if len(out) > 3 else ''}"
        self._progress.update(self._task, description=text)

    def stop(self) -> None:
        self._fetched()
        if self._progress is not None:
            self._progress.stop()


def human(command: str, result: BaseModel, error: EnvelopeError | None = None) -> None:
    """Print ``command``'s result for a person; the model it returned says which way."""
    if isinstance(result, BatchResult):
        _batch(result, error)  # the one view that shows the run's error beside its summary
        return
    show = _VIEWS.get(type(result))
    if show is None:
        raise TypeError(f"{command}: no human rendering for {type(result).__name__}")
    show(result)


def says_its_own_errors(result: BaseModel | None) -> bool:
    """Whether a result's view prints its errors itself: cron says each problem once, its own way."""
    return isinstance(result, CronResult)


def _said(verdict: ItemVerdict | Verdict) -> str:
    need = "needs a reply" if verdict.needs_reply else "no reply needed"
    return f"{need} · {verdict.category} · {verdict.priority}: {_line(verdict.summary)}"


def _detail(item: ItemResult) -> str:
    if item.verdict:
        return _said(item.verdict)
    if item.kind and item.message:
        return f"{item.kind}: {_line(item.message)}"
    return item.kind or _line(item.message)


def _cells(item: ItemResult) -> tuple[str, str, str]:
    """An item's comment, outcome and attempts columns (attempts blank where it has none)."""
    return item.id, item.outcome, "" if item.attempts is None else str(item.attempts)


def _batch(doc: BatchResult, error: EnvelopeError | None = None) -> None:
    if doc.items:
        table = Table(title=f"{doc.command} ({doc.provider} {doc.model})")
        used = 4 * 3 + 1  # borders and padding of four columns
        rows = [_cells(item) for item in doc.items]
        for column, name in enumerate(("comment", "outcome", "attempts")):
            # These never shrink: the detail column gives way on a narrow terminal.
            width = max([len(name), *(len(row[column]) for row in rows)])
            table.add_column(name, no_wrap=True, min_width=width)
            used += width
        table.add_column("detail", no_wrap=True)
        room = max(20, _out.width - used)
        for item, row in zip(doc.items, rows, strict=True):
            # One line per comment: the summary is cut to the terminal's width, not wrapped.
            detail = _detail(item)
            if (
                item.outcome == "not_started"
                and error is not None
                and item.message == error["message"]
            ):
                detail = (
                    "not reached: the run stopped (the reason is below)"  # said once, on stderr
                )
            detail = detail if len(detail) <= room else detail[: room - 1] + "…"
            table.add_row(*row, detail)
        _out.print(table, soft_wrap=False)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(doc.counts.items())) or "nothing to do"
    if doc.articles == 0:
        counts += " (the account has no published articles: check DEVTO_USERNAME if it should)"
    verb = "would call" if doc.dry_run else "model calls"
    calls = len(doc.would_call) if doc.dry_run else doc.calls
    line = f"{verb}: {calls} (limit {doc.limit}) · {counts}"
    if doc.discovered:
        line += f" · new comments: {doc.discovered}"
    if doc.remaining:
        line += f" · remaining: {doc.remaining} (run again)"
    if doc.repaired:
        line += f" · seen.json brought up to date from inbox/: {len(doc.repaired)}"
    if doc.baseline:
        line += f" · baseline (older than the backlog window, not checked): {doc.baseline}"
    if doc.answered:
        line += f" · already answered by you: {doc.answered}"
    if doc.replied:
        line += f" · marked replied (you answered on dev.to): {len(doc.replied)}"
    if doc.for_agent:
        line += f" · waiting for the agent: {doc.for_agent}"
    _out.print(line)
    if not doc.dry_run:
        _out.print(f"next: {_next_step(doc, error)}")


# What to do after a run stopped, by the error's kind: each says what is true of that stop.
_AFTER_STOP: dict[str, str] = {
    "provider_setup": "fix the setup named below, then `watcher check` (free) before the next run",
    "config": "fix the setting named below, then `watcher check` (free) before the next run",
    "usage": "fix the command line (`watcher COMMAND -h` has examples)",
    "provider_unavailable": "wait: the next run checks the provider for free before it spends an attempt",
    "rate_limited": "wait: no model call until the cooldown named below ends; the run after it calls again",
    "cooldown": "wait: no model call until the cooldown named below ends; the run after it calls again",
    "quota_exhausted": "raise the plan's spend limit or wait until the quota renews; no call until then",
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
            f"nothing new needs you; `watcher inbox` lists what still waits for a reply (from {doc.unmarked} "
            "checked comment(s) you have not marked)"
        )
    return "nothing needs you now"


def _demo(doc: DemoResult) -> None:
    calls = sum(run.calls for run in doc.scans)
    answered = sum(run.answered for run in doc.scans)
    if calls:
        _out.print(
            f"demo: {calls} bundled sample comments checked with the offline classifier, through the real "
            f"pipeline, in {doc.data_dir}"
        )
    else:
        _out.print(
            f"demo: the bundled sample comments were checked by an earlier `watcher demo` in {doc.data_dir} "
            "(nothing new to check; remove that directory to see it afresh)"
        )
    if doc.account_data_dir:
        _out.print(f"      your data dir {doc.account_data_dir} (WATCHER_DATA_DIR) was not touched")
    if answered:
        _out.print(
            f"      {answered} more the author had already answered on dev.to: never sent to the model"
        )
    _out.print("")
    _inbox(doc.inbox)
    _out.print("")
    _out.print(f"This was the sample, offline; remove it with: rm -rf {doc.data_dir}")
    if doc.account_ready:
        _out.print(
            "Your own comments: `watcher check` tests your setup for free, then `watcher scan`."
        )
    else:
        _out.print(
            "Your own comments: set DEVTO_USERNAME and WATCHER_PROVIDER (and its key), run `watcher check`, "
            "then `watcher scan` — `watcher --help` lists every setting."
        )


def _status(doc: StatusResult) -> None:
    s = doc.settings
    provider = f"{s.provider} ({s.model})" + (
        " — offline heuristic, not a language model" if s.offline else ""
    )
    if s.provider == "agent":
        provider += (
            " — the agent you work with gives the verdicts (MCP claim/submit, or `watcher claim`)"
        )
    _out.print(f"data dir:  {s.data_dir}")
    _out.print(f"provider:  {provider}")
    if doc.offline_quality:
        _out.print(f"quality:   {doc.offline_quality}")
    if s.api_key_from:
        _out.print(f"key:       from {s.api_key_from} (never shown)")
    _out.print(f"comments:  {doc.comments} on {doc.articles} article(s)")
    _out.print("states:    " + ", ".join(f"{k} {v}" for k, v in doc.states.items()))
    _out.print("triage:    " + ", ".join(f"{k} {v}" for k, v in doc.triage.items()))
    _out.print(f"cooldown:  {'until ' + doc.cooldown.until if doc.cooldown else 'none'}")
    breaker = doc.breaker
    if breaker:
        _out.print(
            f"breaker:   OPEN since {breaker.since} ({breaker.kind}): {_line(breaker.message)} — "
            "no model call until a free probe passes; `watcher check` tests it now"
        )
    claimed = doc.claimed
    if claimed.in_flight or claimed.lease_ended:
        _out.print(
            f"claimed:   {claimed.in_flight} in flight with an agent (first lease ends "
            f"{claimed.earliest_lease_until or '-'}), {claimed.lease_ended} lease(s) ended without a "
            "submit (the next run closes them as interrupted)"
        )
    counts = doc.signals.counts
    _out.print(
        "signals:   "
        + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none counted yet")
        + " (what the runs recorded; `watcher signals -h`)"
    )
    if doc.signals.warning:
        _out.print(f"warning:   {doc.signals.warning}")


def _inbox(doc: InboxResult) -> None:
    waiting = {k: v for k, v in doc.unresolved.items() if v}
    if doc.new and not doc.comments:
        return  # cron mails only what is new: nothing new, no output, no mail
    if not doc.comments:
        _out.print(
            "Nothing needs a reply." if not doc.all else "No comments yet: run `watcher scan`."
        )
    if waiting and not doc.all and not doc.new:
        # "Nothing needs a reply" must never hide comments that have no verdict (SPEC §13).
        states = ", ".join(f"{n} {state}" for state, n in waiting.items())
        _out.print(f"Not yet checked: {states} — `watcher inbox --all` lists them with the reason.")
    if not doc.comments:
        return
    for row in doc.comments:
        v = row.verdict
        rest = f"  {v.category if v else '-':<10}  @{_line(row.author)}"
        if row.answers_you:
            rest += "  answers your comment"
        if doc.all:
            rest += f"  [{row.state}, {row.triage}]"
            if row.verdict_by:
                rest += f"  verdict by {row.verdict_by}"
        priority = v.priority if v else "-"
        _out.print(
            Text.assemble(
                f"{row.id}  ", (f"{priority:<6}", HIGH if priority == "high" else ""), rest
            )
        )
        _out.print(f"    {_line(v.summary) if v else '(no verdict yet)'}")
        if v and v.reply_hint:
            _out.print(f"    hint: {_line(v.reply_hint)}")
        _out.print(f"    {_line(row.url)}  (on “{_line(row.article)}”)")
        if row.hint:
            _out.print(f"    {row.hint}")
    _out.print(
        f"{doc.count} comment(s)"
        + (
            ""
            if doc.all
            else " need a reply · `watcher show ID` for the "
            "whole text · `watcher mark ID replied` (or ignored) when done"
        )
    )


def _show(doc: CommentRecord) -> None:
    c = doc.comment
    _out.print(f"{c.id} by {_line(c.author)} on “{_line(c.article_title)}” ({c.created_at})")
    _out.print(_line(c.url))
    _out.print(
        f"state: {doc.state} · triage: {doc.triage} · attempts: {len(doc.attempts)}/{doc.cap}"
    )
    if doc.gone:
        _out.print(
            f"{doc.gone.kind} on dev.to: {_line(doc.gone.why)} (first seen so at {doc.gone.seen_at}); "
            "kept here, never called again"
        )
    if doc.parent:
        p = doc.parent
        who = "you" if p.yours else (f"@{_line(p.author)}" if p.author else "someone")
        _out.print(
            f"in reply to {p.id} by {who}" + (" — it answers your comment" if p.yours else "") + ":"
        )
        for line in (p.excerpt or "(its text is not known here)").splitlines():
            _out.print(f"  > {_line(line)}")
    _out.print("")
    _out.print(_as_written(c.text))
    if doc.verdict:
        v = doc.verdict
        _out.print("")
        by = f" — verdict by {doc.verdict_by}" if doc.verdict_by else ""
        _out.print(
            Text.assemble(
                f"verdict: needs_reply={v.needs_reply} {v.category} ",
                (v.priority, HIGH if v.priority == "high" else ""),
                f": {_line(v.summary)}{by}",
            )
        )
        if v.reply_hint:
            _out.print(f"reply hint: {_line(v.reply_hint)}")
    if doc.replied_at:
        _out.print(f"you replied at {doc.replied_at} (seen on dev.to)")
    for r in doc.your_replies:
        _out.print(f"your reply {r.id} at {r.created_at}:")
        for line in r.excerpt.splitlines():
            _out.print(f"  > {_line(line)}")
    for n, e in enumerate(doc.edits, 1):
        said = f"verdict then: {_said(e.verdict)}" if e.verdict else "no verdict then"
        then = "judged again" if e.judged else "not judged again (you had replied or marked it)"
        _out.print(
            f"edit {n}, seen at {e.seen_at} after {e.attempts} attempt(s) — {then}; {said}; the text before:"
        )
        for line in e.text.splitlines() or [""]:
            _out.print(f"  | {_line(line)}")
    if doc.hint:
        _out.print(doc.hint)
    for a in doc.attempts:
        what = a.outcome or (
            "reserved" + (f", claimed until {a.lease_until}" if a.lease_until else "")
        )
        if a.error:
            what += f" {a.error.kind}: {_line(a.error.message)}"
        _out.print(
            f"attempt {a.n}: {a.command} via {a.entrypoint} ({a.provider}) at {a.reserved_at} → {what}"
        )


def _check(doc: CheckResult) -> None:
    if not _TTY:  # whole lines in a pipe (grep, mail), as every other view prints them there
        for c in doc.checks:
            _out.print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<10}  {_line(c.detail)}")
            if c.fix and not c.ok:
                _out.print(f"{'':16}fix: {c.fix}")
    else:
        # A borderless table: on a narrow terminal a long detail wraps under itself, not under "ok".
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
        for _ in range(3):
            table.add_column()
        for c in doc.checks:
            table.add_row(
                "ok" if c.ok else "FAIL",
                c.name,
                _line(c.detail) + (f"\nfix: {c.fix}" if c.fix and not c.ok else ""),
            )
        with _out.capture() as drawn:
            _out.print(table)
        for line in drawn.get().splitlines():  # without the padding rich puts after the last column
            _out.print(line.rstrip(), soft_wrap=True)
    _out.print("all checks passed" if doc.ok else "some checks failed")


def _claim(doc: ClaimResult) -> None:
    for c in doc.claimed:
        _out.print(f"{c.id}  attempt {c.n}  claimed until {c.lease_until}")
    for item in doc.items:
        _out.print(f"{item.id}  {item.outcome}: {_detail(item)}")
    if not doc.claimed:
        _out.print(
            "nothing to claim: no comment waits for a verdict"
            + (" that is free now" if doc.items else "")
        )
        return
    more = f" · {doc.remaining} more wait (claim again)" if doc.remaining else ""
    _out.print(f"claimed {len(doc.claimed)} (lease {doc.lease_minutes} min){more}")
    _out.print(
        "prompts: each is in `watcher show ID --json` (prompt.system, prompt.user; `claim --json` gives them "
        "with the verdict schema). Answer with `watcher submit ID N VERDICT` before the lease ends"
    )


def _submit(doc: SubmitResult) -> None:
    head = f"{doc.id} attempt {doc.n}: "
    if doc.verdict:
        _out.print(head + "verdict stored — " + _said(doc.verdict))
    else:
        _out.print(head + f"{doc.kind}: {_line(doc.message)}")
    _out.print(f"state {doc.state} · {doc.attempts} attempt(s) used, {doc.attempts_left} left")


def _grant(doc: GrantResult) -> None:
    _out.print(
        f"{doc.id}: {doc.granted} more attempt(s) granted — {doc.attempts} of {doc.cap} "
        f"used, now {doc.state}; `watcher recheck {doc.id}` tries it"
    )


def _signals(doc: SignalsResult) -> None:
    if not doc.counts:
        _out.print("no signals counted yet")
    for key, n in sorted(doc.counts.items()):
        _out.print(f"{n:>8}  {_line(key)}")
    if doc.invalid:
        _out.print(f"{doc.invalid:>8}  (invalid lines)")


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _eval(doc: EvalResult) -> None:
    run = doc.labelled_set
    if run is not None:
        cost = "free" if run.provider == "offline" else f"budget {run.call_budget}"
        where = run.data_dir or "a temporary data dir, removed"
        _out.print(
            f"labelled set {run.path}: {run.comments} comments, {run.needs_reply} need a reply · judged by "
            f"{run.provider} {run.model} · {run.calls} call(s) ({cost}) in {where}"
        )
        for name, base in (("always yes", run.always_yes), ("always no", run.always_no)):
            _out.print(
                f"    for comparison, {name}: agreement {_figure(base.agreement)} · precision "
                f"{_figure(base.precision)} · recall {_figure(base.recall)}"
            )
        if run.held_out is not None:
            held = run.held_out
            _out.print(
                f"    on the {held.judged} held-out comments (written after the offline rules were last "
                f"changed): agreement {_figure(held.agreement)} · precision {_figure(held.precision)} · "
                f"recall {_figure(held.recall)}"
            )
    since = f" created since {doc.since}" if doc.since else ""
    _out.print(
        f"{doc.comments} comment(s){since}: {doc.judged} judged (a verdict and your reply or mark) · "
        f"{doc.unlabelled} unlabelled (not replied to or marked: not guessed) · {doc.without_verdict} "
        "without a verdict"
    )
    if not doc.groups and not doc.judged:
        _out.print(
            "nothing to judge yet: eval compares verdicts with what you did — reply on dev.to, or "
            "`watcher mark ID replied|ignored`"
        )
    for group in doc.groups:
        _eval_group(group)
    if run is not None and run.by_kind:
        _out.print(
            "by kind (agreed/judged): "
            + ", ".join(f"{kind} {k.agreed}/{k.judged}" for kind, k in run.by_kind.items())
        )


def _eval_group(group: EvalGroup) -> None:
    c = group.confusion
    _out.print("")
    _out.print(
        f"{group.provider} {_line(group.model)} · prompt {group.prompt}: {group.judged} judged, "
        f"{group.unlabelled} unlabelled · agreement {_figure(group.agreement)} · precision "
        f"{_figure(group.precision)} · recall {_figure(group.recall)}"
    )
    _out.print(
        f"    said needs a reply: {c.true_positive} you replied, {c.false_positive} you ignored · said no "
        f"reply needed: {c.false_negative} you replied, {c.true_negative} you ignored"
    )
    for d in group.disagreements:
        said = (
            "said needs a reply, you ignored it"
            if d.said_needs_reply
            else "said no reply, you replied"
        )
        kind = f" [{d.kind}]" if d.kind else ""
        _out.print(f"    {d.id}  {said}{kind} · {d.category}: {_line(d.summary)}")


def _articles(doc: ArticlesResult) -> None:
    if not doc.articles:
        _out.print("No articles yet: run `watcher scan`.")
        return
    for a in doc.articles:
        waiting = (
            f"{a.need_reply} need a reply, the oldest {a.oldest_waiting_days:g} days"
            if a.need_reply and a.oldest_waiting_days is not None
            else "nothing waits"
        )
        _out.print(
            f"{a.id}  “{_line(a.title)}”  {a.comments} comment(s) · {waiting} · last activity "
            f"{a.last_activity or '-'}"
        )
        if a.url:
            _out.print(f"    {_line(a.url)}")
    _out.print(f"{doc.count} article(s)")


def _mark(result: MarkResult) -> None:
    _out.print(f"{', '.join(result.ids)} marked {result.triage}")


def _cron(doc: CronResult) -> None:
    # soft_wrap in a pipe: each problem stays one line in a mail, whatever width rich guesses for
    # it; a terminal wraps it at word boundaries.
    for problem in doc.problems:
        if problem.said:
            _err.print(problem.line, soft_wrap=not _err.is_terminal)
    if doc.inbox is not None:
        _inbox(doc.inbox)
    for named in doc.named:
        if named.said:
            _out.print(named.line)


# Each result model's human view (STYLE rule 11: one table, no if-chain).
_VIEWS: dict[type[BaseModel], Callable[[Any], None]] = {
    DemoResult: _demo,
    StatusResult: _status,
    InboxResult: _inbox,
    CommentRecord: _show,
    MarkResult: _mark,
    SignalsResult: _signals,
    CheckResult: _check,
    CronResult: _cron,
    ArticlesResult: _articles,
    GrantResult: _grant,
    ClaimResult: _claim,
    SubmitResult: _submit,
    EvalResult: _eval,
}
