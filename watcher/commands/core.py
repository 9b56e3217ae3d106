"""Every command as one core function, and the one place errors become exit codes.

The CLI (``watcher``) and the bridge (``watcher-bridge``, its MCP server) call :func:`execute`
with the same functions; they differ only in how they render the :class:`Envelope`. Each
command returns its model from :mod:`watcher.commands.results` (or a :class:`Partial` of it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watcher import pipeline
from watcher.commands.envelope import Envelope
from watcher.commands.results import (
    AgentClaims,
    ArticleRow,
    ArticlesResult,
    BatchResult,
    CheckResult,
    ClaimResult,
    CommentRecord,
    Cooldown,
    DemoResult,
    EvalResult,
    GrantResult,
    InboxEntry,
    InboxResult,
    MarkResult,
    Parent,
    SignalsResult,
    StatusPaths,
    StatusResult,
    StatusSignals,
    SubmitResult,
)
from watcher.config import NO_PROVIDER, Settings, load_settings
from watcher.errors import (
    EXIT_OK,
    ConfigError,
    CorruptState,
    Interrupted,
    LockBusy,
    UsageError,
    WatcherError,
    error_kind,
    exit_code_for,
)
from watcher.models import CAP, InboxRecord, SeenComment, SeenFile, State, Triage
from watcher.pipeline import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Hooks,
    Partial,
    Run,
    check_id,
    check_limit,
    new_run_id,
    open_store,
    read_cooldown,
)
from watcher.state import records
from watcher.store import Store

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "TRIAGE_CHOICES",
    "Context",
    "Envelope",
    "Partial",
    "execute",
]

TRIAGE_CHOICES: tuple[Triage, ...] = ("replied", "ignored", "open")
SAMPLE = "sample"  # --source sample: the bundled demo export
PRIORITY_ORDER = {"high": 0, "normal": 1, "low": 2}


@dataclass(kw_only=True)
class Context:
    """How a front end runs commands: where settings come from, where notices go, and the
    pipeline's hooks (progress callbacks; a provider factory in tests)."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    notice: Callable[[str], None] = lambda _msg: None
    hooks: Hooks = field(default_factory=Hooks)
    _settings: Settings | None = None
    _store: Store | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(data_dir=self.data_dir, overrides=self.overrides)
            if self._settings.data_dir_defaulted:
                self._note_state_left_in_old_default()
        return self._settings

    def _note_state_left_in_old_default(self) -> None:
        """The default data dir was ./data (SPEC §15.5): state found there but none in the new
        default is named on stderr, one line, with the command that moves it."""
        import shlex

        from watcher.config import OLD_DEFAULT_DIR, Paths

        assert self._settings is not None
        old = open_store(Paths(OLD_DEFAULT_DIR.absolute()), self.hooks)
        if (
            old.paths.root == self._settings.data_dir
            or not old.holds_state()
            or self.store.holds_state()
        ):
            return
        new = self._settings.data_dir
        there = {path.name for path in self.store.state_entries()}
        moving = [path for path in old.state_entries() if path.name not in there]
        command = (
            f"mkdir -p {shlex.quote(str(new))} && mv {' '.join(shlex.quote(str(p)) for p in moving)} "
            f"{shlex.quote(str(new))}/"
        )
        self.notice(
            f"note: {old.paths.root} holds watcher state and the default data dir {new} none — the default is "
            f"the user's data directory now, not ./data; move it with: {command} — or keep it with "
            f"WATCHER_DATA_DIR={shlex.quote(str(old.paths.root))}"
        )

    @property
    def store(self) -> Store:
        """The state of the settings' data dir (the hooks' store in tests)."""
        if self._store is None:
            self._store = open_store(self.settings.paths, self.hooks)
        return self._store


def execute(
    command: str, ctx: Context, fn: Callable[[Context], BaseModel | Partial[Any]]
) -> Envelope[Any]:
    """Run one command; never raises. ``fn`` returns a result, or a :class:`Partial` when it
    produced a result *and* must exit non-zero (a batch stopped by a 429 still has a summary)."""
    result: BaseModel | None = None
    error: BaseException | None = None
    try:
        out = fn(ctx)
        result, error = (out.result, out.error) if isinstance(out, Partial) else (out, None)
    except WatcherError as exc:
        error = exc
        signal_failure(ctx, exc)
    except KeyboardInterrupt:  # Ctrl-C outside a batch's calls (fetching, waiting for the lock)
        import signal

        error = Interrupted(signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 1
        error = exc
    if error is None:
        return Envelope(True, command, EXIT_OK, result, None)
    message = (
        str(error)
        if isinstance(error, WatcherError)
        else f"internal error: {type(error).__name__}: {error}"
    )
    return Envelope(
        False,
        command,
        exit_code_for(error),
        result,
        {"kind": error_kind(error), "message": message},
    )


def signal_failure(ctx: Context, exc: WatcherError) -> None:
    """The observation a failed command leaves (``lock.busy``, ``state.quarantined``, SPEC §8)."""
    key = (
        "lock.busy"
        if isinstance(exc, LockBusy)
        else "state.quarantined"
        if isinstance(exc, CorruptState)
        else None
    )
    if key is None or ctx._settings is None:
        return
    # The failure being reported is louder than a lost observation, and this must never raise:
    # an OSError from a read-only lock would otherwise escape and print no envelope at all.
    with contextlib.suppress(Exception):
        ctx.store.append_signals([{"key": key, "run": new_run_id(), "entrypoint": ctx.entrypoint}])


# ---- scan / recheck: arguments in, a Run to the pipeline ------------------------------------------


def scan(
    ctx: Context,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    source: str | None = None,
    since: str | None = None,
    full: bool = False,
    parallel: int | None = None,
) -> Partial[BatchResult]:
    check_limit(
        limit
    )  # a bad option first: nothing else is looked at (before the settings are read)
    _check_parallel(parallel)
    since_at = _since(since)
    if source == SAMPLE:
        ctx = _demo(ctx)
    elif source is None and not (ctx.settings.devto_username or ctx.settings.devto_api_key):
        # Cron does not inherit shell exports: scanning the sample instead would exit 0 forever.
        raise ConfigError(
            "no comment source: set DEVTO_USERNAME (or pass --source FILE); "
            "`watcher demo` shows what watcher does on the bundled sample comments"
        )
    return pipeline.scan(
        _batch_run(ctx, "scan", limit=limit, dry_run=dry_run, parallel=parallel),
        source=source,
        notice=ctx.notice,
        since=since_at,
        full=full,
    )


def _since(text: str | None) -> datetime | None:
    """``--since 2026-11-01`` (or a full ISO time): baseline comments created then or later are queued."""
    if text is None:
        return None
    from watcher.util.timeutil import parse_iso

    try:
        return parse_iso(text.strip())
    except ValueError:
        raise UsageError(
            f"--since takes a date like 2026-11-01 (or 2026-11-01T09:00:00Z), got {text!r}"
        ) from None


def recheck(
    ctx: Context,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    ids: Sequence[str] = (),
    parallel: int | None = None,
) -> Partial[BatchResult]:
    check_limit(limit)
    _check_parallel(parallel)
    return pipeline.recheck(
        _batch_run(ctx, "recheck", limit=limit, dry_run=dry_run, parallel=parallel),
        ids=ids,
        notice=ctx.notice,
    )


def _check_parallel(parallel: int | None) -> None:
    if parallel is not None:
        from watcher.config import parse_parallel

        try:
            parse_parallel(parallel)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None


def claim(ctx: Context, *, limit: int = DEFAULT_LIMIT) -> Partial[ClaimResult]:
    """Provider agent (SPEC §14): reserve attempts for the agent and hand it the prompts to judge."""
    from watcher.pipeline import agent

    check_limit(limit)
    agent.require_agent(ctx.settings.provider)
    return agent.claim(_batch_run(ctx, "claim", limit=limit, dry_run=False), notice=ctx.notice)


def submit(ctx: Context, comment_id: str, n: int, verdict: Any) -> Partial[SubmitResult]:
    """Provider agent (SPEC §14): the agent's verdict for attempt ``n`` that claim handed out."""
    from watcher.pipeline import agent

    # No provider or key check: the attempt says whether an agent claimed it, whatever is configured now.
    return agent.submit(_run_of(ctx, "submit"), comment_id, n, verdict, notice=ctx.notice)


def demo(ctx: Context) -> Partial[DemoResult]:
    """The bundled sample through the real pipeline (reservations, lock, verdicts), offline, in its
    own data dir (SPEC §13.4), then what needs a reply. Runs scan until nothing is left."""
    ready, account_dir = False, None
    with contextlib.suppress(WatcherError):  # a broken real setup does not stop the demo
        real = load_settings(overrides=ctx.overrides)  # the account's, not the demo's --data-dir
        ready = bool(real.devto_username or real.devto_api_key) and not real.provider_defaulted
        account_dir = None if real.data_dir_defaulted else str(real.data_dir)
    ctx = _demo(ctx)
    runs: list[BatchResult] = []
    error: WatcherError | None = None
    while len(runs) < 5:  # 23 sample comments at 20 calls a run: two runs
        out = pipeline.scan(
            _batch_run(ctx, "scan", limit=MAX_LIMIT, dry_run=False),
            source=SAMPLE,
            notice=ctx.notice,
        )
        runs.append(out.result)
        error = out.error
        if error is not None or not out.result.remaining:
            break
    return Partial(
        DemoResult(
            data_dir=str(ctx.settings.data_dir),
            scans=runs,
            inbox=inbox_view(ctx),
            account_ready=ready,
            account_data_dir=account_dir,
        ),
        error,
    )


def _demo(ctx: Context) -> Context:
    from dataclasses import replace

    from watcher.config import demo_settings

    return replace(ctx, _settings=demo_settings(ctx.data_dir), _store=None)


def _batch_run(
    ctx: Context,
    command: pipeline.Command,
    *,
    limit: int,
    dry_run: bool,
    parallel: int | None = None,
) -> Run:
    """A run that may call the model: the provider choice and the key are checked first (the
    command checked its limit before reading any setting)."""
    settings = ctx.settings
    if settings.provider_defaulted:
        raise ConfigError(f"{NO_PROVIDER}; `watcher check` tests the setup")
    if not dry_run:
        settings.require_key()  # before any work; read-only commands never need a key
    return _run_of(
        ctx, command, limit=limit, dry_run=dry_run, parallel=parallel or settings.parallel
    )


def _run_of(
    ctx: Context,
    command: pipeline.Command,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    parallel: int = 1,
) -> Run:
    return Run(
        settings=ctx.settings,
        store=ctx.store,
        command=command,
        entrypoint=ctx.entrypoint,
        run_id=new_run_id(),
        limit=limit,
        parallel=parallel,
        dry_run=dry_run,
        hooks=ctx.hooks,
    )


# ---- read commands and marks -----------------------------------------------------------------------


def _repaired_index(ctx: Context) -> SeenFile:
    """The reconciled index; a repair found here is saved (every command repairs the index, §4.2)."""
    settings, store = ctx.settings, ctx.store
    if not store.exists():
        # `cd /tmp; watcher inbox` said "Nothing needs a reply." about a directory that is not there.
        ctx.notice(
            f"note: data dir {settings.data_dir} does not exist (yet): nothing has been scanned there — "
            "check --data-dir / WATCHER_DATA_DIR, or run `watcher scan`"
        )
    base = store.load_index()
    index, changed = store.reconcile_index(base)
    if changed:
        index = store.save_index(base, index)
    return index


def status(ctx: Context) -> StatusResult:
    settings, store = ctx.settings, ctx.store
    index = _repaired_index(ctx)
    states: dict[State, int] = dict.fromkeys(State.__args__, 0)  # type: ignore[attr-defined]
    triage: dict[Triage, int] = dict.fromkeys(TRIAGE_CHOICES, 0)
    for entry in index.comments.values():
        states[entry.status] += 1
        triage[entry.triage] += 1
    from watcher.pipeline import provider_state
    from watcher.util.timeutil import utcnow

    state = store.load_provider_state()
    cooldown = read_cooldown(
        store, state, now=(ctx.hooks.clock or utcnow)()
    )  # the clock batches judge it by
    breaker = provider_state.breaker_of(settings, state)
    counted = store.read_signal_state()
    trouble = store.signal_trouble(counted)  # no lock, no count: a warning, never exit 5
    signal_doc = StatusSignals(
        counts=counted.counts if counted else {},
        invalid=counted.invalid if counted else 0,
        warning=trouble or None,
    )
    return StatusResult(
        comments=len(index.comments),
        articles=len(index.articles),
        states=states,
        triage=triage,
        cooldown=Cooldown(until=cooldown.until, reason=cooldown.reason) if cooldown else None,
        breaker=breaker,
        claimed=_claims(ctx, index),
        signals=signal_doc,
        settings=settings.public(),
        paths=StatusPaths(
            data_dir=str(settings.data_dir),
            inbox=str(settings.paths.inbox),
            seen=str(settings.paths.seen),
            observations=str(settings.paths.observations),
        ),
        offline_quality=_offline_quality() if settings.provider == "offline" else None,
    )


def _offline_quality() -> str:
    from watcher.providers.offline import MEASURED

    return (
        f"{MEASURED.said()} ({MEASURED.comments} comments, {MEASURED.held_out} of them unseen while its rules "
        "were written; `watcher eval --set bundled` measures it)"
    )


def _claims(ctx: Context, index: SeenFile) -> AgentClaims:
    """Attempts agents hold (SPEC §14): in flight (lease running, earliest end) or lease ended.

    Reads only the inbox files of reserved comments — a handful, not every file: status stays
    cheap at 50k comments. Which provider gave each verdict is in `inbox --all` and `show`
    (``verdict_by``), which read the files anyway."""
    from watcher.util.timeutil import utcnow

    now = (ctx.hooks.clock or utcnow)()  # leases are judged by the hooks' clock, as in a batch
    in_flight: list[str] = []
    ended = 0
    for cid, entry in index.comments.items():
        if entry.status != "reserved":
            continue
        record = ctx.store.load_record(cid)
        last = record.attempts[-1] if record and record.attempts else None
        if last is None or last.lease_until is None or last.outcome is not None:
            continue
        if records.lease_active(last, now):
            in_flight.append(last.lease_until)
        else:
            ended += 1
    return AgentClaims(
        in_flight=len(in_flight),
        earliest_lease_until=min(in_flight, default=None),
        lease_ended=ended,
    )


def inbox_view(ctx: Context, *, show_all: bool = False, new: bool = False) -> InboxResult:
    """What needs a reply (``show_all``: every comment). ``new``: only what no earlier ``--new``
    listed, and remember these as listed — for a cron line that mails its output."""
    if show_all and new:
        raise UsageError(
            "--new lists only comments needing a reply; it cannot be combined with --all"
        )
    store = ctx.store
    index = _repaired_index(ctx)
    rows: list[InboxEntry] = []
    for cid, entry in index.comments.items():
        if not show_all and (entry.status not in LISTABLE or entry.triage != "open"):
            continue
        if new and entry.listed_at is not None:
            continue
        record = store.load_record(cid)
        if record is None:
            continue
        if not show_all and not needs_reply(record, entry):
            continue
        verdict = record.verdict or (record.edits[-1].verdict if entry.status == "edited" else None)
        rows.append(
            InboxEntry(
                id=cid,
                state=entry.status,
                triage=entry.triage,
                attempts=entry.attempts,
                author=record.comment.author,
                article=record.comment.article_title,
                url=record.comment.url,
                created_at=record.comment.created_at,
                verdict=verdict,
                verdict_by=records.verdict_by(record),
                hint=_hint(cid, entry.status, record),
                answers_you=record.comment.answers_author,
                next_due=pipeline.next_due(record) if entry.status == "failed" else None,
            )
        )
    if new and rows:
        claimed = set(store.claim_listed([r.id for r in rows]))
        rows = [r for r in rows if r.id in claimed]
    rows.sort(
        key=lambda r: (PRIORITY_ORDER[r.verdict.priority if r.verdict else "low"], r.created_at)
    )
    # Not "edited": those are listed (their new text unread), with the grant hint.
    unresolved: dict[State, int] = dict.fromkeys(
        ("pending", "failed", "reserved", "exhausted", "baseline"), 0
    )
    for entry in index.comments.values():
        if entry.status in unresolved:
            unresolved[entry.status] += 1
    return InboxResult(all=show_all, new=new, count=len(rows), comments=rows, unresolved=unresolved)


# What `watcher inbox` may list (SPEC §15.2): a verdict that says reply, an edited comment whose new
# text no attempt is left for, or one the person reopened with `mark open` after the author answered.
LISTABLE = frozenset({"done", "edited", "answered"})


def needs_reply(record: InboxRecord, entry: SeenComment) -> bool:
    """Whether ``watcher inbox`` lists the comment: open, on dev.to, and its verdict says reply — or
    it was edited and cannot be judged again (its new text is unread), or the person reopened it
    (``mark open``; a person's mark wins over the verdict and over dev.to's reply until a later one)."""
    if entry.triage != "open" or entry.status not in LISTABLE:
        return False
    if entry.status == "edited":
        return True
    if entry.triage_by == "person":
        return True
    return record.verdict is not None and record.verdict.needs_reply


def _hint(comment_id: str, state: str, record: InboxRecord) -> str | None:
    if state in ("deleted", "hidden") and record.gone is not None:
        return f"{state} on dev.to ({record.gone.why}), first seen so at {record.gone.seen_at}: never called again"
    if state == "edited":
        return (
            "edited on dev.to after its verdict, and no attempt is left for the new text: the verdict shown is "
            f"the old text's — read it with `watcher show {comment_id}`; `watcher grant {comment_id}` lets the "
            "next scan judge it (your decision; agents cannot)"
        )
    if records.edit_on_hold(record) or (record.edits and not record.edits[-1].judged):
        return (
            "edited on dev.to after you replied or marked it: the new text is shown, not judged again "
            f"(`watcher show {comment_id}` has both)"
        )
    if state == "exhausted" and records.grant_refusal(record, 1) is not None:
        return (
            f"all attempts spent without a verdict, {CAP} + {records.MAX_GRANTED} granted: the most a "
            "comment gets — read it with `watcher show`"
        )
    if state == "exhausted":
        return (
            f"all attempts spent without a verdict — `watcher grant {comment_id}` gives it another try "
            "(your decision; agents cannot)"
        )
    if state == "baseline":
        return (
            "baseline: older than the first scan's backlog window (WATCHER_BACKLOG_DAYS), so never sent to "
            "the model — `watcher scan --since DATE` queues the ones created since DATE"
        )
    if state == "answered":
        return "you had already replied on dev.to before it was checked: no model call was needed"
    return None


def show(ctx: Context, comment_id: str) -> CommentRecord:
    check_id(comment_id)
    store = ctx.store
    record = store.load_record(comment_id)
    if record is None:
        raise UsageError(
            f"no comment {comment_id} in {store.paths.inbox} — `watcher inbox --all` lists them"
        )
    index = _repaired_index(ctx)
    entry = index.comments.get(comment_id)
    state = records.state_of(record)
    lease = records.open_lease(record)
    # The file leaves this release's fields out while unused (models._unset); the result has them all.
    return CommentRecord(
        schema_version=record.schema_version,
        comment=record.comment,
        prompt=record.prompt,
        cap=records.cap_of(record),
        attempts=record.attempts,
        verdict=record.verdict,
        grants=record.grants,
        baseline=record.baseline,
        state=state,
        verdict_by=records.verdict_by(record),
        hint=(
            f"attempt {len(record.attempts)} is claimed by an agent until {lease}: its verdict comes by "
            "submit; after that time the next run closes it as interrupted"
            if lease
            else _hint(comment_id, state, record)
        ),
        triage=entry.triage if entry else "open",
        triage_by=entry.triage_by if entry else None,
        replied_at=(entry.replied_at if entry else None) or record.replied_at,
        parent=_parent_of(store, record),
        your_replies=record.author_replies,
        edits=record.edits,
        gone=record.gone,
        next_due=pipeline.next_due(record) if state == "failed" else None,
    )


def _parent_of(store: Store, record: InboxRecord) -> Parent | None:
    """The comment it replies to: as the thread showed it at discovery, else from its own inbox file."""
    c = record.comment
    if c.parent_id is None:
        return None
    author, excerpt = c.parent_author, c.parent_excerpt
    if author is None or excerpt is None:
        try:
            parent = store.load_record(c.parent_id)
        except WatcherError:
            parent = None  # a broken parent file must not break show
        if parent is not None:
            from watcher.source._parse import excerpt as first_lines

            author, excerpt = (
                author or parent.comment.author,
                excerpt or first_lines(parent.comment.text),
            )
    return Parent(id=c.parent_id, author=author, excerpt=excerpt, yours=c.answers_author)


def mark(ctx: Context, comment_ids: str | Sequence[str], triage: str) -> MarkResult:
    """The person's triage for one or more comments: every id is checked before anything is written,
    and one unknown id fails the whole command (SPEC §15.2)."""
    ids = [comment_ids] if isinstance(comment_ids, str) else list(dict.fromkeys(comment_ids))
    if not ids:
        raise UsageError("mark needs at least one comment id")
    for cid in ids:
        check_id(cid)
    if triage not in TRIAGE_CHOICES:
        raise UsageError(f"mark takes one of {', '.join(TRIAGE_CHOICES)}, got {triage!r}")
    from watcher.util.timeutil import iso

    # The mark's time is set against the author's replies on dev.to (the later wins, SPEC §15.2):
    # the run's clock, as batches judge leases and cooldowns by.
    entries = ctx.store.patch_triages(
        ids, triage, at=iso(ctx.hooks.clock()) if ctx.hooks.clock else None
    )
    if entries is None:
        known = ctx.store.load_index().comments
        missing = [cid for cid in ids if cid not in known and not ctx.store.has_record(cid)]
        raise UsageError(
            f"no comment {', '.join(missing) or ids[0]} — nothing was marked; "
            "`watcher inbox --all` lists the known ones"
        )
    return MarkResult(ids=ids, triage=triage, states={cid: e.status for cid, e in entries.items()})


def articles(ctx: Context) -> ArticlesResult:
    """Per article: its comments, how many need a reply, the oldest one waiting, the last activity
    (SPEC §15.2). Free: reads the index and the inbox files of what is listed, calls nothing."""
    from watcher.util.timeutil import parse_iso, utcnow

    store = ctx.store
    index = _repaired_index(ctx)
    now = (ctx.hooks.clock or utcnow)()
    rows: dict[int, dict[str, Any]] = {}
    for key, known in index.articles.items():
        rows[int(key)] = {
            "title": known.title,
            "url": known.url,
            "last": known.last_comment_at,
            "n": 0,
            "waiting": [],
        }
    for cid, entry in index.comments.items():
        row = rows.setdefault(
            entry.article_id, {"title": "", "url": None, "last": None, "n": 0, "waiting": []}
        )
        if entry.status in ("deleted", "hidden"):
            continue
        row["n"] += 1
        if entry.triage != "open" or entry.status not in LISTABLE:
            continue
        record = store.load_record(cid)
        if record is None:
            continue
        if not row["title"]:
            row["title"], row["url"] = record.comment.article_title, record.comment.article_url
        row.setdefault("newest", record.comment.created_at)
        if needs_reply(record, entry):
            row["waiting"].append(record.comment.created_at)
    out = []
    for aid, row in rows.items():
        oldest = min(row["waiting"], key=_sort_time, default=None)
        age = (
            None if oldest is None else round((now - parse_iso(oldest)).total_seconds() / 86400, 1)
        )
        out.append(
            ArticleRow(
                id=aid,
                title=row["title"],
                url=row["url"],
                comments=row["n"],
                need_reply=len(row["waiting"]),
                oldest_waiting=oldest,
                oldest_waiting_days=age,
                last_activity=row["last"] or row.get("newest"),
            )
        )
    out.sort(
        key=lambda r: (
            r.oldest_waiting_days is None,
            -(r.oldest_waiting_days or 0),
            -r.need_reply,
            -_sort_time(r.last_activity).timestamp() if r.last_activity else 0,
        )
    )
    return ArticlesResult(count=len(out), articles=out)


def _sort_time(text: str | None) -> datetime:
    from datetime import UTC

    from watcher.util.timeutil import parse_iso

    try:
        return parse_iso(text) if text else datetime.min.replace(tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def check(ctx: Context) -> Partial[CheckResult]:
    """Every free check (config, key, provider probe, dev.to user, data dir); exit 0 only if all pass."""
    from watcher.commands.checks import run_checks

    return Partial(*run_checks(ctx.data_dir, ctx.overrides, ctx.hooks.make_provider))


def grant(
    ctx: Context,
    comment_id: str,
    *,
    attempts: int = 1,
    confirm: Callable[[str], bool] | None = None,
) -> GrantResult:
    """More attempts for an exhausted or failed comment: the person's decision, never an agent's.

    ``confirm`` asks the person (the CLI's, which refuses without a terminal); ``None``: ``--yes``."""
    if ctx.entrypoint != "cli":
        raise UsageError(
            "grant is the person's decision: run `watcher grant ID` in a terminal. The bridge and "
            "the MCP server never raise a comment's budget of attempts"
        )
    check_id(comment_id)
    from watcher.pipeline.grant import grant as grant_attempts

    return grant_attempts(
        ctx.store,
        comment_id,
        attempts,
        entrypoint=ctx.entrypoint,
        run_id=new_run_id(),
        confirm=confirm,
    )


def signals_cmd(ctx: Context, *, reset: bool = False) -> SignalsResult:
    counted = ctx.store.count_signals(reset=reset)
    return SignalsResult(
        reset=reset,
        counts=counted.counts,
        invalid=counted.invalid,
        applied=counted.applied,
        new_lines=counted.new_lines,
    )


# ---- eval: how good the verdicts are (SPEC §15.6) ----------------------------------------------------


def evaluate(
    ctx: Context,
    *,
    since: str | None = None,
    labelled_set: str | None = None,
    provider: str | None = None,
    provider_calls: int | None = None,
    eval_dir: str | None = None,
) -> EvalResult | Partial[EvalResult]:
    """Stored verdicts against what the author did — free: no model call, no write. With
    ``labelled_set``: that set judged in a data dir of its own, then the same figures."""
    from watcher.util.timeutil import iso

    since_at = _since(since)
    since_text = iso(since_at) if since_at else None
    if labelled_set is None:
        stray = [
            flag
            for flag, value in (
                ("--provider", provider),
                ("--provider-calls", provider_calls),
                ("--eval-dir", eval_dir),
            )
            if value is not None
        ]
        if stray:
            raise UsageError(
                f"{', '.join(stray)} only go with --set (the labelled set); `watcher eval` alone judges "
                "the verdicts already stored and makes no call"
            )
        from watcher.commands.evaluate import evaluate as judge

        if not ctx.store.exists():
            ctx.notice(
                f"note: data dir {ctx.settings.data_dir} does not exist (yet): nothing to evaluate — check "
                "--data-dir / WATCHER_DATA_DIR"
            )
        return judge(ctx.store, since=since_at, since_text=since_text)
    from watcher.commands import labelled

    return labelled.evaluate_set(
        labelled_set,
        user=ctx.settings,
        hooks=ctx.hooks,
        entrypoint=ctx.entrypoint,
        provider=provider,
        budget=provider_calls,
        eval_dir=eval_dir,
        since=since_at,
        since_text=since_text,
    )
