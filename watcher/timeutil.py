"""UTC timestamps as the files store them: ``2026-05-14T09:12:44.123456Z``."""

from __future__ import annotations

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
