"""UTC timestamps as the files store them: ``2026-05-14T09:12:44.123456Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime | None = None) -> str:
    return (moment or utcnow()).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    """Inverse of :func:`iso`; also accepts Forem's ``…Z`` and offset forms."""
    moment = datetime.fromisoformat(text)  # Python >= 3.11 reads a trailing Z
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
