"""Every command as one core function, and the one place errors become exit codes.

The CLI (``watcher``) and the bridge (``watcher-bridge``, its MCP server) call :func:`execute`
with the same functions; they differ only in how they render the :class:`Envelope`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watcher import inbox, seen
from watcher.config import Settings, load_settings
from watcher.errors import (
    EXIT_OK,
    CorruptState,
    LockBusy,
    StateError,
    UsageError,
    WatcherError,
    error_kind,
    exit_code_for,
)
from watcher.models import SeenFile
from watcher.pipeline import (
    DEFAULT_LIMIT,
    BatchResult,
    ItemResult,
    Planned,
    Run,
    check_limit,
    decide,
    plan_recheck,
    plan_scan,
    read_cooldown,
)
from watcher.pipeline import (
    execute as execute_batch,
)

TRIAGE_CHOICES = ("replied", "ignored", "open")
PRIORITY_ORDER = {"high": 0, "normal": 1, "low": 2}


@dataclass(kw_only=True)
class Context:
    """How a front end runs commands: where settings come from and where notices go."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    notice: Callable[[str], None] = lambda _msg: None
    on_item: Callable[[ItemResult], None] | None = None
    on_planned: Callable[[int], None] | None = None
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(data_dir=self.data_dir, overrides=self.overrides)
        return self._settings


@dataclass
class Envelope:
    ok: bool
    command: str
    exit_code: int
    result: Any
    error: dict[str, str] | None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "command": self.command, "exit_code": self.exit_code,
                "result": self.result, "error": self.error}


def execute(command: str, ctx: Context, fn: Callable[[Context], Any]) -> Envelope:
    """Run one command; never raises. ``fn`` returns a result, or ``(result, error)`` when it
    produced a result *and* must exit non-zero (a batch stopped by a 429 still has a summary)."""
    result: Any = None
    error: BaseException | None = None
    try:
        out = fn(ctx)
        result, error = out if isinstance(out, tuple) else (out, None)
    except WatcherError as exc:
        error = exc
        _signal_failure(ctx, exc)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 1
        error = exc
    if error is None:
        return Envelope(True, command, EXIT_OK, result, None)
    message = str(error) if isinstance(error, WatcherError) else f"internal error: {type(error).__name__}: {error}"
    return Envelope(False, command, exit_code_for(error), result, {"kind": error_kind(error), "message": message})


def _signal_failure(ctx: Context, exc: WatcherError) -> None:
    key = "lock.busy" if isinstance(exc, LockBusy) else "state.quarantined" if isinstance(exc, CorruptState) else None
    if key is None or ctx._settings is None:
        return
    from watcher import signals

    try:
        signals.emit(ctx.settings.paths, key, run=signals.new_run_id(), entrypoint=ctx.entrypoint)
    except WatcherError:
        pass  # the failure being reported is louder than a lost observation


# ---- scan / recheck -----------------------------------------------------------------------------


def scan(ctx: Context, *, limit: int = DEFAULT_LIMIT, dry_run: bool = False,
         source: str | None = None) -> tuple[dict[str, Any], WatcherError | None]:
    check_limit(limit)
    settings = ctx.settings
    run = _run(ctx, "scan")
    emit = _Emitter(run, ctx.notice)
    base = seen.load(settings.paths)
    index, _ = seen.reconcile(settings.paths, base)
    fetched = _fetch(ctx, settings, index, source)  # network happens here, before the lock
    result = BatchResult("scan", dry_run=dry_run, limit=limit, provider=settings.provider, model=settings.model)
    for rejection in fetched.rejected:
        result.rejected.append({"item": rejection.item, "message": rejection.message})
        ctx.notice(f"rejected {rejection.item or 'item'}: {rejection.message}")
        if not dry_run:
            emit("input.rejected", comment=None)
    pairs = [(c, fetched.parent_texts.get(c.parent_id) if c.parent_id else None) for c in fetched.comments]
    plan = plan_scan(run, pairs, index)
    result.discovered = sum(1 for p in plan if p.comment is not None)
    articles = [a for a in fetched.articles if a.id in fetched.fetched_article_ids]
    return _run_batch(run, result, plan, base, limit=limit, articles=articles, emit=emit)


def recheck(ctx: Context, *, limit: int = DEFAULT_LIMIT, dry_run: bool = False,
            ids: Sequence[str] = ()) -> tuple[dict[str, Any], WatcherError | None]:
    check_limit(limit)
    settings = ctx.settings
    run = _run(ctx, "recheck")
    base = seen.load(settings.paths)
    index, _ = seen.reconcile(settings.paths, base)
    plan = plan_recheck(run, index, ids)
    result = BatchResult("recheck", dry_run=dry_run, limit=limit, provider=settings.provider, model=settings.model)
    return _run_batch(run, result, plan, base, limit=limit, emit=_Emitter(run, ctx.notice))


def _run_batch(run: Run, result: BatchResult, plan: list[Planned], base: SeenFile, *, limit: int,
               emit: _Emitter, articles: Sequence[Any] = ()) -> tuple[dict[str, Any], WatcherError | None]:
    result.planned = len(plan)
    if result.dry_run:
        _dry_run(run, result, plan, limit)
        return result.to_json(), None
    if run.on_planned is not None:
        run.on_planned(min(len(plan), limit))
    execute_batch(run, result, plan, base, limit=limit, articles=articles, emit=emit)
    error = result.error or emit.failure
    counter = _run_counter(run)
    doc = result.to_json()
    doc["signals"] = counter if isinstance(counter, dict) else None
    if error is None and isinstance(counter, WatcherError):
        error = counter
    return doc, error


def _dry_run(run: Run, result: BatchResult, plan: list[Planned], limit: int) -> None:
    """Say what a real run would do now, touching nothing: no lock, no writes, no calls."""
    cooldown = read_cooldown(run.settings)
    for position, item in enumerate(plan):
        if len(result.would_call) >= limit:
            result.remaining = len(plan) - position
            break
        record = None if item.comment is not None else inbox.load(run.settings.paths, item.id)
        action = "call" if record is None else decide(run.command, record, item.fingerprint)
        if action == "call":
            result.would_call.append(item.id)
            outcome = "not_started" if cooldown else "would_call"
            result.add(ItemResult(item.id, outcome, message=str(cooldown) if cooldown else None), run)
        else:
            result.add(ItemResult(item.id, "would_skip", kind=action), run)


def _run(ctx: Context, command: str) -> Run:
    from watcher import signals

    if ctx.settings.provider_defaulted:
        ctx.notice("note: no provider configured — using the built-in offline heuristic classifier "
                   "(no network; every verdict is labelled offline). Set WATCHER_PROVIDER=openai|anthropic "
                   "for a real model.")
    return Run(settings=ctx.settings, command=command, entrypoint=ctx.entrypoint, run_id=signals.new_run_id(),
               on_item=ctx.on_item, on_planned=ctx.on_planned)


class _Emitter:
    """Appends observation signals for one run, remembering the first failure.

    A signal that cannot be written must not stop the batch mid-item (the attempt's outcome is
    already on disk), but the run still ends loudly: the failure becomes its exit-5 error.
    """

    def __init__(self, run: Run, notice: Callable[[str], None]) -> None:
        self.run, self.notice = run, notice
        self.failure: WatcherError | None = None

    def __call__(self, key: str, *, comment: str | None = None) -> None:
        from watcher import signals

        try:
            signals.emit(self.run.settings.paths, key, run=self.run.run_id, entrypoint=self.run.entrypoint,
                         comment=comment)
        except WatcherError as exc:
            self.notice(f"warning: observation {key} not recorded: {exc}")
            self.failure = self.failure or exc


def _run_counter(run: Run) -> dict[str, Any] | WatcherError:
    from watcher import signals

    try:
        counted = signals.run_counter(run.settings.paths)
    except StateError as exc:
        return exc
    return {"new_lines": counted.new_lines, "invalid": counted.invalid}


def _fetch(ctx: Context, settings: Settings, index: SeenFile, source: str | None) -> Any:
    from watcher import source as src

    if source is None and not (settings.devto_username or settings.devto_api_key):
        ctx.notice("note: DEVTO_USERNAME is not set — scanning the bundled sample comments. "
                   "Set DEVTO_USERNAME (or pass --source FILE) to watch your own articles.")
        return src.read_export(src.bundled_sample(), settings)
    if source is None or source == "devto":
        return src.fetch_devto(settings, index)
    return src.read_export(Path(source), settings)


# ---- read commands and marks -----------------------------------------------------------------------


def _index(settings: Settings) -> SeenFile:
    """The reconciled index; a repair found here is saved (every command repairs the index)."""
    base = seen.load(settings.paths)
    index, changed = seen.reconcile(settings.paths, base)
    if changed:
        index = seen.save(settings.paths, base, index)
    return index


def status(ctx: Context) -> dict[str, Any]:
    from watcher import signals

    settings = ctx.settings
    index = _index(settings)
    states: dict[str, int] = dict.fromkeys(("done", "pending", "failed", "exhausted", "reserved"), 0)
    triage: dict[str, int] = dict.fromkeys(TRIAGE_CHOICES, 0)
    for entry in index.comments.values():
        states[entry.status] += 1
        triage[entry.triage] += 1
    cooldown = read_cooldown(settings)
    counted = signals.read_state(settings.paths)
    return {
        "comments": len(index.comments),
        "articles": len(index.articles),
        "states": states,
        "triage": triage,
        "cooldown": {"until": cooldown.until, "reason": cooldown.reason} if cooldown else None,
        "signals": {"counts": counted.counts, "invalid": counted.invalid} if counted else {"counts": {}, "invalid": 0},
        "settings": settings.public(),
        "paths": {"data_dir": str(settings.data_dir), "inbox": str(settings.paths.inbox),
                  "seen": str(settings.paths.seen), "observations": str(settings.paths.observations)},
    }


def inbox_view(ctx: Context, *, show_all: bool = False) -> dict[str, Any]:
    settings = ctx.settings
    index = _index(settings)
    rows = []
    for cid, entry in index.comments.items():
        if not show_all and (entry.status != "done" or entry.triage != "open"):
            continue
        record = inbox.load(settings.paths, cid)
        if record is None:
            continue
        verdict = record.verdict
        if not show_all and (verdict is None or not verdict.needs_reply):
            continue
        rows.append({
            "id": cid, "state": entry.status, "triage": entry.triage, "attempts": entry.attempts,
            "author": record.comment.author, "article": record.comment.article_title,
            "url": record.comment.url, "created_at": record.comment.created_at,
            "verdict": verdict.model_dump() if verdict else None,
        })
    rows.sort(key=lambda r: (PRIORITY_ORDER.get((r["verdict"] or {}).get("priority", "low"), 3), r["created_at"]))
    return {"all": show_all, "count": len(rows), "comments": rows}


def show(ctx: Context, comment_id: str) -> dict[str, Any]:
    settings = ctx.settings
    _check_id(comment_id)
    record = inbox.load(settings.paths, comment_id)
    if record is None:
        raise UsageError(f"no comment {comment_id} in {settings.paths.inbox} — `watcher inbox --all` lists them")
    entry = _index(settings).comments.get(comment_id)
    doc = record.model_dump(mode="json")
    doc["state"] = inbox.state_of(record)
    doc["triage"] = entry.triage if entry else "open"
    return doc


def mark(ctx: Context, comment_id: str, triage: str) -> dict[str, Any]:
    _check_id(comment_id)
    if triage not in TRIAGE_CHOICES:
        raise UsageError(f"mark takes one of {', '.join(TRIAGE_CHOICES)}, got {triage!r}")
    entry = seen.patch_triage(ctx.settings.paths, comment_id, triage)  # type: ignore[arg-type]
    if entry is None:
        raise UsageError(f"no comment {comment_id} — `watcher inbox --all` lists the known ones")
    return {"id": comment_id, "triage": entry.triage, "state": entry.status}


def signals_cmd(ctx: Context, *, reset: bool = False) -> dict[str, Any]:
    from watcher import signals

    counted = signals.run_counter(ctx.settings.paths, reset=reset)
    return {"reset": reset, "counts": counted.counts, "invalid": counted.invalid,
            "applied": counted.applied, "new_lines": counted.new_lines}


def _check_id(comment_id: str) -> None:
    if not inbox.is_valid_id(comment_id):
        raise UsageError(f"{comment_id!r} is not a comment id (expected 1–16 lower-case letters or digits)")
