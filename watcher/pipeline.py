"""scan and recheck: the one implementation of SPEC §7.

The order is the design: plan without the lock (network happens here), take the pipeline
lock, then for each comment re-read → repair / interrupted / deferred / exhausted → reserve
durably → one model call → save the outcome durably. A model call is only ever made for an
attempt that is already on disk, so no crash, kill or concurrent run can buy a fourth call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from watcher import inbox, seen
from watcher.config import Paths, Settings
from watcher.durable import quarantined_names, read_model, sweep_stale_temps, write_model
from watcher.errors import (
    ConfigError,
    CooldownActive,
    CorruptState,
    QuotaExhausted,
    RateLimited,
    SaveFailed,
    StateError,
    UsageError,
    WatcherError,
)
from watcher.inbox import Fingerprint
from watcher.locks import pipeline_lock
from watcher.models import Comment, InboxRecord, ProviderState, SeenComment, SeenFile
from watcher.providers.base import CallResult, Provider
from watcher.timeutil import iso, parse_iso, utcnow

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


@dataclass(frozen=True, kw_only=True)
class Run:
    """Who is running and how: the same for every item of one batch."""

    settings: Settings
    command: str  # "scan" | "recheck"
    entrypoint: str  # "cli" | "bridge"
    run_id: str
    on_item: Callable[[ItemResult], None] | None = None
    on_planned: Callable[[int], None] | None = None


@dataclass(frozen=True)
class Planned:
    id: str
    fingerprint: Fingerprint
    comment: Comment | None = None  # set for comments this run discovered
    parent_text: str | None = None


@dataclass
class ItemResult:
    id: str
    outcome: str
    kind: str | None = None
    message: str | None = None
    attempts: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class BatchResult:
    command: str
    dry_run: bool = False
    limit: int = DEFAULT_LIMIT
    planned: int = 0
    calls: int = 0
    remaining: int = 0
    items: list[ItemResult] = field(default_factory=list)
    discovered: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    stopped: str | None = None
    error: WatcherError | None = None
    provider: str = ""
    model: str = ""
    would_call: list[str] = field(default_factory=list)

    def add(self, item: ItemResult, run: Run) -> None:
        self.items.append(item)
        if run.on_item is not None:
            run.on_item(item)

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.outcome] = counts.get(item.outcome, 0) + 1
        doc: dict[str, Any] = {
            "command": self.command,
            "dry_run": self.dry_run,
            "provider": self.provider,
            "model": self.model,
            "limit": self.limit,
            "planned": self.planned,
            "calls": self.calls,
            "remaining": self.remaining,
            "discovered": self.discovered,
            "counts": counts,
            "items": [i.to_json() for i in self.items],
            "rejected": self.rejected,
            "repaired": self.repaired,
            "stopped": self.stopped,
        }
        if self.dry_run:
            doc["would_call"] = self.would_call
        return doc


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT} model calls per run, got {limit}")
    return limit


# ---- planning (no lock) --------------------------------------------------------------------------


def plan_scan(run: Run, fetched: Sequence[tuple[Comment, str | None]], index: SeenFile) -> list[Planned]:
    """New comments (no inbox file yet) and pending ones (inbox file, no attempt), oldest first."""
    paths = run.settings.paths
    planned: dict[str, tuple[str, Planned]] = {}
    for comment, parent_text in fetched:
        if not paths.inbox_file(comment.id).exists():
            planned[comment.id] = (comment.created_at, Planned(comment.id, inbox.EMPTY, comment, parent_text))
    for cid, entry in index.comments.items():
        if entry.status == "pending" and cid not in planned:
            record = inbox.load(paths, cid)
            if record is not None and inbox.state_of(record) == "pending":
                planned[cid] = (record.comment.created_at, Planned(cid, inbox.fingerprint(record)))
    return [p for _, p in sorted(planned.values(), key=lambda pair: (pair[0], pair[1].id))]


def plan_recheck(run: Run, index: SeenFile, ids: Sequence[str]) -> list[Planned]:
    """Failed comments and orphaned reservations (or exactly ``ids``), oldest first."""
    paths = run.settings.paths
    if ids:
        for cid in ids:
            if not inbox.is_valid_id(cid):
                raise UsageError(f"{cid!r} is not a comment id (expected 1–16 lower-case letters or digits)")
        candidates = list(dict.fromkeys(ids))
    else:
        candidates = [cid for cid, e in index.comments.items() if e.status in ("failed", "reserved")]
    planned: list[tuple[str, Planned]] = []
    for cid in candidates:
        record = inbox.load(paths, cid)
        if record is None:
            if ids:
                raise UsageError(f"no comment {cid} in {paths.inbox} — run `watcher scan` first, or check the id")
            # The index knows it but its inbox file is gone (quarantined?): keep it in the plan so
            # the run reports it as skipped instead of passing over it in silence.
            planned.append(("", Planned(cid, inbox.EMPTY)))
            continue
        planned.append((record.comment.created_at, Planned(cid, inbox.fingerprint(record))))
    return [p for _, p in sorted(planned, key=lambda pair: (pair[0], pair[1].id))]


# ---- the locked part ----------------------------------------------------------------------------


def execute(run: Run, result: BatchResult, plan: list[Planned], base: SeenFile, *, limit: int,
            articles: Sequence[Any] = (), emit: Callable[..., None]) -> SeenFile:
    """Steps 2–5 of SPEC §7. Returns the index as saved."""
    paths = run.settings.paths
    with pipeline_lock(paths):
        for directory in (paths.inbox, paths.root, paths.signals_dir):
            sweep_stale_temps(directory)  # left by runs killed mid-write; see durable.py
        _create_discovered(run, plan)
        mine, changed = seen.reconcile(paths, base)
        result.repaired = sorted(cid for cid in changed if cid in base.comments)
        for cid in result.repaired:
            emit("state.repaired", comment=cid)
        for article in articles:
            known = mine.articles.get(str(article.id))
            if known is None or (known.comments_count, known.title) != (article.comments_count, article.title):
                mine = seen.record_article(mine, article.id, title=article.title, url=article.url,
                                           comments_count=article.comments_count)
        provider: Provider | None = None
        try:
            provider = _process(run, result, plan, limit=limit, emit=emit)
        finally:
            if provider is not None and hasattr(provider, "close"):
                provider.close()
            touched = [i.id for i in result.items]
            mine, _ = seen.reconcile(paths, mine, touched)
            # The index is saved last: if we die before this, the inbox files already hold the
            # truth and the next command repairs the index from them (SPEC §4.2).
            saved = seen.save(paths, base, mine)
    return saved


def _create_discovered(run: Run, plan: list[Planned]) -> None:
    """Inbox files for comments this run discovered: prompt rendered once, cached, no attempts."""
    from watcher import prompts  # the template is read only by commands that create records

    paths = run.settings.paths
    known: dict[str, SeenComment] | None = None
    for item in plan:
        if item.comment is not None and not paths.inbox_file(item.id).exists():
            known = seen.load(paths).comments if known is None else known  # re-read under the lock
            if _history_lost(paths, item.id, known.get(item.id)):
                continue  # _reread reports it as skipped: its inbox file is gone
            prompt = prompts.render(item.comment, parent_text=item.parent_text)
            inbox.save(paths, inbox.new_record(item.comment, prompt))


def _history_lost(paths: Paths, cid: str, entry: SeenComment | None) -> bool:
    """A comment with no inbox file that had one: the index counted attempts, or a copy sits in
    quarantine/. Its attempts and any saved verdict live only in that copy now; a fresh record
    would start the 3-call budget over and re-request a saved verdict (SPEC §1), so none is
    made until the user restores the file."""
    if entry is not None and (entry.attempts > 0 or entry.status != "pending"):
        return True
    return bool(quarantined_names(paths.quarantine, f"inbox-{cid}.json"))


def _process(run: Run, result: BatchResult, plan: list[Planned], *, limit: int,
             emit: Callable[..., None]) -> Provider | None:
    cooldown = read_cooldown(run.settings)
    provider: Provider | None = None
    for position, item in enumerate(plan):
        if result.stopped is not None:
            result.add(ItemResult(item.id, "not_started"), run)
            continue
        if result.calls >= limit:
            result.remaining = len(plan) - position
            break
        record = _reread(run, result, item, emit)
        if record is None:
            continue
        action = decide(run.command, record, item.fingerprint)
        if action != "call":
            _no_call(run, result, record, action, emit)
            continue
        if cooldown is not None:
            result.stopped, result.error = "cooldown", cooldown
            emit("batch.stopped.cooldown")
            result.add(ItemResult(item.id, "not_started"), run)
            continue
        if provider is None:
            provider = _make_provider(run)
            result.provider, result.model = provider.name, provider.model
        _attempt(run, result, record, provider, emit)
    if cooldown is not None and result.stopped is None:
        # Nothing needed a call this time, but the run still says it is cooling down (SPEC §7.2):
        # a cron job must not mistake "no calls allowed" for "all caught up".
        result.stopped, result.error = "cooldown", cooldown
        emit("batch.stopped.cooldown")
    return provider


def decide(command: str, record: InboxRecord, planned: Fingerprint) -> str:
    """What to do with a comment now that we hold the lock. Pure; the order is SPEC §7 step 4."""
    if record.verdict is not None:
        return "skipped"
    if record.attempts and record.attempts[-1].outcome is None:
        # We hold the pipeline lock, so no call can be in flight: its process died.
        return "interrupted"
    if inbox.fingerprint(record) != planned:
        return "deferred"
    if len(record.attempts) >= record.cap:
        return "exhausted"
    if command == "recheck" and not record.attempts:
        return "not_failed"
    return "call"


def _reread(run: Run, result: BatchResult, item: Planned, emit: Callable[..., None]) -> InboxRecord | None:
    try:
        record = inbox.load(run.settings.paths, item.id)
    except StateError as exc:
        if isinstance(exc, CorruptState):
            emit("state.quarantined", comment=item.id)
        result.error = result.error or exc
        result.add(ItemResult(item.id, "skipped", kind=exc.kind, message=str(exc)), run)
        return None
    if record is None:
        result.add(ItemResult(item.id, "skipped", message=f"its inbox file is gone (see {run.settings.paths.quarantine}); "
                              "restore it to go on — a new record would restart its 3-attempt budget"), run)
    return record


def _no_call(run: Run, result: BatchResult, record: InboxRecord, action: str,
             emit: Callable[..., None]) -> None:
    cid, paths = record.comment.id, run.settings.paths
    n = len(record.attempts)
    if action == "skipped":
        outcome = "repaired" if cid in result.repaired else "skipped"
        result.add(ItemResult(cid, outcome, message="verdict already saved", attempts=n), run)
    elif action == "interrupted":
        try:
            inbox.save(paths, inbox.mark_interrupted(record))
        except SaveFailed as exc:
            _state_stop(run, result, cid, "save_failed", exc, emit)
            return
        emit("attempt.interrupted", comment=cid)
        result.add(ItemResult(cid, "interrupted", kind="interrupted",
                              message=f"attempt {n} was left reserved by a process that died; no call this run",
                              attempts=n), run)
    elif action == "deferred":
        emit("item.deferred", comment=cid)
        result.add(ItemResult(cid, "deferred", message="changed by another command while this one waited; "
                                                       "run again to act on the new state", attempts=n), run)
    elif action == "exhausted":
        emit("item.exhausted", comment=cid)
        result.add(ItemResult(cid, "exhausted", message=f"all {record.cap} attempts spent", attempts=n), run)
    else:  # not_failed: recheck asked for a comment that has never been tried
        result.add(ItemResult(cid, "skipped", message="never attempted: `watcher scan` makes the first attempt",
                              attempts=n), run)


def _attempt(run: Run, result: BatchResult, record: InboxRecord, provider: Provider,
             emit: Callable[..., None]) -> None:
    cid, paths = record.comment.id, run.settings.paths
    reserved = inbox.reserve(record, command=run.command, entrypoint=run.entrypoint,
                             provider=provider.name, model=provider.model)
    try:
        inbox.save(paths, reserved)
    except SaveFailed as exc:
        # Not reserved on disk means not paid for: no call.
        _state_stop(run, result, cid, "reserve_failed", exc, emit)
        return
    result.calls += 1
    answer = provider.complete(reserved.prompt)
    finished = inbox.finish(reserved, verdict=answer.verdict, error=answer.error, raw=answer.raw,
                            usage=answer.usage, duration_ms=answer.duration_ms)
    try:
        inbox.save(paths, finished)
    except SaveFailed as exc:
        # The attempt stays reserved and counted; whoever holds the lock next records it as
        # interrupted. The answer itself is lost (SPEC §11).
        _state_stop(run, result, cid, "save_failed", exc, emit)
        return
    n = len(finished.attempts)
    if answer.verdict is not None:
        emit("verdict.ok", comment=cid)
        result.add(ItemResult(cid, "verdict", attempts=n), run)
        return
    assert answer.error is not None
    emit(f"verdict.error.{answer.error.kind}", comment=cid)
    result.add(ItemResult(cid, "error", kind=answer.error.kind, message=answer.error.message, attempts=n), run)
    if answer.stops_batch:
        _provider_stop(run, result, answer, emit)


def _provider_stop(run: Run, result: BatchResult, answer: CallResult, emit: Callable[..., None]) -> None:
    error = answer.error
    assert error is not None
    result.stopped = error.kind
    emit(f"batch.stopped.{error.kind}")
    if error.kind == "auth":
        result.error = ConfigError(f"the provider rejected the API key ({error.message}) — check WATCHER_API_KEY")
    elif error.kind == "quota_exhausted":
        result.error = QuotaExhausted(f"provider quota exhausted: {error.message} — check your plan or spend limit")
    else:
        until = None
        if error.retry_after_s is not None:
            until = write_cooldown(run.settings, error.retry_after_s, reason=f"rate_limited: {error.message}")
        wait = f"; no model calls until {until}" if until else "; wait a minute before the next run"
        result.error = RateLimited(f"provider rate limit (HTTP 429){wait}")


def _state_stop(run: Run, result: BatchResult, cid: str, outcome: str, exc: SaveFailed,
                emit: Callable[..., None]) -> None:
    # A disk that cannot hold our state must not keep buying calls: stop the batch (exit 5).
    result.stopped = outcome
    result.error = exc
    emit(f"batch.stopped.{outcome}", comment=cid)
    result.add(ItemResult(cid, outcome, kind="save_failed", message=str(exc)), run)


def _make_provider(run: Run) -> Provider:
    from watcher.providers import make_provider  # httpx is imported only by runs that call a model

    return make_provider(run.settings)


# ---- cooldown (SPEC §7.2) -------------------------------------------------------------------------


def read_cooldown(settings: Settings) -> CooldownActive | None:
    """The active cooldown, or ``None`` once it has passed."""
    paths = settings.paths
    state = read_model(paths.provider_state, ProviderState, quarantine_dir=paths.quarantine)
    if state is None or state.cooldown_until is None:
        return None
    if parse_iso(state.cooldown_until) <= utcnow():
        return None
    return CooldownActive(state.cooldown_until, state.reason or "rate limited")


def write_cooldown(settings: Settings, seconds: float, *, reason: str) -> str:
    from datetime import timedelta

    until = iso(utcnow() + timedelta(seconds=max(0.0, seconds)))
    write_model(settings.paths.provider_state, ProviderState(cooldown_until=until, reason=reason))
    return until
