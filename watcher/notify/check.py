"""``watcher check``'s look at WATCHER_NOTIFY (SPEC §16.1): each target parsed by Apprise and named,
redacted — nothing sent (``watcher notify --test`` sends)."""

from __future__ import annotations

from dataclasses import dataclass

from watcher.notify.redact import redaction
from watcher.notify.targets import Target


@dataclass(frozen=True)
class TargetCheck:
    name: str  # "notify", or "notify #2" when there are several
    ok: bool
    detail: str
    fix: str = ""


def check_targets(targets: tuple[Target, ...]) -> list[TargetCheck]:
    if not targets:
        return []  # not set: stdout is the channel, and check's rows are those it always had
    from watcher.notify.send import validate

    redact = redaction(targets)
    rows = []
    for target in targets:
        name = "notify" if len(targets) == 1 else f"notify #{target.position}"
        why = validate(target, redact)
        if why is None:
            detail = f"{target.shown}: Apprise understands it (nothing sent)"
            rows.append(TargetCheck(name, True, detail))
        else:
            fix = "fix the URL: https://github.com/caronc/apprise/wiki lists each service's form"
            rows.append(TargetCheck(name, False, f"{target.shown}: {why}", fix))
    return rows
