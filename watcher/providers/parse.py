"""Model text → :class:`Verdict`, or the classified reason it is not one (SPEC §6).

Shared by all three providers, the offline heuristic included, so every verdict in an inbox
file went through the same validation. Pure, and never raises: model text is arbitrary input.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from pydantic import ValidationError

from watcher.models import AttemptError, Category, Priority, Verdict

# A single ```json … ``` (or bare ```) fence around the whole answer; models add it unasked.
_FENCE_RE = re.compile(r"\A```[ \t]*(?:json|JSON)?[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_MESSAGE_SNIPPET = 200

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "needs_reply": {
            "type": "boolean",
            "description": "Whether the article author should reply.",
        },
        "category": {"type": "string", "enum": list(Category.__args__)},  # type: ignore[attr-defined]
        "priority": {"type": "string", "enum": list(Priority.__args__)},  # type: ignore[attr-defined]
        # Length limits are stated in words: OpenAI's strict mode rejects minLength/maxLength
        # on some models, and pydantic enforces them on the answer anyway.
        "summary": {"type": "string", "description": "One neutral sentence, 1 to 280 characters."},
        "reply_hint": {
            "type": "string",
            "description": "What a good reply would address, at most 500 characters; empty if no reply is needed.",
        },
    },
    "required": ["needs_reply", "category", "priority", "summary", "reply_hint"],
    "additionalProperties": False,
}


def verdict_json_schema() -> dict[str, Any]:
    """The strict JSON schema of a verdict: every property required, nothing else allowed.

    A fresh copy each call, so a caller that edits its request body cannot change the next one.
    """
    return copy.deepcopy(_SCHEMA)


def parse_verdict_text(text: str) -> Verdict | AttemptError:
    """A validated verdict, or an ``AttemptError`` of kind ``malformed_json`` / ``invalid_verdict``."""
    try:
        data = json.loads(_strip_fence(text.strip()))
    except (ValueError, RecursionError, TypeError) as exc:
        # ValueError covers JSONDecodeError and the int-digits limit; RecursionError a "[[[[…".
        return AttemptError(
            kind="malformed_json", message=f"model answer is not JSON: {_short(str(exc))}"
        )
    if not isinstance(data, dict):
        return AttemptError(
            kind="malformed_json",
            message=f"model answer is JSON {type(data).__name__}, not an object",
        )
    try:
        return Verdict.model_validate(data)
    except ValidationError as exc:
        return AttemptError(
            kind="invalid_verdict", message=f"model answer fails the verdict schema: {_errors(exc)}"
        )
    except (
        ValueError,
        RecursionError,
    ) as exc:  # defensive: model text must never escape as an exception
        return AttemptError(
            kind="invalid_verdict",
            message=f"model answer fails the verdict schema: {_short(str(exc))}",
        )


def _strip_fence(text: str) -> str:
    match = _FENCE_RE.match(text)
    return match.group(1) if match else text


def _errors(exc: ValidationError) -> str:
    # Field paths and messages only: the offending input values are model text, not ours to echo.
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{where}: {error['msg']}")
    return _short("; ".join(parts))


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_SNIPPET else text[: _MESSAGE_SNIPPET - 1] + "…"
