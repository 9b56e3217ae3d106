"""Human output: a progress bar on stderr during a batch, short tables on stdout after.

Imported only by the human front end, so ``--json`` runs and the bridge never load rich.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from watcher.pipeline import ItemResult


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the front end ends quietly with the command's own exit code.
        raise BrokenPipeError


# markup=False: comment text and model output are untrusted and may contain "[...]". Output that
# is not a terminal (a pipe, cron's mail) is not hard-wrapped at 80 columns: lines stay whole.
_out = _Console(highlight=False, markup=False, soft_wrap=True,
                width=None if sys.stdout.isatty() else 100_000)
_err = Console(stderr=True, highlight=False, markup=False)


class BatchProgress:
    """A transient rich progress bar on stderr: which comment is with the model and for how long
    (one call may take a minute); with --verbose, one line per item as well."""

    def __init__(self, *, verbose: bool) -> None:
        self.verbose = verbose
        self._progress: Any = None
        self._task: Any = None

    def start(self, total: int) -> None:
        if not _err.is_terminal:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=_err, transient=True)
        self._progress.start()
        self._task = self._progress.add_task("checking comments", total=max(total, 1))

    def calling(self, comment_id: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=f"asking the model about {comment_id}")
        if self.verbose:
            _err.print(f"{comment_id}: calling the model")

    def advance(self, item: ItemResult) -> None:
        if self._progress is not None and item.outcome in ("verdict", "error", "save_failed", "save_conflict"):
            self._progress.advance(self._task)
        if self.verbose:
            _err.print(f"{item.id}: {item.outcome}" + (f" ({item.kind})" if item.kind else ""))

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def human(command: str, result: Any, error: dict[str, str] | None = None) -> None:
    if command in ("scan", "recheck"):
        _batch(result, error)
        return
    if command == "demo":
        _demo(result, error)
        return
    renderer = {"status": _status, "inbox": _inbox, "show": _show, "mark": _mark, "signals": _signals,
                "check": _check, "grant": _grant, "claim": _claim, "submit": _submit}[command]
    renderer(result)


def _detail(item: dict[str, Any]) -> str:
    verdict = item.get("verdict")
    if verdict:
        need = "needs a reply" if verdict["needs_reply"] else "no reply needed"
        return f"{need} · {verdict['category']} · {verdict['priority']}: {verdict['summary']}"
    kind, message = item.get("kind"), item.get("message")
    if kind and message:
        return f"{kind}: {message}"
    return kind or message or ""


def _batch(doc: dict[str, Any], error: dict[str, str] | None = None) -> None:
    if doc["items"]:
        table = Table(title=f"{doc['command']} ({doc['provider']} {doc['model']})")
        used = 4 * 3 + 1  # borders and padding of four columns
        for name, key in (("comment", "id"), ("outcome", "outcome"), ("attempts", "attempts")):
            # These never shrink: the detail column gives way on a narrow terminal.
            width = max([len(name), *(len(str(item.get(key, ""))) for item in doc["items"])])
            table.add_column(name, no_wrap=True, min_width=width)
            used += width
        table.add_column("detail", no_wrap=True)
        room = max(20, _out.width - used)
        for item in doc["items"]:
            # One line per comment: the summary is cut to the terminal's width, not wrapped.
            detail = _detail(item)
            detail = detail if len(detail) <= room else detail[: room - 1] + "…"
            table.add_row(item["id"], item["outcome"], str(item.get("attempts", "")), detail)
        _out.print(table, soft_wrap=False)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(doc["counts"].items())) or "nothing to do"
    verb = "would call" if doc["dry_run"] else "model calls"
    calls = len(doc.get("would_call", [])) if doc["dry_run"] else doc["calls"]
    line = f"{verb}: {calls} (limit {doc['limit']}) · {counts}"
    if doc.get("discovered"):
        line += f" · new comments: {doc['discovered']}"
    if doc["remaining"]:
        line += f" · remaining: {doc['remaining']} (run again)"
    if doc["repaired"]:
        line += f" · index repaired: {len(doc['repaired'])}"
    if doc.get("baseline"):
        line += f" · baseline (older than the backlog window, not checked): {doc['baseline']}"
    if doc.get("answered"):
        line += f" · already answered by you: {doc['answered']}"
    if doc.get("replied"):
        line += f" · marked replied (you answered on dev.to): {len(doc['replied'])}"
    if doc.get("for_agent"):
        line += f" · waiting for the agent: {doc['for_agent']}"
    _out.print(line)
    if not doc["dry_run"]:
        _out.print(f"next: {_next_step(doc, error)}")


def _next_step(doc: dict[str, Any], error: dict[str, str] | None) -> str:
    """The one next step that fits what happened (the error itself is printed on stderr)."""
    needs = sum(1 for i in doc["items"] if (i.get("verdict") or {}).get("needs_reply"))
    if error is not None:
        kind = error.get("kind", "")
        if kind in ("provider_setup", "config", "usage"):
            return "fix the setup named below, then `watcher check` (free) before the next run"
        if kind in ("provider_unavailable", "cooldown", "rate_limited", "quota_exhausted", "source_unavailable"):
            return "wait: the next run checks the provider for free before it spends an attempt"
        if kind == "interrupted":
            return "run it again when you like; the interrupted attempt stays counted"
        if kind == "lock_busy":
            return "another run is working; try again in a minute"
        return "see the error below; `watcher status` shows the state"
    if doc.get("for_agent"):
        return (f"{doc['for_agent']} comment(s) wait for the agent: claim them over MCP (tool claim) or "
                "`watcher claim`")
    if needs:
        return f"`watcher inbox` shows the {needs} new comment(s) that need a reply"
    if any(i["outcome"] == "error" for i in doc["items"]):
        return "`watcher recheck` later retries the failed ones (3 attempts per comment in all)"
    return "nothing needs you now; `watcher inbox` lists what still waits for a reply"


def _demo(doc: dict[str, Any], error: dict[str, str] | None) -> None:
    calls = sum(run["calls"] for run in doc["scans"])
    answered = sum(run.get("answered", 0) for run in doc["scans"])
    _out.print(f"demo: {calls} bundled sample comments checked with the offline classifier, through the real "
               f"pipeline, in {doc['data_dir']}")
    if answered:
        _out.print(f"      {answered} more the author had already answered on dev.to: never sent to the model")
    _out.print("")
    _inbox(doc["inbox"])
    _out.print("")
    _out.print(f"This was the sample, offline; remove it with: rm -rf {doc['data_dir']}")
    _out.print("Your own comments: set DEVTO_USERNAME and WATCHER_PROVIDER (and its key), run `watcher check`, "
               "then `watcher scan` — `watcher --help` lists every setting.")


def _status(doc: dict[str, Any]) -> None:
    s = doc["settings"]
    provider = f"{s['provider']} ({s['model']})" + (" — offline heuristic, not a language model" if s["offline"] else "")
    if s["provider"] == "agent":
        provider += " — the agent you work with gives the verdicts (MCP claim/submit, or `watcher claim`)"
    _out.print(f"data dir:  {s['data_dir']}")
    _out.print(f"provider:  {provider}")
    if s.get("api_key_from"):
        _out.print(f"key:       from {s['api_key_from']} (never shown)")
    _out.print(f"comments:  {doc['comments']} on {doc['articles']} article(s)")
    _out.print("states:    " + ", ".join(f"{k} {v}" for k, v in doc["states"].items()))
    _out.print("triage:    " + ", ".join(f"{k} {v}" for k, v in doc["triage"].items()))
    cooldown = doc["cooldown"]
    _out.print(f"cooldown:  {'until ' + cooldown['until'] if cooldown else 'none'}")
    breaker = doc.get("breaker")
    if breaker:
        _out.print(f"breaker:   OPEN since {breaker['since']} ({breaker['kind']}): {breaker['message']} — "
                   "no model call until a free probe passes; `watcher check` tests it now")
    claimed = doc.get("claimed") or {}
    if claimed.get("in_flight") or claimed.get("lease_ended"):
        _out.print(f"claimed:   {claimed['in_flight']} in flight with an agent (first lease ends "
                   f"{claimed['earliest_lease_until'] or '-'}), {claimed['lease_ended']} lease(s) ended without a "
                   "submit (the next run closes them as interrupted)")
    counts = doc["signals"]["counts"]
    _out.print("signals:   " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none counted yet"))
    if doc["signals"].get("warning"):
        _out.print(f"warning:   {doc['signals']['warning']}")


def _inbox(doc: dict[str, Any]) -> None:
    waiting = {k: v for k, v in (doc.get("unresolved") or {}).items() if v}
    if doc.get("new") and not doc["comments"]:
        return  # cron mails only what is new: nothing new, no output, no mail
    if not doc["comments"]:
        _out.print("Nothing needs a reply." if not doc["all"] else "No comments yet: run `watcher scan`.")
    if waiting and not doc["all"]:
        # "Nothing needs a reply" must never hide comments that have no verdict (SPEC §13).
        states = ", ".join(f"{n} {state}" for state, n in waiting.items())
        _out.print(f"Not yet checked: {states} — `watcher inbox --all` lists them with the reason.")
    if not doc["comments"]:
        return
    for row in doc["comments"]:
        v = row["verdict"] or {}
        head = f"{row['id']}  {v.get('priority', '-'):<6}  {v.get('category', '-'):<10}  @{row['author']}"
        if doc["all"]:
            head += f"  [{row['state']}, {row['triage']}]"
            if row.get("verdict_by"):
                head += f"  verdict by {row['verdict_by']}"
        _out.print(head)
        _out.print(f"    {v.get('summary', '(no verdict yet)')}")
        if v.get("reply_hint"):
            _out.print(f"    hint: {v['reply_hint']}")
        _out.print(f"    {row['url']}  (on “{row['article']}”)")
        if row.get("hint"):
            _out.print(f"    {row['hint']}")
    _out.print(f"{doc['count']} comment(s)" + ("" if doc["all"] else " need a reply · `watcher show ID` for the "
                                               "whole text · `watcher mark ID replied` (or ignored) when done"))


def _show(doc: dict[str, Any]) -> None:
    c = doc["comment"]
    _out.print(f"{c['id']} by {c['author']} on “{c['article_title']}” ({c['created_at']})")
    _out.print(c["url"])
    _out.print(f"state: {doc['state']} · triage: {doc['triage']} · attempts: {len(doc['attempts'])}/{doc['cap']}")
    _out.print("")
    _out.print(c["text"])
    if doc["verdict"]:
        v = doc["verdict"]
        _out.print("")
        by = f" — verdict by {doc['verdict_by']}" if doc.get("verdict_by") else ""
        _out.print(f"verdict: needs_reply={v['needs_reply']} {v['category']} {v['priority']}: {v['summary']}{by}")
        if v["reply_hint"]:
            _out.print(f"reply hint: {v['reply_hint']}")
    if doc.get("replied_at"):
        _out.print(f"you replied at {doc['replied_at']} (seen on dev.to)")
    if doc.get("hint"):
        _out.print(doc["hint"])
    for a in doc["attempts"]:
        err = a.get("error") or {}
        what = a["outcome"] or ("reserved" + (f", claimed until {a['lease_until']}" if a.get("lease_until") else ""))
        if err:
            what += f" {err['kind']}: {err['message']}"
        _out.print(f"attempt {a['n']}: {a['command']} via {a['entrypoint']} ({a['provider']}) at {a['reserved_at']} "
                   f"→ {what}")


def _check(doc: dict[str, Any]) -> None:
    for c in doc["checks"]:
        _out.print(f"{'ok  ' if c['ok'] else 'FAIL'}  {c['name']:<10}  {c['detail']}")
        if c["fix"] and not c["ok"]:
            _out.print(f"{'':16}fix: {c['fix']}")
    _out.print("all checks passed" if doc["ok"] else "some checks failed")


def _claim(doc: dict[str, Any]) -> None:
    for c in doc["claimed"]:
        _out.print(f"{c['id']}  attempt {c['n']}  claimed until {c['lease_until']}")
    for item in doc["items"]:
        _out.print(f"{item['id']}  {item['outcome']}: {_detail(item)}")
    if not doc["claimed"]:
        _out.print("nothing to claim: no comment waits for a verdict" + (" that is free now" if doc["items"] else ""))
        return
    more = f" · {doc['remaining']} more wait (claim again)" if doc["remaining"] else ""
    _out.print(f"claimed {len(doc['claimed'])} (lease {doc['lease_minutes']} min){more}")
    _out.print("prompts: each is in `watcher show ID --json` (prompt.system, prompt.user; `claim --json` gives them "
               "with the verdict schema). Answer with `watcher submit ID N VERDICT` before the lease ends")


def _submit(doc: dict[str, Any]) -> None:
    head = f"{doc['id']} attempt {doc['n']}: "
    if doc["verdict"]:
        _out.print(head + "verdict stored — " + _detail({"verdict": doc["verdict"]}))
    else:
        _out.print(head + f"{doc['kind']}: {doc['message']}")
    _out.print(f"state {doc['state']} · {doc['attempts']} attempt(s) used, {doc['attempts_left']} left")


def _grant(doc: dict[str, Any]) -> None:
    _out.print(f"{doc['id']}: {doc['granted']} more attempt(s) granted — {doc['attempts']} of {doc['cap']} "
               f"used, now {doc['state']}; `watcher recheck {doc['id']}` tries it")


def _mark(doc: dict[str, Any]) -> None:
    _out.print(f"{doc['id']} marked {doc['triage']}")


def _signals(doc: dict[str, Any]) -> None:
    if not doc["counts"]:
        _out.print("no signals counted yet")
    for key, n in sorted(doc["counts"].items()):
        _out.print(f"{n:>8}  {key}")
    if doc["invalid"]:
        _out.print(f"{doc['invalid']:>8}  (invalid lines)")
