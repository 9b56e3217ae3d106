"""The offline provider: a deterministic keyword heuristic, no network, no model (SPEC §3, §6).

It exists so the pipeline can be demonstrated and tested without an API key. Every verdict it
produces says so (summary prefix ``[offline]``, model ``heuristic-v2``) and says how good it is
(:data:`MEASURED`), and it goes through the same JSON text → parse → schema validation path as a
real model's answer.

It works from the cached :class:`Prompt` alone (later attempts reuse the prompt, not the
comment), by reading the fenced comment block back out of ``prompt.user``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watcher.models import AttemptError, Category, Prompt
from watcher.providers.base import CallResult, ProbeResult, ProviderSettings
from watcher.providers.parse import parse_verdict_text
from watcher.providers.prompts import fenced_blocks

MODEL = "heuristic-v2"  # a new version whenever the rules change: eval groups verdicts by model
SUMMARY_PREFIX = "[offline] "
_SNIPPET = 160


@dataclass(frozen=True)
class Measured:
    """The heuristic's figures on the bundled labelled set (``watcher eval --set bundled``; SPEC
    §15.6): on the whole set, which its rules were tuned against, and on the held-out comments,
    written after the rules were fixed — the better guess of how it does on comments it has not
    seen. tests/test_eval_set.py recomputes them from the set."""

    comments: int
    precision: float
    recall: float
    held_out: int
    held_out_precision: float
    held_out_recall: float

    def said(self) -> str:
        return (
            f"labelled set: precision {self.precision:.2f}, recall {self.recall:.2f}; "
            f"unseen comments: {self.held_out_precision:.2f}, {self.held_out_recall:.2f}"
        )


MEASURED = Measured(
    comments=192,
    precision=0.988,
    recall=0.903,
    held_out=32,
    held_out_precision=0.9,
    held_out_recall=0.6,
)


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
    r"buy|sell|crypto|cheap|discount\w*|promo\w*|coupon\w*|followers|guaranteed|high quality"
    r"|traffic"
)
_BUG = _words(
    r"bugs?|buggy|errors?|crash\w*|traceback|exceptions?|stack ?trace|doesn't work|does not work"
    r"|didn't work|not working|broken|fails?|failed|failing|segfault|undefined is not"
    r"|cannot find module|404|race condition|deadlock|memory leak|reproduc\w+|regression"
    r"|panics?|panicked|vulnerab\w+|injection|doesn't compile|does not compile|won't compile"
)
# An error as a program prints it ("RuntimeError: …", "npm ERR!"): a code-only comment that is a
# pasted failure is a bug report too.
_ERROR_OUTPUT = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\bERR!|^E\s{2,}", re.MULTILINE)
# A correction of the article: needs the author, and soon (the prompt's "high": a factual mistake).
_CORRECTION = _words(
    r"correction|isn't (?:quite )?right|is not (?:quite )?right|isn't accurate|not accurate"
    r"|is wrong|are wrong|outdated|out of date|deprecated|no longer true|isn't true"
    r"|not true anymore|you mean|typo"
)
# The comment settles itself ("never mind, found it"): nothing left for the author to answer.
_RESOLVED = _words(
    r"never ?mind|nvm|my bad|figured it out|sorted|solved it|found it|got it working"
    r"|ignore (?:me|that)"
)
# A question for the crowd, not the author ("Does anyone know …", "what's everyone using?").
_CROWD = _words(r"anyone|anybody|everyone|everybody|is it just me|unrelated")
_SECOND_PERSON = _words(r"you|your|you're|you've|yours")
# Asked for a laugh, not an answer. A bare ", right?" only without "you": "…becomes 4x what you
# configured, right?" asks the author to confirm (the demo sample's comment 4cf3).
_JOKE = re.compile(r"\bam i right\s*\?|[\U0001f602\U0001f923\U0001f604]|\blol\b", re.IGNORECASE)
_TAG_QUESTION = re.compile(r",\s*right\s*\?", re.IGNORECASE)
# Self-promotion beside a link: the author owes it no answer.
_SELF_PROMO = _words(
    r"i built|i made|i wrote a tool|i maintain|we're building|we are building|shameless plug"
    r"|check out my|my (?:youtube|channel|video|course|newsletter|repo|tool|template)"
    r"|subscribe|upvote"
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
    r"|instead of|it would (?:really )?help|would be useful|would make|maybe add|could add"
    r"|please add|improve\w*"
    r"|(?:is|are) missing|clarify"
)
_PRAISE = _words(
    r"thanks?|thank you|thx|great|love[ds]?|awesome|amazing|nice|helpful|excellent|well written"
    r"|brilliant|good (?:post|article|read|job)|kudos|bookmarked"
)
_PRAISE_EMOJI = re.compile("[\U0001f525\U0001f44f\u2764\U0001f64c\U0001f64f\U0001f60d\U0001f680]")

_PRIORITY = {
    "bug_report": "high",
    "question": "normal",
    "discussion": "normal",
    "feedback": "normal",
}
_HINTS = {
    "question": (
        "Answer the question directly; link the relevant part of the article if it already "
        "covers it."
    ),
    "bug_report": (
        "Ask for versions and exact steps or the full error if missing; confirm or fix the problem."
    ),
    "discussion": (
        "Engage with the argument: acknowledge the point and explain your reasoning or trade-offs."
    ),
    "feedback": "Thank them for the suggestion and say whether and when you will act on it.",
}


class OfflineProvider:
    """Deterministic: the same prompt gives the same verdict, every time, in every process."""

    name = "offline"
    model = MODEL

    def __init__(
        self, settings: ProviderSettings | None = None, *, transport: object = None
    ) -> None:
        """Takes what every provider's factory takes (the registry builds them alike), uses
        neither."""

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
    if 2 * strong + weak >= 4 or (
        linked and (strong >= 1 or weak >= 3 or _SELF_PROMO.search(flat))
    ):
        return "spam"
    if _RESOLVED.search(flat):
        return "other"
    if _BUG.search(flat) or _ERROR_OUTPUT.search(text):
        return "bug_report"
    if _CORRECTION.search(flat):
        return "feedback"
    if _DISCUSSION_STRONG.search(flat):
        return "discussion"
    asks = "?" in flat or "\uff1f" in flat or _QUESTION_START.match(flat)
    impersonal = not _SECOND_PERSON.search(flat)
    if asks and (
        _JOKE.search(flat) or (impersonal and (_TAG_QUESTION.search(flat) or _CROWD.search(flat)))
    ):
        return "other"
    if asks:
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
    head = f"{SUMMARY_PREFIX}heuristic guess ({MEASURED.said()}): {category}"
    if not flat:
        return f"{head} (empty comment)"
    room = min(_SNIPPET, 280 - len(head) - 4)  # the verdict's summary holds 280 characters
    snippet = flat if len(flat) <= room else flat[: room - 1] + "…"
    return f"{head}: “{snippet}”"


if TYPE_CHECKING:  # mypy --strict proves here that the class satisfies the Provider protocol
    from watcher.providers.base import Provider

    _IS_A_PROVIDER: type[Provider] = OfflineProvider
