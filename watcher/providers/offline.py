"""The offline provider: a deterministic keyword heuristic, no network, no model (SPEC §3, §6).

It exists so the pipeline can be demonstrated and tested without an API key. Every verdict it
produces says so (summary prefix ``[offline]``, model ``heuristic-v1``), and it goes through the
same JSON text → parse → schema validation path as a real model's answer.

It works from the cached :class:`Prompt` alone (later attempts reuse the prompt, not the
comment), by reading the fenced comment block back out of ``prompt.user``.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from watcher.models import AttemptError, Category, Prompt
from watcher.prompts import fenced_blocks
from watcher.providers.base import CallResult, ProbeResult, ProviderSettings
from watcher.providers.parse import parse_verdict_text

MODEL = "heuristic-v1"
SUMMARY_PREFIX = "[offline] "
_SNIPPET = 160


def _words(alternatives: str) -> re.Pattern[str]:
    """Whole words/phrases only: "bug" must not fire inside "debugger", nor "imo" in "limo"."""
    return re.compile(rf"(?<![\w'])(?:{alternatives})(?![\w'])", re.IGNORECASE)


_LINK = re.compile(r"https?://|\bwww\.", re.IGNORECASE)
# Strong: rarely in an honest comment. Weak: common in honest ones too, so they only count in
# numbers or next to a link.
_PROMO_STRONG = _words(
    r"cryptocurrenc\w+|trading bot|bitcoin|forex|casino\w*|betting|viagra|loans?|make money"
    r"|earn \$?\d+\w*|work from home|click here|dm me|whatsapp|telegram|seo services?|backlinks?"
    r"|limited offer|investment opportunit\w+|only \$\d+|\$\d+(?:/day| per day| a day)"
)
_PROMO_WEAK = _words(
    r"buy|sell|crypto|cheap|discount\w*|promo\w*|coupon\w*|followers|guaranteed|high quality|traffic"
)
_BUG = _words(
    r"bugs?|buggy|errors?|crash\w*|traceback|exceptions?|stack ?trace|doesn't work|does not work"
    r"|didn't work|not working|broken|fails?|failed|failing|segfault|undefined is not"
    r"|cannot find module|404|race condition|deadlock|memory leak|reproduc\w+|regression"
)
_DISCUSSION_STRONG = _words(
    r"i disagree|disagree|what about|on the other hand|counterpoint|i'd argue|in my opinion|imo"
    r"|in my experience|not sure i agree|i'm not convinced|push back|pushback|devil's advocate"
)
_DISCUSSION_WEAK = _words(r"i think|i believe|i feel like|i prefer|personally")
# Only at the very start: a question word mid-comment ("…, which is why …") says nothing.
_QUESTION_START = re.compile(
    r"(?:how|why|what|when|where|which|who|can|could|would|should|is|are|do|does|did|will"
    r"|any idea|anyone know)\b",
    re.IGNORECASE,
)
_FEEDBACK = _words(
    r"you should|you could|suggest\w*|would be (?:nice|great|helpful|better)|consider|recommend\w*"
    r"|typo|instead of|it would help|maybe add|could add|improve\w*|missing|clarify"
)
_PRAISE = _words(
    r"thanks?|thank you|thx|great|love[ds]?|awesome|amazing|nice|helpful|excellent|well written"
    r"|brilliant|good (?:post|article|read|job)|kudos|bookmarked"
)
_PRAISE_EMOJI = re.compile("[\U0001f525\U0001f44f\u2764\U0001f64c\U0001f64f\U0001f60d\U0001f680]")

_PRIORITY = {"bug_report": "high", "question": "normal", "discussion": "normal", "feedback": "normal"}
_HINTS = {
    "question": "Answer the question directly; link the relevant part of the article if it already covers it.",
    "bug_report": "Ask for versions and exact steps or the full error if missing; confirm or fix the problem.",
    "discussion": "Engage with the argument: acknowledge the point and explain your reasoning or trade-offs.",
    "feedback": "Thank them for the suggestion and say whether and when you will act on it.",
}


class OfflineProvider:
    """Deterministic: the same prompt gives the same verdict, every time, in every process."""

    name = "offline"
    model = MODEL

    def __init__(self, settings: ProviderSettings | None = None, *, transport: object = None) -> None:
        """Takes what every provider's factory takes (the registry builds them alike), uses neither."""

    def complete(self, prompt: Prompt) -> CallResult:
        started = time.monotonic()
        text = fenced_blocks(prompt.user).get("COMMENT", prompt.user)
        answer = heuristic_answer(text)
        parsed = parse_verdict_text(answer)
        duration_ms = int((time.monotonic() - started) * 1000)
        if isinstance(parsed, AttemptError):
            return CallResult(error=parsed, raw=answer, duration_ms=duration_ms)
        return CallResult(verdict=parsed, raw=answer, duration_ms=duration_ms)

    def probe(self) -> ProbeResult:
        """Always passes: there is no server to be down and no model to be missing."""
        return ProbeResult(ok=True, message="offline: the built-in heuristic needs no server")

    def close(self) -> None:
        """Nothing to release; present so every provider can be closed the same way."""


def heuristic_answer(text: str) -> str:
    """The JSON text the heuristic 'model' answers for a comment."""
    category = categorize(text)
    verdict = {
        "needs_reply": category in _HINTS,
        "category": category,
        "priority": _PRIORITY.get(category, "low"),
        "summary": _summary(category, text),
        "reply_hint": _HINTS.get(category, ""),
    }
    return json.dumps(verdict, ensure_ascii=False)


def categorize(text: str) -> Category:
    """First matching rule wins; the order encodes which signal is most telling."""
    flat = " ".join(text.replace("\u2019", "'").split())
    strong, weak = len(_PROMO_STRONG.findall(flat)), len(_PROMO_WEAK.findall(flat))
    linked = _LINK.search(flat) is not None
    if 2 * strong + weak >= 4 or (linked and (strong >= 1 or weak >= 3)):
        return "spam"
    if _BUG.search(flat):
        return "bug_report"
    if _DISCUSSION_STRONG.search(flat):
        return "discussion"
    if "?" in flat or _QUESTION_START.match(flat):
        return "question"
    if _DISCUSSION_WEAK.search(flat):
        return "discussion"
    if _FEEDBACK.search(flat):
        return "feedback"
    if _PRAISE.search(flat) or _PRAISE_EMOJI.search(flat):
        return "praise"
    return "other"


def _summary(category: str, text: str) -> str:
    flat = " ".join(text.split())
    if not flat:
        return f"{SUMMARY_PREFIX}heuristic guess: {category} (empty comment)"
    snippet = flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 1] + "…"
    return f"{SUMMARY_PREFIX}heuristic guess: {category}: “{snippet}”"


if TYPE_CHECKING:  # mypy --strict proves here that the class satisfies the Provider protocol
    from watcher.providers.base import Provider

    _IS_A_PROVIDER: type[Provider] = OfflineProvider
