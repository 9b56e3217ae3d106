"""Model text → :class:`Verdict`, or the classified reason it is not one (SPEC §6).

Shared by all three providers, the offline heuristic included, so every verdict in an inbox
file went through the same validation. Pure, and never raises: model text is arbitrary input.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

from pydantic import ValidationError

from watcher.models import AttemptError, Verdict

# A single ```json … ``` (or bare ```) fence around the whole answer; models add it unasked.
_FENCE_RE = re.compile(r"\A```[ \t]*(?:json|JSON)?[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_MESSAGE_SNIPPET = 200

# What each field means, for the model. The length limits are filled in from the Verdict model
# (OpenAI's strict mode rejects minLength/maxLength on some models, so they travel as words, and
# pydantic enforces them on the answer anyway).
_WORDS = {
    "needs_reply": "Whether the article author should reply.",
    "summary": "One neutral sentence, {minLength} to {maxLength} characters.",
    "reply_hint": (
        "What a good reply would address, at most {maxLength} characters; "
        "empty if no reply is needed."
    ),
}
_STATED_IN_WORDS = ("minLength", "maxLength")


@functools.cache
def _strict_schema() -> dict[str, Any]:
    """``Verdict.model_json_schema()`` as the providers take it (OpenAI strict mode): every
    property required, no other property allowed, no titles, lengths in the descriptions."""
    model = Verdict.model_json_schema()
    properties: dict[str, Any] = {}
    for name, spec in model["properties"].items():
        # "type" first, as the schema has always been sent (a byte-identical request body).
        prop = {"type": spec["type"]}
        prop.update((k, v) for k, v in spec.items() if k not in ("title", *_STATED_IN_WORDS))
        if name in _WORDS:
            prop["description"] = _WORDS[name].format_map(spec)
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def verdict_json_schema() -> dict[str, Any]:
    """The strict JSON schema of a verdict, derived from :class:`Verdict` (see _strict_schema).

    A fresh copy each call, so a caller that edits its request body cannot change the next one.
    """
    return copy.deepcopy(_strict_schema())


def parse_verdict_text(text: str) -> Verdict | AttemptError:
    """A validated verdict, or an ``AttemptError`` of kind ``malformed_json`` or
    ``invalid_verdict``."""
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
