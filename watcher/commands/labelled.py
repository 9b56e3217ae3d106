"""The labelled set (SPEC §15.6): comments with the author's answer known, judged in a data dir of
their own so a classifier's figures are known before anyone relies on it.

A set is a directory with ``export.json`` (Forem format, SPEC §5: what ``--source FILE`` reads)
and ``labels.json`` (:class:`watcher.models.LabelFile`: per comment, did it need a reply, and its
kind). ``watcher eval --set DIR`` scans the export through the real pipeline into that data dir,
marks every comment as its label says (``replied`` / ``ignored``, as the author would have), and
evaluates that dir exactly as ``watcher eval`` evaluates the user's. The set ships inside the
package as well (``--set bundled``), so an installed watcher can show its figures.

The offline classifier is free and is the default. A real provider spends a call per comment:
it must be asked for by name, with ``--provider-calls N`` (the most calls it may make) and an
``--eval-dir`` of its own (so a second run resumes instead of paying again), and never from the
bridge — what to spend is the person's decision, as with ``grant`` (SPEC §13.2).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from watcher import pipeline
from watcher.commands.evaluate import Sample, collect, figures, ratio
from watcher.commands.results import EvalResult, KindFigures, LabelledSetRun, SetFigures
from watcher.config import Settings, load_settings
from watcher.errors import UsageError
from watcher.models import LabelFile, Triage
from watcher.pipeline import MAX_LIMIT, Hooks, Partial, Run, new_run_id, open_store
from watcher.providers.registry import PROVIDERS
from watcher.store import Store

BUNDLED = "bundled"
EXPORT, LABELS = "export.json", "labels.json"


@dataclass(frozen=True)
class LabelledSet:
    path: Path
    labels: LabelFile

    @property
    def export(self) -> Path:
        return self.path / EXPORT


def locate(name: str) -> Path:
    """``bundled``: the set shipped with watcher (in the wheel, else in the source tree's
    ``data/eval``); anything else is a directory path."""
    if name != BUNDLED:
        return Path(name).expanduser().absolute()
    candidates = []
    # A zipped or unusual install has no such directory: the source tree may still have it.
    with contextlib.suppress(ModuleNotFoundError, TypeError):
        candidates.append(Path(str(resources.files("watcher") / "_bundled" / "eval")))
    candidates.append(Path(__file__).resolve().parents[2] / "data" / "eval")
    for candidate in candidates:
        if (candidate / LABELS).is_file():
            return candidate
    raise UsageError(
        f"the bundled labelled set is missing (looked in {', '.join(map(str, candidates))}); "
        "reinstall devto-watcher"
    )


def load(name: str) -> LabelledSet:
    """The set at ``name`` (a directory, or ``bundled``); :class:`UsageError` when unusable."""
    path = locate(name)
    labels_file = path / LABELS
    try:
        labels = LabelFile.model_validate_json(labels_file.read_bytes())
    except FileNotFoundError:
        raise UsageError(
            f"{path} is not a labelled set: it has no {LABELS} (a set is a directory with "
            f"{EXPORT} and {LABELS}; `--set {BUNDLED}` is the one shipped with watcher)"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot read {labels_file}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise UsageError(
            f"{labels_file} is not a valid labels file ({exc.error_count()} problem(s); "
            f"{where}: {first['msg']})"
        ) from None
    if not (path / EXPORT).is_file():
        raise UsageError(f"{path} is not a labelled set: it has no {EXPORT}")
    return LabelledSet(path, labels)


def evaluate_set(
    name: str,
    *,
    user: Settings,
    hooks: Hooks,
    entrypoint: str,
    provider: str | None,
    budget: int | None,
    eval_dir: str | None,
    since: datetime | None,
    since_text: str | None,
) -> Partial[EvalResult]:
    """``watcher eval --set NAME``: the checks first (nothing is read or written before they pass),
    then the set judged in its own data dir — a scratch one, or ``eval_dir`` — and its figures."""
    from watcher.store.scratch import scratch_data_dir

    if budget is not None and budget < 1:
        raise UsageError(f"--provider-calls must be at least 1, got {budget}")
    if provider is not None and provider != "offline":
        refuse_paid_run(provider, entrypoint=entrypoint, budget=budget, eval_dir=eval_dir)
    lset = load(name)
    kept = Path(eval_dir).expanduser().absolute() if eval_dir else None
    if kept is not None:
        check_eval_dir(kept, user, lset, hooks)
    with scratch_data_dir() as scratch:
        settings = set_settings(provider, kept, scratch)
        return run(
            lset,
            settings,
            hooks=hooks,
            entrypoint=entrypoint,
            budget=budget,
            kept=kept,
            since=since,
            since_text=since_text,
        )


def refuse_paid_run(
    provider: str, *, entrypoint: str, budget: int | None, eval_dir: str | None
) -> None:
    """A real provider spends a call per comment of the set: the person asks for it, with a budget
    and a data dir of its own; an agent through the bridge never does (as with grant, SPEC §13.2).
    """
    spec = PROVIDERS.get(provider)
    if spec is None or not spec.needs_key:
        names = ", ".join(n for n, s in PROVIDERS.items() if s.needs_key)
        raise UsageError(
            "--provider takes offline (the default, free) or a provider that makes real calls: "
            f"{names}"
            f" — got {provider!r}"
        )
    if entrypoint != "cli":
        raise UsageError(
            "evaluating the labelled set with a paid provider spends real calls: that is the "
            "person's "
            "decision, so run `watcher eval --set … --provider …` in a terminal. The bridge and "
            "the MCP "
            "server only run the free offline evaluation"
        )
    wanted = (
        ("--provider-calls N (the most calls it may make)", budget),
        (
            (
                "--eval-dir DIR (a data dir of its own, kept, so a second run resumes instead of "
                "paying again)"
            ),
            eval_dir,
        ),
    )
    missing = [what for what, value in wanted if value is None]
    if missing:
        raise UsageError(
            f"evaluating the labelled set with {provider} makes one model call per comment, on "
            "your "
            f"account and never on your comments' budgets: give {' and '.join(missing)}"
        )


def set_settings(provider: str | None, eval_dir: Path | None, scratch: Path) -> Settings:
    """The evaluation's own setup: the offline classifier in a scratch dir, or the named provider
    (its model, key and URL from the environment) in ``eval_dir``. Never the user's data dir."""
    if provider is None or provider == "offline":
        root = eval_dir or scratch
        return Settings(
            data_dir=root,
            provider="offline",
            model=PROVIDERS["offline"].default_model,
            data_dir_chosen=root,
        )
    assert eval_dir is not None  # refuse_paid_run refused a real provider without one
    settings = load_settings(data_dir=eval_dir, overrides={"provider": provider})
    settings.require_key()
    return settings


def check_eval_dir(eval_dir: Path, user: Settings, lset: LabelledSet, hooks: Hooks) -> None:
    """Refuse a data dir that is (or holds) someone's comments: the user's, or one with comments
    the set does not have — the evaluation must never spend or mark on a real account's records."""
    from watcher.store.places import overlapping

    how = overlapping(eval_dir, user.data_dir)
    if how is not None:
        # Inside it (inbox/, locks/, …) its records would land in the user's store; containing it,
        # the user's comments would be judged, marked and counted as the set's.
        raise UsageError(
            f"--eval-dir {eval_dir} {how} your data dir {user.data_dir}: the labelled set gets a "
            "data dir of its own, apart from yours, so its calls and marks never touch your "
            "comments' budgets"
        )
    store = open_store(Settings(data_dir=eval_dir, data_dir_chosen=eval_dir).paths, hooks)
    strangers = [cid for cid in store.record_ids() if cid not in lset.labels.comments]
    if strangers:
        raise UsageError(
            f"--eval-dir {eval_dir} holds comments that are not in the labelled set "
            f"({strangers[0]}, "
            f"… {len(strangers)} in all): give the evaluation an empty directory of its own"
        )


def run(
    lset: LabelledSet,
    settings: Settings,
    *,
    hooks: Hooks,
    entrypoint: str,
    budget: int | None,
    kept: Path | None,
    since: datetime | None,
    since_text: str | None,
) -> Partial[EvalResult]:
    """Judge the set's comments (first attempts only, at most ``budget`` calls), mark each as its
    label says, and evaluate the data dir. A batch stopped by the provider keeps what was judged."""
    if kept is None and hooks.make_store is None:
        from watcher.store.scratch import ScratchStore

        store: Store = ScratchStore(
            settings.paths
        )  # removed when the command ends: no fsync needed
    else:
        store = open_store(settings.paths, hooks)
    calls, error = 0, None
    # A paid provider's calls go in batches of at most --limit's maximum, as `scan` makes them; the
    # offline classifier is free, so the whole set is one batch (one read of the export, not ten).
    most = len(lset.labels.comments) if settings.provider == "offline" else MAX_LIMIT
    while budget is None or calls < budget:
        limit = max(1, most) if budget is None else min(most, budget - calls)
        batch = Run(
            settings=settings,
            store=store,
            command="scan",
            entrypoint=entrypoint,
            run_id=new_run_id(),
            limit=limit,
            parallel=settings.parallel,
            hooks=hooks,
        )
        out = pipeline.scan(batch, source=str(lset.export))
        calls += out.result.calls
        if out.error is not None:
            error = out.error
            break
        if not out.result.remaining or not out.result.calls:
            break
    _mark_as_labelled(store, lset)
    samples, considered, without = collect(store, since=since)
    kinds: dict[str, str] = {cid: label.kind for cid, label in lset.labels.comments.items()}
    result = figures(
        samples, considered=considered, without_verdict=without, since=since_text, kinds=kinds
    )
    result.labelled_set = _summary(
        lset, settings, samples, kinds, calls=calls, budget=budget, kept=kept
    )
    return Partial(result, error)


def _mark_as_labelled(store: Store, lset: LabelledSet) -> None:
    """One index save with every label as the author's mark (a person's patch, SPEC §4.2)."""
    base = store.load_index()
    mine, _ = store.reconcile_index(base)
    patches: dict[str, Triage] = {
        cid: ("replied" if label.needs_reply else "ignored")
        for cid, label in lset.labels.comments.items()
        if cid in mine.comments
    }
    if patches:
        store.save_index(base, mine, patches)


def _summary(
    lset: LabelledSet,
    settings: Settings,
    samples: list[Sample],
    kinds: dict[str, str],
    *,
    calls: int,
    budget: int | None,
    kept: Path | None,
) -> LabelledSetRun:
    labels = lset.labels.comments
    yes = sum(1 for label in labels.values() if label.needs_reply)
    by_kind: dict[str, KindFigures] = {}
    for sample in samples:
        if sample.needed is None:
            continue
        kind = kinds.get(sample.id, "unknown")
        old = by_kind.get(kind, KindFigures(judged=0, agreed=0))
        by_kind[kind] = KindFigures(
            judged=old.judged + 1, agreed=old.agreed + (sample.said == sample.needed)
        )
    total = len(labels)
    held = [
        s
        for s in samples
        if s.needed is not None and labels.get(s.id) is not None and labels[s.id].held_out
    ]
    return LabelledSetRun(
        path=str(lset.path),
        comments=total,
        needs_reply=yes,
        provider=settings.provider,
        model=settings.model,
        calls=calls,
        call_budget=budget,
        data_dir=str(kept) if kept else None,
        always_yes=SetFigures(
            judged=total,
            agreement=ratio(yes, total),
            precision=ratio(yes, total),
            recall=ratio(yes, yes),
        ),
        always_no=SetFigures(
            judged=total, agreement=ratio(total - yes, total), precision=None, recall=ratio(0, yes)
        ),
        held_out=_figures_of(held) if held else None,
        by_kind=dict(sorted(by_kind.items())),
    )


def _figures_of(samples: list[Sample]) -> SetFigures:
    tp = sum(1 for s in samples if s.said and s.needed)
    said = sum(1 for s in samples if s.said)
    needed = sum(1 for s in samples if s.needed)
    agreed = sum(1 for s in samples if s.said == s.needed)
    return SetFigures(
        judged=len(samples),
        agreement=ratio(agreed, len(samples)),
        precision=ratio(tp, said),
        recall=ratio(tp, needed),
    )


__all__ = [
    "BUNDLED",
    "LabelledSet",
    "check_eval_dir",
    "evaluate_set",
    "load",
    "locate",
    "refuse_paid_run",
    "run",
    "set_settings",
]
