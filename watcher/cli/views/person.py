"""The views of the commands about the setup and the person's decisions: check, grant, signals,
eval (``view(result, screen)``, :mod:`watcher.commands.screen`)."""

from __future__ import annotations

import sys

from watcher.commands.results import (
    CheckResult,
    EvalGroup,
    EvalResult,
    GrantResult,
    SignalsResult,
)
from watcher.commands.screen import Screen, one_line


def check(doc: CheckResult, screen: Screen) -> None:
    from rich.table import Table

    from watcher.cli.wrap import hanging

    if (
        not sys.stdout.isatty()
    ):  # whole lines in a pipe (grep, mail), as every other view prints them there
        for c in doc.checks:
            line = f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<10}  {one_line(c.detail)}"
            screen.out.print(hanging(screen.out.render_str(line).plain, 18))
            if c.fix and not c.ok:
                screen.out.print(f"{'':16}fix: {c.fix}")
    else:
        # A borderless table: on a narrow terminal a long detail wraps under itself, not under "ok".
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
        for _ in range(3):
            table.add_column()
        for c in doc.checks:
            table.add_row(
                "ok" if c.ok else "FAIL",
                c.name,
                one_line(c.detail) + (f"\nfix: {c.fix}" if c.fix and not c.ok else ""),
            )
        with screen.out.capture() as drawn:
            screen.out.print(table)
        for line in drawn.get().splitlines():  # without the padding rich puts after the last column
            screen.out.print(line.rstrip(), soft_wrap=True)
    screen.out.print("all checks passed" if doc.ok else "some checks failed")


def grant(doc: GrantResult, screen: Screen) -> None:
    screen.out.print(
        f"{doc.id}: {doc.granted} more attempt(s) granted — {doc.attempts} of {doc.cap} "
        f"used, now {doc.state}; `watcher recheck {doc.id}` tries it"
    )


def signals(doc: SignalsResult, screen: Screen) -> None:
    if not doc.counts:
        screen.out.print("no signals counted yet")
    for key, n in sorted(doc.counts.items()):
        screen.out.print(f"{n:>8}  {one_line(key)}")
    if doc.invalid:
        screen.out.print(f"{doc.invalid:>8}  (invalid lines)")


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def evaluation(doc: EvalResult, screen: Screen) -> None:
    run = doc.labelled_set
    if run is not None:
        cost = "free" if run.provider == "offline" else f"budget {run.call_budget}"
        where = run.data_dir or "a temporary data dir, removed"
        screen.out.print(
            f"labelled set {run.path}: {run.comments} comments, {run.needs_reply} need a reply · "
            "judged by "
            f"{run.provider} {run.model} · {run.calls} call(s) ({cost}) in {where}"
        )
        for name, base in (("always yes", run.always_yes), ("always no", run.always_no)):
            screen.out.print(
                f"    for comparison, {name}: agreement {_figure(base.agreement)} · precision "
                f"{_figure(base.precision)} · recall {_figure(base.recall)}"
            )
        if run.held_out is not None:
            held = run.held_out
            screen.out.print(
                f"    on the {held.judged} held-out comments (written after the offline rules were "
                "last "
                f"changed): agreement {_figure(held.agreement)} · precision "
                f"{_figure(held.precision)} · "
                f"recall {_figure(held.recall)}"
            )
    since = f" created since {doc.since}" if doc.since else ""
    screen.out.print(
        f"{doc.comments} comment(s){since}: {doc.judged} judged (a verdict and your reply or mark) "
        "· "
        f"{doc.unlabelled} unlabelled (not replied to or marked: not guessed) · "
        f"{doc.without_verdict} "
        "without a verdict"
    )
    if not doc.groups and not doc.judged:
        screen.out.print(
            "nothing to judge yet: eval compares verdicts with what you did — reply on dev.to, or "
            "`watcher mark ID replied|ignored`"
        )
    for group in doc.groups:
        _group(group, screen)
    if run is not None and run.by_kind:
        screen.out.print(
            "by kind (agreed/judged): "
            + ", ".join(f"{kind} {k.agreed}/{k.judged}" for kind, k in run.by_kind.items())
        )


def _group(group: EvalGroup, screen: Screen) -> None:
    c = group.confusion
    screen.out.print("")
    screen.out.print(
        f"{group.provider} {one_line(group.model)} · prompt {group.prompt}: {group.judged} judged, "
        f"{group.unlabelled} unlabelled · agreement {_figure(group.agreement)} · precision "
        f"{_figure(group.precision)} · recall {_figure(group.recall)}"
    )
    screen.out.print(
        f"    said needs a reply: {c.true_positive} you replied, {c.false_positive} you ignored · "
        "said no "
        f"reply needed: {c.false_negative} you replied, {c.true_negative} you ignored"
    )
    for d in group.disagreements:
        said = (
            "said needs a reply, you ignored it"
            if d.said_needs_reply
            else "said no reply, you replied"
        )
        kind = f" [{d.kind}]" if d.kind else ""
        screen.out.print(f"    {d.id}  {said}{kind} · {d.category}: {one_line(d.summary)}")
