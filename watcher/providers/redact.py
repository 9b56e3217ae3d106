"""The API key never leaves a provider (SPEC §13.5), nor do credentials in its URL (§15.5).

    Redaction(key, *more)                      built once per provider from its key ("" = none)
                                               and the URL's credential_secrets(userinfo); for
                                               an agent's submit, from every key configured
    redaction.text(s) -> str                   ``s`` without any of them, in any form
    redaction.call(result) -> CallResult       the boundary of ``complete``: raw body (then the
                                               16 KiB cut), every verdict string, the error message
    redaction.probe(result) -> ProbeResult     the boundary of ``probe``: its message
    credential_secrets(userinfo) -> tuple      the forms ``user:pw@`` credentials can come back in

Why a pattern and not ``str.replace``: a server (or a proxy) that echoes the key sends it as
JSON, where ``sk-ab/cd`` may arrive as ``sk-ab\\/cd``, as ``\\u0073\\u006b…`` (upper or lower
hex, any mix), or escaped twice when the echo sits inside the model's answer, which is itself
JSON inside a JSON string. A literal replace on the raw text misses all of those, and the stored
raw body then shows the key to anyone who reads the inbox. The pattern matches every character
of the key in each of its JSON spellings, at any depth of escaping, so one pass over the raw text
also covers every string its decoding yields: a JSON string decodes token by token, so a key in a
decoded string is a run of such tokens in the raw text. Over-matching (a stray backslash before a
key character) only redacts a little more.

Several secrets are one pattern (an alternation, longest first) with one marker that contains
none of them: replacing one cannot spell another, and the loop in :meth:`Redaction.text` ends
for the same reason it ends for one.

Nothing here raises; the results are built with the same types the providers return.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from itertools import groupby
from urllib.parse import unquote

from pydantic import ValidationError

from watcher.models import AttemptError, Verdict
from watcher.providers.base import CallResult, ProbeResult, TextResult
from watcher.util.urls import REDACTED

# SPEC §6 keeps the first 16 KiB of a body. The cut comes after redaction: cutting first could
# keep a prefix of the key that no longer matches it.
RAW_LIMIT_BYTES = 16 * 1024
# Markers tried in turn: one that shares a bracket with the key could, next to the text around
# it, spell the key again (a key "d]x" in "d]x]x"); see Redaction.text.
_MARKERS = (REDACTED, "<redacted>", "(redacted)", "{redacted}")
# A key shorter than this is a placeholder, not a secret: the README's own Ollama example sets
# WATCHER_API_KEY=ollama (Ollama ignores the key), and redacting it turned every "ollama" in every
# message and in provider.json into [redacted]. Real keys are far longer (OpenAI's and Anthropic's
# run past 40 characters); 8 also keeps words like "test" or "none" readable. docs/design.md
# states the rule.
MIN_SECRET_CHARS = 8
_SHORT_ESCAPES = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def as_key(value: str) -> str:
    """A configured key as a secret to redact: ``""`` (nothing) for a placeholder under
    :data:`MIN_SECRET_CHARS` characters."""
    return value if len(value) >= MIN_SECRET_CHARS else ""


class Redaction:
    """Removes the secrets (the key, URL credentials) from text and from everything a provider
    returns."""

    def __init__(self, *secrets: str) -> None:
        secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._pattern = (
            re.compile("|".join(f"(?:{_secret_pattern(s)})" for s in secrets)) if secrets else None
        )
        self.marker = _marker(secrets, self._pattern) if self._pattern is not None else REDACTED

    def text(self, text: str) -> str:
        """``text`` with every occurrence of the key (literal or JSON-escaped) replaced."""
        if self._pattern is None:
            return text
        out, found = self._pattern.subn(self.marker, text)
        if not found:
            return text  # the usual case: nothing matched, so nothing can match after the pass
        # Repeat while anything matches. With a marker: a key ending in a backslash hides the next
        # copy right behind it ("0\\0\\": a match may not start after a backslash), and replacing
        # the first one uncovers it. Deleting instead can join the text on either side into a new
        # key. Each pass removes at least one match and the marker never matches (see _marker): it
        # ends.
        while self._pattern.search(out):
            out = self._pattern.sub(self.marker, out)
        return out

    def call(self, result: CallResult) -> CallResult:
        """``result`` as it may leave the provider: raw redacted then cut, verdict and message
        redacted.

        The verdict is validated again. One whose redacted strings no longer fit the schema (the
        marker is longer than a short key) has them cut back to their original length, which the
        schema accepted: redaction should not cost the comment an attempt. One that still fails (a
        summary that was nothing but a key every marker contains, so it was deleted) becomes
        ``invalid_verdict``.
        """
        raw = (
            _first_bytes(self.text(result.raw), RAW_LIMIT_BYTES) if result.raw is not None else None
        )
        error = self._error(result.error)
        verdict = result.verdict
        if verdict is not None:
            checked = self._verdict(verdict)
            verdict, error = (checked, None) if isinstance(checked, Verdict) else (None, checked)
        return dataclasses.replace(result, verdict=verdict, error=error, raw=raw)

    def text_call(self, result: TextResult) -> TextResult:
        """``result`` of a free-text call (a draft) as it may leave the provider: raw redacted then
        cut, the text and the message redacted."""
        raw = (
            _first_bytes(self.text(result.raw), RAW_LIMIT_BYTES) if result.raw is not None else None
        )
        text = self.text(result.text) if result.text is not None else None
        return dataclasses.replace(result, text=text, error=self._error(result.error), raw=raw)

    def probe(self, result: ProbeResult) -> ProbeResult:
        """``result`` with its message redacted."""
        return dataclasses.replace(result, message=self.text(result.message))

    def _error(self, error: AttemptError | None) -> AttemptError | None:
        if error is None:
            return None
        return error.model_copy(update={"message": self.text(error.message)})

    def _verdict(self, verdict: Verdict) -> Verdict | AttemptError:
        fields = verdict.model_dump()
        redacted = {k: self.text(v) if isinstance(v, str) else v for k, v in fields.items()}
        if redacted == fields:
            return verdict
        fitted = {k: _fit(v, fields[k]) if isinstance(v, str) else v for k, v in redacted.items()}
        for candidate in (redacted, fitted):
            try:
                return Verdict.model_validate(candidate)
            except ValidationError:
                continue
        return AttemptError(
            kind="invalid_verdict",
            message="model answer fails the verdict schema once the API key is redacted from it",
        )


def credential_secrets(userinfo: str | None) -> tuple[str, ...]:
    """What to redact for a URL's ``user:password`` (percent-encoded, as written in the URL).

    The password as written and decoded, and the ``Authorization: Basic`` value a server may echo.
    The user name only when it stands alone (``https://TOKEN@host``: then it is the secret);
    beside a password it is a name, and redacting it would cut it out of every summary."""
    if not userinfo:
        return ()
    user, colon, password = userinfo.partition(":")
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    alone = () if colon and password else (user, unquote(user))
    return tuple(dict.fromkeys(s for s in (password, unquote(password), basic, *alone) if s))


def _secret_pattern(secret: str) -> str:
    # Every spelling of a character starts with a backslash or is the character itself, so a
    # match starts with the key's first character or a backslash: saying so first lets the
    # engine skip every other position at once.
    # A match may not start inside a run of backslashes: every key character's pattern begins
    # with a possessive backslash run, and starting at each backslash of a long run would make a
    # hostile 1 MiB body of backslashes quadratic.
    parts = [f"(?=[{re.escape(secret[0])}\\\\])", r"(?<!\\)"]
    for char, run in groupby(secret):
        count = len(list(run))
        if char == "\\":
            # Literal or escaped ("\\\\") at any depth: at least as many backslashes. ("\u005c"
            # is not matched: no encoder we know spells a backslash that way.)
            parts.append(rf"\\{{{count},}}+")
        else:
            parts.extend([_char_pattern(char)] * count)
    return "".join(parts)


def _char_pattern(char: str) -> str:
    units = char.encode("utf-16-be")  # a character outside the BMP is escaped as a surrogate pair
    hex_form = "".join(
        r"\\++u" + _hex(int.from_bytes(units[i : i + 2], "big")) for i in range(0, len(units), 2)
    )
    # Any backslashes before the literal character: "\/" and "\"" are its one-level escapes,
    # "\\\/" the same one level deeper.
    forms = [r"\\*+" + re.escape(char), hex_form]
    if char in _SHORT_ESCAPES:
        forms.append(r"\\++" + _SHORT_ESCAPES[char])
    return "(?:" + "|".join(forms) + ")"


def _hex(unit: int) -> str:
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{unit:04x}")


def _marker(secrets: tuple[str, ...], pattern: re.Pattern[str]) -> str:
    # A marker whose brackets are in no secret cannot be part of a new match across its edge
    # (escapes contain no brackets), and one the pattern finds nothing in cannot hold one.
    for marker in _MARKERS:
        if all(marker[0] not in s and marker[-1] not in s for s in secrets) and not pattern.search(
            marker
        ):
            return marker
    return ""


def _fit(text: str, original: str) -> str:
    """``text`` cut back to the length of ``original`` (which the schema accepted)."""
    return text if len(text) <= len(original) else text[: max(len(original) - 1, 0)] + "…"


def _first_bytes(text: str, limit: int) -> str:
    """At most ``limit`` bytes of UTF-8, never a split character (lone surrogates kept)."""
    data = text.encode("utf-8", "surrogatepass")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")
