"""Test-only fault injection, loaded into a watcher subprocess via PYTHONPATH.

``WATCHER_TEST_FAULT`` names the faults, comma-separated; product code has no switches for any
of this (SPEC §12), and none of these variables is read outside this file.

- ``save_outcome``            saving an attempt's outcome fails (SaveFailed, as on a full disk)
- ``kill_before_seen_save``   SIGKILL instead of saving seen.json
- ``kill_at=<point>[:<n>]``   SIGKILL the process the ``n``-th time (default 1) it reaches a
  step boundary of SPEC §7/§8; :data:`KILL_POINTS` names them. The wrappers sit on the store's
  methods (:class:`watcher.store.FileStore`), so the real code runs up to the boundary.
- ``pause_at=<point>[:<n>]``  the ``n``-th time the process reaches ``point``, say so as
  ``notify_at`` does, then wait there until the file ``<WATCHER_TEST_NOTIFY>.resume`` exists (or
  the test kills it): a process held with its locks at an exact step, so that another can queue
  behind it (SPEC §15.1 holds the pipeline lock only for short steps).
- ``notify_at=<point>[:<n>]`` the ``n``-th time the process reaches ``point`` (a kill point, or
  one of :data:`NOTIFY_ONLY_POINTS`), append the point's name as a line to the file
  ``WATCHER_TEST_NOTIFY`` names, and go on. A test waits for that line instead of sleeping
  "long enough" for another process to get somewhere (STYLE rule 12).

``WATCHER_TEST_LOCK_WAIT=<seconds>`` is the store's pipeline-lock wait instead of the real 5 s:
lock-busy tests other than the one that proves the real 5 s wait do not have to wait 5 s.

``WATCHER_TEST_LOCKED_BUILDS=<file>`` appends the name of every watcher model whose validator was
built while this process held the pipeline lock (a model is built on first use, and under the lock
every other run waits for it: tests/test_lock_holds.py wants the file to stay empty).

``WATCHER_TEST_CLOCK_SHIFT=<seconds>`` runs the process that much later: every
:class:`watcher.pipeline.Hooks` its front end builds (the CLI's, each MCP tool call's) gets the
clock ``now + seconds`` — the ``Hooks.clock`` an in-process test hands ``run_main``
(tests/_fakes/clock.py's ``later``), so both kinds of run move the same "now". A run "after an
agent's 15-minute lease" (SPEC §14) is then one started with a shift of 960, instead of a test
that sleeps 15 minutes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from typing import Any

FAULTS = [f.strip() for f in os.environ.get("WATCHER_TEST_FAULT", "").split(",") if f.strip()]
NOTIFY_FILE = os.environ.get("WATCHER_TEST_NOTIFY", "")
LOCK_WAIT = os.environ.get("WATCHER_TEST_LOCK_WAIT", "")
CLOCK_SHIFT = os.environ.get("WATCHER_TEST_CLOCK_SHIFT", "")
LOCKED_BUILDS = os.environ.get("WATCHER_TEST_LOCKED_BUILDS", "")

KILL_POINTS = (
    "after_plan",  # planned (network done), before asking for the pipeline lock
    "after_lock",  # holding the pipeline lock, nothing written yet
    "after_inbox_create",  # a discovered comment's inbox file (no attempts) is on disk
    "before_reserve_write",  # about to write the reservation
    "after_reserve_write",  # attempt n+1 reserved on disk, the request not sent
    "after_claim_write",  # an agent's claim (attempt n+1 with its lease) is on disk, not handed out yet
    "after_submit_validated",  # an agent's verdict was checked against the schema, the outcome not written
    "after_answer",  # the model answered (parsed), the outcome not written
    "before_outcome_write",  # the pipeline lock taken again for the answer, its outcome not written
    "after_outcome_write",  # the outcome (verdict or error) is on disk
    "after_interrupted_write",  # an orphaned reservation was just closed as interrupted
    "after_signal_append",  # an observation line is on disk
    "torn_signal_append",  # half an observation line is on disk (no newline)
    "before_seen_save",  # the batch is done, seen.json not saved
    "after_seen_save",  # seen.json saved, the pipeline lock about to be released
    "after_cooldown_write",  # provider.json cooldown written after a 429
    "counter_before_state",  # the counter read new lines, signals/state.json not written
    "counter_after_state",  # counts + watermark written, the cursor not advanced
    "counter_after_cursor",  # the cursor advanced
    # Delivery (SPEC §16.1), around a notification's sends: see _install_notify_points.
    "after_outbox_write",  # a new outbox message is on disk, nothing of it sent yet
    "before_send",  # a send to one target about to start, every earlier outcome on disk
    "after_send_accepted",  # a target accepted a message, its acceptance not recorded
    "after_accept_write",  # that acceptance is on disk
    # `watcher migrate` (SPEC §16.3), reached by no other command (MIGRATE_POINTS); a migration
    # also meets before/after_seen_save, after_cooldown_write (provider.json) and after_signal_append.
    "migrate_after_begin",  # the data dir's migrating.json written, no comment brought yet
    "migrate_after_comment",  # one comment's inbox file merged into the data dir, the next not yet
    "migrate_after_provider",  # provider.json merged, cron.json and the signals not yet
    "migrate_after_cron",  # cron.json merged, the signals not yet
    "migrate_before_finish",  # everything merged, migrating.json still there
    "migrate_after_finish",  # migrating.json removed, the summary not printed
    # A reply draft (SPEC §16.5; tests/reliability/test_rel_drafts.py), `watcher draft` only:
    "draft_before_reserve",  # holding the pipeline lock, about to write draft n+1 reserved
    "draft_after_reserve",  # draft n+1 reserved on disk, the request not sent
    "draft_after_answer",  # the provider answered the draft call, its outcome not written
    "draft_after_outcome",  # the draft's outcome (text or error) is on disk
    "draft_after_interrupted",  # an orphaned draft reservation was just closed as interrupted
)
MIGRATE_POINTS = tuple(p for p in KILL_POINTS if p.startswith("migrate_"))
# Points a test can wait for but that are no crash case: killing there is the same as after_plan.
NOTIFY_ONLY_POINTS = (
    "lock_queued",  # asked for the pipeline lock and found it held: now waiting in line for it
)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _notify(point: str) -> None:
    if not NOTIFY_FILE:
        raise SystemExit("sitecustomize: notify_at needs WATCHER_TEST_NOTIFY (the file to append to)")
    # One short O_APPEND write: a waiting test never reads half a line.
    fd = os.open(NOTIFY_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{point}\n".encode())
    finally:
        os.close(fd)


def _pause() -> None:
    resume = f"{NOTIFY_FILE}.resume"
    while not os.path.exists(resume):
        time.sleep(0.01)  # a test's own process waits for the go; nothing else runs meanwhile


class _Points:
    """What happens when the process reaches a named point: ``(point, n-th time, action)``."""

    def __init__(self) -> None:
        self.watches: list[tuple[str, int, str]] = []
        self.reached: dict[str, int] = {}

    def watch(self, spec: str, action: str) -> None:
        point, _, nth = spec.partition(":")
        allowed = KILL_POINTS if action == "kill" else KILL_POINTS + NOTIFY_ONLY_POINTS
        if point not in allowed:
            raise SystemExit(f"sitecustomize: unknown {action} point {point!r}")
        self.watches.append((point, int(nth or 1), action))

    def watched(self, point: str) -> bool:
        return any(p == point for p, _, _ in self.watches)

    def kills_next(self, point: str) -> bool:
        """Will the next time at ``point`` be a kill? (a torn append tears only a dying write)"""
        n = self.reached.get(point, 0) + 1
        return any((p, nth, a) == (point, n, "kill") for p, nth, a in self.watches)

    def at(self, point: str) -> None:
        n = self.reached[point] = self.reached.get(point, 0) + 1
        for p, nth, action in self.watches:
            if (p, nth) != (point, n):
                continue
            if action in ("notify", "pause"):
                _notify(point)
            if action == "pause":
                _pause()
            elif action == "kill":
                _die()


def _install_points(points: _Points) -> None:
    """Wrap the store's methods (and the HTTP provider's call) with the named points.

    The store is the one seam for state (:class:`watcher.store.FileStore`): every write, append and
    lock of a run goes through these methods, however the product code imports things, so a
    point here is reached exactly where the real write happens. The wrappers are set on the class
    because this runs before the front end builds its store; in-process tests hand the pipeline a
    wrapping store through ``Hooks.make_store`` instead.
    """
    from watcher.errors import LockBusy
    from watcher.providers import _http
    from watcher.store import signals
    from watcher.store.files import FileStore

    at = points.at
    real_lock = FileStore.pipeline_lock

    @contextmanager
    def pipeline_lock(self: Any, **kwargs: Any) -> Iterator[None]:
        at("after_plan")
        with ExitStack() as held:
            if LOCK_WAIT and kwargs.get("timeout") is None:
                kwargs["timeout"] = float(LOCK_WAIT)
            if points.watched("lock_queued"):
                # One extra zero-wait try, only when a test waits for the queue: if it is busy,
                # say so, then wait in line exactly as the real call would.
                try:
                    held.enter_context(real_lock(self, timeout=0))
                except LockBusy:
                    at("lock_queued")
                    held.enter_context(real_lock(self, **kwargs))
            else:
                held.enter_context(real_lock(self, **kwargs))
            at("after_lock")
            yield

    FileStore.pipeline_lock = pipeline_lock  # type: ignore[method-assign]

    real_save = FileStore.save_record

    def save_record(self: Any, record: Any) -> None:
        last = record.attempts[-1] if record.attempts else None
        if last is not None and last.outcome is None:
            at("before_reserve_write")
        elif last is not None and last.provider == "agent" and (last.error is None or last.error.kind != "interrupted"):
            # An agent's verdict was checked against the schema (submit), the outcome not written.
            at("after_submit_validated")
        real_save(self, record)
        if last is None:
            at("after_inbox_create")
        elif last.outcome is None and last.lease_until is not None:
            at("after_claim_write")  # a claim reserves like a scan, but the agent makes the "call"
        elif last.outcome is None:
            at("after_reserve_write")
        elif last.error is not None and last.error.kind == "interrupted":
            at("after_interrupted_write")
        else:
            at("after_outcome_write")

    FileStore.save_record = save_record  # type: ignore[method-assign]

    real_complete = _http.HttpProvider.complete

    def complete(self: Any, prompt: Any) -> Any:
        answer = real_complete(self, prompt)
        at("after_answer")
        return answer

    _http.HttpProvider.complete = complete  # type: ignore[method-assign]

    real_append = FileStore._append

    def append(self: Any, path: Any, payload: bytes) -> None:
        if points.kills_next("torn_signal_append"):
            # A writer dying in the middle of its line: half the bytes, no newline.
            signals.append_bytes(path, payload[: max(1, len(payload) // 2)].rstrip(b"\n"))
            at("torn_signal_append")
        real_append(self, path, payload)
        at("after_signal_append")

    FileStore._append = append  # type: ignore[method-assign]

    real_write_outcome = FileStore.write_outcome

    def write_outcome(self: Any, reservation: Any, finish: Any) -> Any:
        at("before_outcome_write")
        return real_write_outcome(self, reservation, finish)

    FileStore.write_outcome = write_outcome  # type: ignore[method-assign]

    real_save_index = FileStore.save_index

    def save_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        at("before_seen_save")
        saved = real_save_index(self, *args, **kwargs)
        at("after_seen_save")
        return saved

    FileStore.save_index = save_index  # type: ignore[method-assign]

    real_write = FileStore._write

    def write(self: Any, path: Any, model: Any) -> None:
        before, after = _write_points(path)
        if before:
            at(before)
        real_write(self, path, model)
        if after:
            at(after)

    FileStore._write = write  # type: ignore[method-assign]
    _install_notify_points(points)
    if any(p in MIGRATE_POINTS for p, _, _ in points.watches):
        _install_migrate_points(points)


def _install_notify_points(points: _Points) -> None:
    """The delivery points (SPEC §16.1), on the outbox's store (:class:`OutboxFiles`, every
    write of an outbox message) and on the one function that sends (:func:`watcher.notify.send.send`,
    which delivery looks up when it sends). A message saved with every target untried is a new
    one; the save that follows an accepted send is that acceptance's record."""
    from watcher.notify import send as sending
    from watcher.store.outbox import OutboxFiles

    accepted: list[bool] = []  # an accepted send whose record is not written yet
    real_save = OutboxFiles.save

    def save(self: Any, message: Any) -> None:
        new = all(t.open and t.attempts == 0 for t in message.targets)
        real_save(self, message)
        if accepted:
            accepted.clear()
            points.at("after_accept_write")
        elif new:
            points.at("after_outbox_write")

    OutboxFiles.save = save  # type: ignore[method-assign]

    real_send = sending.send

    def send(*args: Any, **kwargs: Any) -> Any:
        points.at("before_send")
        sent = real_send(*args, **kwargs)
        if sent.accepted:
            accepted.append(True)
            points.at("after_send_accepted")
        return sent

    sending.send = send  # type: ignore[assignment]


def _install_migrate_points(points: _Points) -> None:
    """The points of ``watcher migrate``: after its steps (watcher/commands/migrate.py calls each
    through its module, so a wrapper set here is the one it calls)."""
    from watcher.commands import migrate, migrate_state
    from watcher.store import places

    def after(module: Any, name: str, point: str) -> None:
        real = getattr(module, name)

        def step(*args: Any, **kwargs: Any) -> Any:
            done = real(*args, **kwargs)
            points.at(point)
            return done

        setattr(module, name, step)

    after(places, "begin_migration", "migrate_after_begin")
    after(migrate, "_bring", "migrate_after_comment")
    after(migrate_state, "bring_provider", "migrate_after_provider")
    after(migrate_state, "bring_cron", "migrate_after_cron")
    real_finish = places.finish_migration

    def finish_migration(*args: Any, **kwargs: Any) -> None:
        points.at("migrate_before_finish")
        real_finish(*args, **kwargs)
        points.at("migrate_after_finish")

    places.finish_migration = finish_migration


def _write_points(path: Any) -> tuple[str | None, str | None]:
    """The points around one durable write that is not a record's (the counter's two files; the
    provider state, which a 429's cooldown writes)."""
    if path.parent.name == "signals" and path.name == "state.json":
        return "counter_before_state", "counter_after_state"
    if path.parent.name == "signals" and path.name == "cursor.json":
        return None, "counter_after_cursor"
    if path.name == "provider.json":
        return None, "after_cooldown_write"
    return None, None


def _install_save_outcome() -> None:
    from watcher.errors import SaveFailed
    from watcher.store.files import FileStore

    real_save = FileStore.save_record

    def save_record(self: Any, record: Any) -> None:
        if record.attempts and record.attempts[-1].outcome is not None:
            raise SaveFailed(self.paths.inbox_file(record.comment.id),
                             OSError(28, "No space left on device (injected)"))
        real_save(self, record)

    FileStore.save_record = save_record  # type: ignore[method-assign]


def _install_kill_before_seen_save() -> None:
    from watcher.store.files import FileStore

    def save_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    FileStore.save_index = save_index  # type: ignore[method-assign]


def _install_clock(seconds: float) -> None:
    from watcher.pipeline.batch import Hooks
    from watcher.util.timeutil import utcnow

    shift = timedelta(seconds=seconds)
    real_init = Hooks.__init__

    def later() -> datetime:
        return utcnow() + shift

    def init(self: Any, **kwargs: Any) -> None:
        if kwargs.get("clock") is None:
            kwargs["clock"] = later
        real_init(self, **kwargs)

    Hooks.__init__ = init  # type: ignore[method-assign]


def _install_lock_wait(seconds: float) -> None:
    from watcher.store.files import FileStore

    real_lock = FileStore.pipeline_lock

    def pipeline_lock(self: Any, *, timeout: float | None = None) -> Any:
        return real_lock(self, timeout=seconds if timeout is None else timeout)

    FileStore.pipeline_lock = pipeline_lock  # type: ignore[method-assign]


def _install_locked_builds(path: str) -> None:
    from pydantic import BaseModel

    from watcher.store.files import FileStore

    def unbuilt() -> set[type[BaseModel]]:
        found, todo = set(), [BaseModel]
        while todo:
            for sub in todo.pop().__subclasses__():
                todo.append(sub)
                if sub.__module__.startswith("watcher") and not sub.__pydantic_complete__:
                    found.add(sub)
        return found

    real_lock = FileStore.pipeline_lock

    @contextmanager
    def pipeline_lock(self: Any, **kwargs: Any) -> Iterator[None]:
        with real_lock(self, **kwargs):
            before = unbuilt()
            try:
                yield
            finally:
                built = sorted(model.__name__ for model in before - unbuilt())
                if built:
                    with open(path, "a", encoding="utf-8") as log:
                        log.write("".join(f"{name}\n" for name in built))

    FileStore.pipeline_lock = pipeline_lock  # type: ignore[method-assign]


def _install() -> None:
    if CLOCK_SHIFT:
        _install_clock(float(CLOCK_SHIFT))
    if LOCK_WAIT and not any(f.startswith(("kill_at=", "notify_at=", "pause_at=")) for f in FAULTS):
        _install_lock_wait(float(LOCK_WAIT))
    points = _Points()
    # The plain faults first: the point wrappers then wrap them, so a point after a failing
    # save is never reached, as in a real run.
    for fault in FAULTS:
        if fault == "save_outcome":
            _install_save_outcome()
        elif fault == "kill_before_seen_save":
            _install_kill_before_seen_save()
        elif fault.startswith("kill_at="):
            points.watch(fault.removeprefix("kill_at="), "kill")
        elif fault.startswith("notify_at="):
            points.watch(fault.removeprefix("notify_at="), "notify")
        elif fault.startswith("pause_at="):
            points.watch(fault.removeprefix("pause_at="), "pause")
        else:
            raise SystemExit(f"sitecustomize: unknown fault {fault!r}")
    if points.watches:
        _install_points(points)
        _install_draft_points(points)
    if LOCKED_BUILDS:
        _install_locked_builds(LOCKED_BUILDS)


def _install_draft_points(points: _Points) -> None:
    """The draft points (SPEC §16.5): a save that changes the record's ``drafts`` (the file on disk
    read first to tell), and the HTTP provider's free-text call."""
    from watcher.providers import _http
    from watcher.store.files import FileStore

    at = points.at
    real_save = FileStore.save_record

    def save_record(self: Any, record: Any) -> None:
        before = self.load_record(record.comment.id)
        last = record.drafts[-1] if record.drafts and (before is None or before.drafts != record.drafts) else None
        if last is not None and last.outcome is None:
            at("draft_before_reserve")
        real_save(self, record)
        if last is None:
            return
        if last.outcome is None:
            at("draft_after_reserve")
        elif last.error is not None and last.error.kind == "interrupted":
            at("draft_after_interrupted")
        else:
            at("draft_after_outcome")

    FileStore.save_record = save_record  # type: ignore[method-assign]

    real_text = _http.HttpProvider.complete_text

    def complete_text(self: Any, prompt: Any, **kwargs: Any) -> Any:
        answer = real_text(self, prompt, **kwargs)
        at("draft_after_answer")
        return answer

    _http.HttpProvider.complete_text = complete_text  # type: ignore[method-assign]


if FAULTS or LOCK_WAIT or CLOCK_SHIFT or LOCKED_BUILDS:
    _install()
