"""SPEC §14: the agent as the model — ``claim`` and ``submit`` for provider ``agent``.

    claim(run, notice=) -> Partial                      reserve one attempt per comment, with a
                                                        lease, and hand out the cached prompts
    submit(run, comment_id, n, verdict, notice=) -> Partial    store the agent's answer on attempt n
    validate_verdict(text) -> Verdict | AttemptError    the providers' own parse and validation

The agent in the loop (Codex, Claude Code) is the model, so the budget holds the same way as for
a model call: ``claim`` picks what scan and recheck would pick and decides with the same
:func:`~watcher.state.records.decide`, and reserves each attempt durably *before* the agent
sees the prompt. ``submit`` is the outcome's compare-and-swap (§13.5): it writes only onto the
open attempt it names. Both run under the pipeline lock from start to end, and call nothing.

While its lease runs, a claimed attempt is in flight elsewhere: scan and recheck defer it. After
the lease the next run holding the lock closes it as interrupted, like any orphan (§7 step 4.3);
a submit that comes later is refused, and the agent claims the comment again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from watcher.commands.results import Claimed, ClaimResult, ItemResult, SubmitResult
from watcher.config import Settings
from watcher.errors import ConfigError, Interrupted, SaveFailed, SubmitRefused, UsageError
from watcher.models import Attempt, AttemptError, InboxRecord, SeenFile, Verdict
from watcher.pipeline import Partial, locked, outcomes
from watcher.pipeline.batch import Batch, Run, caught_signals, count_signals
from watcher.pipeline.in_flight import in_flight
from watcher.pipeline.plan import check_id
from watcher.providers.agent import NAME
from watcher.providers.base import CallResult
from watcher.providers.parse import verdict_json_schema
from watcher.providers.redact import Redaction, as_key, credential_secrets
from watcher.state import records
from watcher.util.timeutil import iso, parse_iso

# What claim picks (SPEC §14): scan's pending, recheck's failed and orphaned reservations.
CLAIMABLE = ("pending", "failed", "reserved")


def require_agent(provider: str) -> None:
    """Claims are for provider agent only: with a real provider, scan and recheck make the calls."""
    if provider != NAME:
        raise ConfigError(
            f"claim hands comments to the agent to judge, but the provider is {provider}: set "
            "WATCHER_PROVIDER=agent for this server or command (with a real provider, "
            "`watcher scan` and `watcher recheck` make the calls)"
        )


def _minutes() -> int | float:
    minutes = records.LEASE.total_seconds() / 60
    return int(minutes) if minutes.is_integer() else minutes


# ---- claim ---------------------------------------------------------------------------------------


def claim(run: Run, *, notice: Callable[[str], None] = lambda _m: None) -> Partial[ClaimResult]:
    """Reserve one attempt for each of the oldest ``run.limit`` comments that need a verdict."""
    require_agent(run.settings.provider)
    batch = Batch(run, notice=notice)
    store = batch.store
    base = store.load_index()
    claimed: list[Claimed] = []
    try:
        with caught_signals(batch):
            # Planned without the lock, as scan plans (SPEC §15.1): each claim then re-reads its
            # comment under the lock and defers it if it changed meanwhile.
            mine = locked.reconcile_index(batch, base)
            try:
                _claim_each(batch, _candidates(batch, mine), mine, claimed)
            finally:
                with store.pipeline_lock():
                    locked.save_index(batch, base, mine, {}, touched=[c.id for c in claimed])
    finally:
        batch.close()
    count_signals(batch)
    result = ClaimResult(
        provider=NAME,
        lease_minutes=_minutes(),
        claimed=claimed,
        items=batch.result.items,
        remaining=batch.result.remaining,
        calls=0,
    )
    return Partial(result, batch.error)


def _candidates(batch: Batch, index: SeenFile) -> list[InboxRecord]:
    """Pending, failed and reserved comments as they are now, oldest first (as plan.py orders)."""
    found = []
    for cid, entry in index.comments.items():
        if entry.status in CLAIMABLE and (record := outcomes.reread(batch, cid)) is not None:
            found.append(record)
    return sorted(found, key=lambda r: (r.comment.created_at, r.comment.id))


def _claim_each(
    batch: Batch, candidates: Sequence[InboxRecord], index: SeenFile, claimed: list[Claimed]
) -> None:
    run = batch.run
    for position, planned in enumerate(candidates):
        cid = planned.comment.id
        if batch.interrupted is not None and not batch.stopped:
            batch.stop("interrupted", Interrupted(batch.interrupted))
        if batch.stopped:
            batch.add(ItemResult(cid, "not_started"))
            continue
        if len(claimed) >= run.limit:
            batch.result.remaining = len(candidates) - position
            break
        entry = index.comments.get(cid)
        with batch.store.pipeline_lock():
            reserved = _claim_one(batch, planned, entry.attempts if entry else 0)
        if reserved is None:
            continue
        batch.emit("attempt.claimed", comment=cid)
        claimed.append(
            Claimed(
                id=cid,
                n=len(reserved.attempts),
                lease_until=reserved.attempts[-1].lease_until or "",
                system=reserved.prompt.system,
                user=reserved.prompt.user,
                schema=verdict_json_schema(),
            )
        )


def _claim_one(batch: Batch, planned: InboxRecord, seen_attempts: int) -> InboxRecord | None:
    """Under the lock: re-read, decide against what was planned, reserve with a lease (SPEC §14)."""
    record = outcomes.reread(batch, planned.comment.id)
    if record is None:
        return None
    now = batch.now()
    flying = in_flight(batch, record)
    action = records.decide(
        "claim",
        record,
        records.fingerprint(planned),
        now=now,
        call_in_flight=flying is not None,
        seen_attempts=seen_attempts,
    )
    if action != "call":
        outcomes.no_call(batch, record, action, live=flying or False)
        return None
    reserved = records.reserve(
        record,
        command="claim",
        entrypoint=batch.run.entrypoint,
        provider=NAME,
        model=batch.settings.model,
        lease_until=iso(now + records.LEASE),
    )
    try:
        batch.store.write_reservation(reserved)
    except SaveFailed as exc:
        outcomes.state_stop(
            batch, record.comment.id, "reserve_failed", exc
        )  # not on disk: not handed out
        return None
    return reserved


# ---- submit --------------------------------------------------------------------------------------


def validate_verdict(text: str) -> Verdict | AttemptError:
    """The submitted verdict through the parse and validation every provider's answer goes
    through (:func:`watcher.providers.parse.parse_verdict_text`): the same rules and error kinds."""
    from watcher.providers.parse import parse_verdict_text

    answer = parse_verdict_text(text)
    if isinstance(answer, AttemptError):
        return answer.model_copy(
            update={"message": answer.message.replace("model answer", "the submitted verdict", 1)}
        )
    return answer


def submit(
    run: Run,
    comment_id: str,
    n: int,
    verdict: Any,
    *,
    notice: Callable[[str], None] = lambda _m: None,
) -> Partial[SubmitResult]:
    """Store the agent's verdict on attempt ``n`` of ``comment_id`` if it is still the open claim.

    Raises :class:`SubmitRefused` (exit 2, nothing written) for any other attempt; an invalid
    verdict is recorded as the attempt's ``invalid_verdict`` / ``malformed_json`` (exit 0)."""
    check_id(comment_id)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(
            f"n must be the attempt number claim handed out (a whole number from 1), got {n!r}"
        )
    text = _verdict_text(verdict)
    # Checked and redacted before the lock: they read nothing on disk, and building the redaction
    # compiles a pattern (~30 ms on a busy machine) that every other run would wait for.
    answer = _redacted(run.settings, text, validate_verdict(text))
    error = answer.error
    batch = Batch(run, notice=notice)
    store = batch.store
    with store.pipeline_lock():
        record = store.load_record(comment_id)
        if record is None:
            raise UsageError(
                f"no comment {comment_id} in {store.paths.inbox}: submit the id claim handed out"
            )
        attempt = _open_claim(record, n)
        base = store.load_index()
        took = batch.now() - parse_iso(
            attempt.reserved_at
        )  # how long the agent took, for the record
        finished = records.finish(
            record,
            verdict=answer.verdict,
            error=error,
            raw=answer.raw,
            duration_ms=max(0, int(took.total_seconds() * 1000)),
        )
        store.save_record(finished)  # SaveFailed → exit 5; the claim stays open and counted
        batch.emit(
            "verdict.ok" if error is None else f"verdict.error.{error.kind}", comment=comment_id
        )
        locked.save_index(batch, base, base, {}, touched=[comment_id])
    count_signals(batch)
    return Partial(_submitted(finished, n, error), batch.error)


def _redacted(settings: Settings, text: str, answer: Verdict | AttemptError) -> CallResult:
    """The agent's answer as a provider's leaves the provider (SPEC §13.5, §15.5): the raw text,
    every verdict string and the error message without any key the configuration holds, nor the
    base URL's credentials. An agent reads the shell's environment, and what it pastes into a
    verdict would otherwise be stored verbatim and shown by every `show`."""
    auth = settings.base_url_auth.get_secret_value() if settings.base_url_auth is not None else None
    redaction = Redaction(
        *(as_key(key.get_secret_value()) for key in settings.known_keys), *credential_secrets(auth)
    )
    verdict, error = (answer, None) if isinstance(answer, Verdict) else (None, answer)
    return redaction.call(CallResult(verdict=verdict, error=error, raw=text))


def _verdict_text(verdict: Any) -> str:
    """The verdict as the JSON text a model would have answered (agents send objects, strings)."""
    if verdict is None:
        raise UsageError(
            "verdict is missing: send the verdict object (or its JSON text) for the claimed attempt"
        )
    if isinstance(verdict, str):
        return verdict
    try:
        return json.dumps(verdict, ensure_ascii=False)
    except (TypeError, ValueError):
        raise UsageError(
            f"verdict must be a JSON object (or its JSON text), got {type(verdict).__name__}"
        ) from None


def _open_claim(record: InboxRecord, n: int) -> Attempt:
    """Attempt ``n`` if it is the record's open, agent-claimed last attempt; else
    :class:`SubmitRefused`."""
    cid, count = record.comment.id, len(record.attempts)
    if n > count:
        raise SubmitRefused(
            f"{cid} has no attempt {n} (it has {count}): submit the n that claim handed out"
        )
    attempt = record.attempts[n - 1]
    if attempt.provider != NAME:
        raise SubmitRefused(
            f"attempt {n} of {cid} was reserved by a {attempt.entrypoint} {attempt.command} run "
            f"for provider {attempt.provider}, not claimed by an agent: nothing changed"
        )
    if n != count:
        raise SubmitRefused(
            f"attempt {n} is not {cid}'s open attempt (it has {count}; attempt {n} "
            f"{_ended(attempt)}): nothing changed"
        )
    if attempt.outcome is None:
        return attempt
    if attempt.error is not None and attempt.error.kind == "interrupted":
        raise SubmitRefused(
            f"attempt {n} of {cid} was closed as interrupted after its lease ended at "
            f"{attempt.lease_until}: nothing changed — claim it again"
        )
    raise SubmitRefused(
        f"attempt {n} of {cid} already has an outcome ({_outcome(attempt)}): nothing changed"
    )


def _outcome(attempt: Attempt) -> str:
    return f"error {attempt.error.kind}" if attempt.error is not None else str(attempt.outcome)


def _ended(attempt: Attempt) -> str:
    return "is still open" if attempt.outcome is None else f"ended with {_outcome(attempt)}"


def _submitted(record: InboxRecord, n: int, error: AttemptError | None) -> SubmitResult:
    cid, cap = record.comment.id, records.cap_of(record)
    left = max(0, cap - records.spent(record))
    message = None
    if error is not None:
        after = (
            f"claim it again for attempt {n + 1} of {cap}"
            if left
            else f"that was attempt {n} of {cap}: no attempts left; only the person can grant more "
            f"(`watcher grant {cid}`)"
        )
        message = f"{error.message} — {after}"
    return SubmitResult(
        id=cid,
        n=n,
        outcome="error" if error else "verdict",
        kind=error.kind if error else None,
        message=message,
        attempts=len(record.attempts),
        attempts_left=left,
        state=records.state_of(record),
        verdict=record.verdict,
    )
