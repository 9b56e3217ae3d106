"""UTC timestamps as the files store them: ``2026-05-14T09:12:44.123456Z``."""

from __future__ import annotations

import re
from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime | None = None) -> str:
    # isoformat, not strftime("%Y-%m-%dT%H:%M:%S.%fZ"): the same text (always six fraction
    # digits; "+00:00" becomes "Z") at a fraction of the cost, and every model call stamps a
    # few (reserved, finished, its signal line, the index entry).
    return (moment or utcnow()).astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def parse_iso(text: str) -> datetime:
    """Inverse of :func:`iso`; also accepts Forem's ``…Z`` and offset forms."""
    moment = datetime.fromisoformat(text)  # Python >= 3.11 reads a trailing Z
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# A stored timestamp inside a message: date, time, optional seconds and fraction, zone.
_STAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)")


def local_minutes(text: str) -> str:
    """``text`` with each stored timestamp as a person reads one (SPEC §15.3): local time, to the
    minute, with its zone (``2026-12-01T08:09:21.996420Z`` → ``2026-12-01 09:09 CET``). For human
    output only; files and JSON keep UTC."""

    def shown(match: re.Match[str]) -> str:
        try:
            moment = parse_iso(match.group(0))
        except ValueError:
            return match.group(0)
        return moment.astimezone().strftime("%Y-%m-%d %H:%M %Z").rstrip()

    return _STAMP.sub(shown, text)
