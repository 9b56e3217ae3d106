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

from watcher.models import AttemptError, Category, Prompt
from watcher.prompts import fenced_blocks
from watcher.providers.base import CallResult
from watcher.providers.parse import parse_verdict_text

MODEL = "heuristic-v1"
SUMMARY_PREFIX = "[offline] "
_SNIPPET = 160


def _words(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w'])(?:" + "|".join(patterns) + r")(?![\w'])", re.IGNORECASE)


_LINK = re.compile(r"https?://|\bwww\.", re.IGNORECASE)
_PROMO = _words(
    r"buy", r"cheap", r"discount\w*", r"promo\w*", r"coupon\w*", r"crypto\w*", r"bitcoin", r"forex",
    r"casino\w*", r"betting", r"viagra", r"loans?", r"make money", r"earn \$?\d+\w*", r"work from home",
    r"click here", r"dm me", r"whatsapp", r"telegram", r"seo services?", r"followers", r"limited offer",
    r"investment opportunit\w+",
)
_BUG = _words(
    r"bugs?", r"buggy", r"errors?", r"crash\w*", r"traceback", r"exceptions?", r"stack ?trace",
    r"doesn't work", r"does not work", r"didn't work", r"not working", r"broken", r"fails?", r"failed",
    r"failing", r"segfault", r"undefined is not", r"cannot find module", r"404",
)
_DISCUSSION_STRONG = _words(
    r"i disagree", r"disagree", r"what about", r"on the other hand", r"counterpoint", r"i'd argue",
    r"in my opinion", r"imo", r"in my experience", r"not sure i agree", r"i'm not convinced",
)
_DISCUSSION_WEAK = _words(r"i think", r"i believe", r"i feel like", r"i prefer", r"personally")
_QUESTION_START = re.compile(
    r"(?:^|[.!?\n]\s*)(?:how|why|what|when|where|which|who|can|could|would|should|is|are|do|does|did|"
    r"will|any idea|anyone know)\b",
    re.IGNORECASE,
)
_FEEDBACK = _words(
    r"you should", r"you could", r"suggest\w*", r"would be (?:nice|great|helpful|better)", r"consider",
    r"recommend\w*", r"typo", r"instead of", r"it would help", r"maybe add", r"could add", r"improve\w*",
    r"missing", r"clarify",
)
_PRAISE = _words(
    r"thanks?", r"thank you", r"thx", r"great", r"love[ds]?", r"awesome", r"amazing", r"nice", r"helpful",
    r"excellent", r"well written", r"brilliant", r"good (?:post|article|read|job)", r"kudos", r"bookmarked",
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

    def complete(self, prompt: Prompt) -> CallResult:
        started = time.monotonic()
        text = fenced_blocks(prompt.user).get("COMMENT", prompt.user)
        answer = heuristic_answer(text)
        parsed = parse_verdict_text(answer)
        duration_ms = int((time.monotonic() - started) * 1000)
        if isinstance(parsed, AttemptError):
            return CallResult(error=parsed, raw=answer, duration_ms=duration_ms)
        return CallResult(verdict=parsed, raw=answer, duration_ms=duration_ms)

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
    promo = len(_PROMO.findall(flat))
    if promo and (_LINK.search(flat) or promo >= 2):
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
