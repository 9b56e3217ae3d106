"""``watcher usage``: the month's model calls and tokens, per provider and model, per day and in
all, read from the recorded usage of the attempts and of the reply drafts (SPEC §16.5: a draft is
a call of its own) in the inbox files; dollars where ``WATCHER_PRICES`` prices the model (SPEC
§16.4).

Free and read-only: it reads the state, never a provider.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, NamedTuple

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import Context, repaired_index
from watcher.commands.results import Result
from watcher.commands.results.reading import ModelUsage
from watcher.commands.screen import Screen, one_line
from watcher.commands.spec import LOCAL, VIEW_CODES, Command, Mcp, McpArg, Param
from watcher.errors import ConfigError, UsageError
from watcher.models import Attempt, SeenFile
from watcher.state.drafts_model import Draft


class DayUsage(Result):
    day: str = Field(description="The UTC day, YYYY-MM-DD.")
    models: list[ModelUsage]


class UsageResult(Result):
    month: str = Field(description="The UTC month, YYYY-MM.")
    models: list[ModelUsage] = Field(description="The month's totals per provider and model.")
    days: list[DayUsage] = Field(description="Each day of the month with a call, oldest first.")
    dollars: float | None = Field(
        description="The month's cost of the priced models; null when none is priced."
    )


_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


class TooMany(Exception):
    """More inbox files to read than a quick view may."""


class _Call(NamedTuple):
    """One attempt or reply draft, as the sums read it."""

    provider: str
    model: str
    day: str
    input_tokens: int | None
    output_tokens: int | None
    draft: bool

    @classmethod
    def of(cls, made: Attempt | Draft) -> _Call:
        if isinstance(made, Draft):
            tokens_in, tokens_out = made.input_tokens, made.output_tokens
        else:
            tokens_in = made.usage.input_tokens if made.usage else None
            tokens_out = made.usage.output_tokens if made.usage else None
        day = made.reserved_at[:10]
        return cls(made.provider, made.model, day, tokens_in, tokens_out, isinstance(made, Draft))


def usage(
    ctx: Context,
    month: str | None = None,
    *,
    most_files: int | None = None,
    index: SeenFile | None = None,
) -> UsageResult:
    """The calls and tokens of ``month`` (YYYY-MM; default this UTC month). ``most_files``: read
    at most that many inbox files, else raise :class:`TooMany` (``status`` stays quick);
    ``index``: the one the caller already read."""
    from watcher.util.timeutil import utcnow

    month = month or (ctx.hooks.clock or utcnow)().strftime("%Y-%m")  # the clock batches run by
    if not _MONTH.fullmatch(month):
        raise UsageError(f"--month takes YYYY-MM, got {month!r}")
    prices = parse_prices(ctx.settings.prices)
    calls: list[_Call] = []
    # An attempt or a draft reserved in the month wrote its inbox file then, and the index entry
    # derived from that file (watcher.state.seen.entry_from) was updated then or later: the files
    # of comments untouched since before the month are not read (status gives this month's line).
    # A comment without attempts is read too: it may have drafts.
    touched = [
        cid
        for cid, entry in (index or repaired_index(ctx)).comments.items()
        if entry.updated_at[:7] >= month
    ]
    if most_files is not None and len(touched) > most_files:
        raise TooMany(len(touched))
    for cid in touched:
        record = ctx.store.load_record(cid)
        if record is not None:
            made: list[Attempt | Draft] = [*record.attempts, *record.drafts]
            calls += [_Call.of(m) for m in made if m.reserved_at.startswith(month)]
    by_day: dict[str, list[_Call]] = {}
    for call in calls:
        by_day.setdefault(call.day, []).append(call)
    totals = _per_model(calls, prices)
    priced = [m.dollars for m in totals if m.dollars is not None]
    return UsageResult(
        month=month,
        models=totals,
        days=[DayUsage(day=d, models=_per_model(by_day[d], prices)) for d in sorted(by_day)],
        dollars=round(sum(priced), 6) if priced else None,
    )


def _per_model(calls: Iterable[_Call], prices: dict[str, tuple[float, float]]) -> list[ModelUsage]:
    sums: dict[tuple[str, str], list[int]] = {}
    for c in calls:
        made, tokens_in, tokens_out, without, drafts = sums.setdefault(
            (c.provider, c.model), [0] * 5
        )
        has = c.input_tokens is not None or c.output_tokens is not None
        sums[(c.provider, c.model)] = [
            made + 1,
            tokens_in + (c.input_tokens or 0),
            tokens_out + (c.output_tokens or 0),
            without + (0 if has else 1),
            drafts + c.draft,
        ]
    out = []
    for (provider, model), (made, tokens_in, tokens_out, without, drafts) in sorted(sums.items()):
        price = prices.get(model)
        dollars = (
            round((tokens_in * price[0] + tokens_out * price[1]) / 1_000_000, 6) if price else None
        )
        out.append(
            ModelUsage(
                provider=provider,
                model=model,
                calls=made,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                without_usage=without,
                drafts=drafts,
                dollars=dollars,
            )
        )
    return out


def parse_prices(text: str | None) -> dict[str, tuple[float, float]]:
    """``WATCHER_PRICES`` (``model=in/out`` per million tokens, comma- or space-separated) as
    ``{model: (in, out)}``; a malformed entry is a configuration error naming it."""
    prices: dict[str, tuple[float, float]] = {}
    for entry in (text or "").replace(",", " ").split():
        model, _, pair = entry.rpartition("=")
        given_in, _, given_out = pair.partition("/")
        try:
            price = (float(given_in), float(given_out))
        except ValueError:
            price = (-1.0, -1.0)
        if not model or min(price) < 0:
            raise ConfigError(
                f"WATCHER_PRICES entry {entry!r} is not model=IN/OUT in dollars per million "
                "tokens (e.g. gpt-6-luna=0.15/0.60)"
            )
        prices[model] = price
    return prices


def _line(m: ModelUsage) -> str:
    cost = f" · ${m.dollars:.2f}" if m.dollars is not None else ""
    # The offline classifier is no model: its calls spend no tokens, and "without usage
    # recorded" (a call whose tokens are unknown) would be untrue of them.
    offline = m.provider == "offline"
    notes = [f"{m.drafts} draft(s)"] * bool(m.drafts) + [
        f"{m.without_usage} without usage recorded"
    ] * bool(m.without_usage and not offline)
    said = f" ({', '.join(notes)})" if notes else ""
    tokens = "no tokens (offline)" if offline else f"{m.input_tokens:,} in, {m.output_tokens:,} out"
    return f"{m.provider} {one_line(m.model)}: {m.calls} call(s){said} · {tokens}{cost}"


def view(result: UsageResult, screen: Screen) -> None:
    if not result.models:
        screen.out.print(f"{result.month}: no model calls")
        return
    screen.out.print(f"{result.month}:")
    for m in result.models:
        screen.out.print(f"  {_line(m)}")
    if result.dollars is not None:
        screen.out.print(f"  priced models in all: ${result.dollars:.2f} (WATCHER_PRICES)")
    for day in result.days:
        screen.out.print(f"{day.day}:")
        for m in day.models:
            screen.out.print(f"  {_line(m)}")


USAGE = Command(
    name="usage",
    summary="The month's model calls and tokens, per model (free).",
    help="Model calls, input and output tokens per provider and model, per day and for the "
    "month, from the recorded usage of the attempts and of the reply drafts (their count said "
    "apart); dollars where WATCHER_PRICES prices the model "
    "(model=in/out per million tokens). Free: no call is made.",
    examples=("watcher usage", "watcher usage --month 2026-11", "watcher usage --json"),
    codes=VIEW_CODES,
    result=UsageResult,
    run=lambda c, a: usage(c, a.get("month")),
    view="watcher.commands.usage:view",
    params=(
        Param(
            name="month",
            type=str | None,
            default=None,
            flags=("--month",),
            help="The UTC month, YYYY-MM (default: this one).",
            metavar="YYYY-MM",
        ),
    ),
    mcp=Mcp(
        description=words.USAGE,
        hints=LOCAL,
        args=(
            McpArg(
                "month",
                Annotated[
                    str | None,
                    Field(description="UTC month, YYYY-MM (default: this one)."),
                ],
                None,
            ),
        ),
    ),
)
