"""Test-only fault injection, loaded into a watcher subprocess via PYTHONPATH.

``WATCHER_TEST_FAULT`` names the fault; product code has no switches for any of this.

- ``save_outcome``            saving an attempt's outcome fails (SaveFailed, as on a full disk)
- ``kill_before_seen_save``   SIGKILL instead of saving seen.json
- ``kill_at=<point>[:<n>]``   SIGKILL the process the ``n``-th time (default 1) it reaches a
  step boundary of SPEC §7/§8; :data:`KILL_POINTS` names them. The wrappers sit on the module
  attributes the pipeline calls through, so the real code runs up to the boundary.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

FAULT = os.environ.get("WATCHER_TEST_FAULT", "")

KILL_POINTS = (
    "after_plan",  # planned (network done), before asking for the pipeline lock
    "after_lock",  # holding the pipeline lock, nothing written yet
    "after_inbox_create",  # a discovered comment's inbox file (no attempts) is on disk
    "before_reserve_write",  # about to write the reservation
    "after_reserve_write",  # attempt n+1 reserved on disk, the request not sent
    "after_answer",  # the model answered (parsed), the outcome not written
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
)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_kill(spec: str) -> None:
    from watcher import durable, inbox, seen, signals
    from watcher.pipeline import locked, provider_state
    from watcher.providers import _http

    point, _, nth = spec.partition(":")
    if point not in KILL_POINTS:
        raise SystemExit(f"sitecustomize: unknown kill point {point!r}")
    target, seen_count = int(nth or 1), [0]

    def at(name: str) -> None:
        if name == point:
            seen_count[0] += 1
            if seen_count[0] == target:
                _die()

    real_lock = locked.pipeline_lock

    @contextmanager
    def lock(paths: Any, **kwargs: Any) -> Iterator[None]:
        at("after_plan")
        with real_lock(paths, **kwargs):
            at("after_lock")
            yield

    locked.pipeline_lock = lock

    real_save = inbox.save

    def save(paths: Any, record: Any) -> None:
        last = record.attempts[-1] if record.attempts else None
        if last is not None and last.outcome is None:
            at("before_reserve_write")
        real_save(paths, record)
        if last is None:
            at("after_inbox_create")
        elif last.outcome is None:
            at("after_reserve_write")
        elif last.error is not None and last.error.kind == "interrupted":
            at("after_interrupted_write")
        else:
            at("after_outcome_write")

    inbox.save = save

    real_complete = _http.HttpProvider.complete

    def complete(self: Any, prompt: Any) -> Any:
        answer = real_complete(self, prompt)
        at("after_answer")
        return answer

    _http.HttpProvider.complete = complete  # type: ignore[method-assign]

    real_append = signals._append_bytes

    def append_bytes(path: Any, payload: bytes) -> None:
        if point == "torn_signal_append" and seen_count[0] + 1 == target:
            # A writer dying in the middle of its line: half the bytes, no newline.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, payload[: max(1, len(payload) // 2)])
            os.fsync(fd)
            os.close(fd)
            at("torn_signal_append")
        real_append(path, payload)
        at("after_signal_append")

    signals._append_bytes = append_bytes

    real_seen_save = seen.save

    def seen_save(*args: Any, **kwargs: Any) -> Any:
        at("before_seen_save")
        saved = real_seen_save(*args, **kwargs)
        at("after_seen_save")
        return saved

    seen.save = seen_save

    def wrap_write(module: Any, hook: Callable[[Any], tuple[str | None, str | None]]) -> None:
        real = module.write_model

        def write_model(path: Any, model: Any) -> None:
            before, after = hook(path)
            if before:
                at(before)
            real(path, model)
            if after:
                at(after)

        module.write_model = write_model

    def counter_points(path: Any) -> tuple[str | None, str | None]:
        if path.parent.name == "signals" and path.name == "state.json":
            return "counter_before_state", "counter_after_state"
        if path.parent.name == "signals" and path.name == "cursor.json":
            return None, "counter_after_cursor"
        return None, None

    wrap_write(durable, counter_points)  # signals writes through durable.write_model
    wrap_write(provider_state, lambda path: (None, "after_cooldown_write"))  # only write_cooldown uses it


def _install() -> None:
    from watcher import inbox, seen
    from watcher.errors import SaveFailed

    if FAULT == "save_outcome":
        real_save = inbox.save

        def save(paths, record):  # type: ignore[no-untyped-def]
            if record.attempts and record.attempts[-1].outcome is not None:
                raise SaveFailed(paths.inbox_file(record.comment.id), OSError(28, "No space left on device (injected)"))
            real_save(paths, record)

        inbox.save = save
    elif FAULT == "kill_before_seen_save":
        def save(*args, **kwargs):  # type: ignore[no-untyped-def]
            os.kill(os.getpid(), signal.SIGKILL)

        seen.save = save
    elif FAULT.startswith("kill_at="):
        _install_kill(FAULT.removeprefix("kill_at="))


if FAULT:
    _install()
