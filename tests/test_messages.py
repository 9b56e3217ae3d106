"""SPEC §15.3: messages point at what is true and next. Each test is one misleading message a new
user met, run in process (``run_main``) against an export named "devto" and the provider fake."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process
from _proc import run_main

from watcher.config import Settings, load_settings
from watcher.errors import SourceUnavailable
from watcher.models import SeenFile
from watcher.pipeline import Hooks
from watcher.source import FetchResult, Source, read_export, resolve_source

ACCOUNT = {**IN_PROCESS_ENV, "DEVTO_USERNAME": "maya_writes"}


def _comment(label: str, age: timedelta, *, children: list[dict[str, Any]] | None = None,
             author: str = "") -> dict[str, Any]:
    created = (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type_of": "comment", "id_code": label, "created_at": created,
            "body_html": f"<p>TAG:{label} Does the cache work on Windows?</p>",
            "user": {"name": label, "username": author or f"reader_{label}"}, "children": children or []}


class Account:
    """dev.to as the pipeline sees it: a source named "devto" reading ``path``; ``interrupt`` makes
    the fetch end midway as a dev.to 429 does (what was fetched is kept)."""

    name = "devto"

    def __init__(self, path: Path, comments: list[dict[str, Any]]) -> None:
        self.path, self.interrupt = path, False
        doc = {"username": "maya_writes", "articles": [{
            "id": 1201, "title": "Caching", "url": "https://dev.to/maya_writes/caching",
            "comments_count": len(comments), "comments": comments}]}
        path.write_text(json.dumps(doc))

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        fetched = read_export(self.path, settings)
        if self.interrupt:
            from dataclasses import replace

            return replace(fetched, interrupted=SourceUnavailable(
                "dev.to rate limit (HTTP 429) for GET /api/comments, without a usable Retry-After; wait a minute "
                "and try again (stopped after 1 of 2 changed articles)"))
        return fetched


def _hooks(account: Account, fake: FakeProvider) -> Hooks:
    def source(name: str) -> Source:
        return account if name == "devto" else resolve_source(name)

    return Hooks(make_provider=in_process(fake), make_source=source)


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


def test_a_dry_run_with_since_plans_the_baseline_comments_the_real_run_calls(data_dir: Path, tmp_path: Path,
                                                                               fake: FakeProvider) -> None:
    """`scan --since D --dry-run` lists as would_call exactly the baseline comments `scan --since D` calls."""
    account = Account(tmp_path / "a.json", [_comment(f"old{i}", timedelta(days=30 + i)) for i in range(3)])
    hooks = _hooks(account, fake)
    assert run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=hooks).returncode == 0
    since = (datetime.now(UTC) - timedelta(days=60)).strftime("%Y-%m-%d")
    dry = run_main("cli", "scan", "--since", since, "--dry-run", "--json", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    assert sorted(dry.envelope["result"]["would_call"]) == ["old0", "old1", "old2"]
    run_main("cli", "scan", "--since", since, data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    assert sorted(fake.calls) == ["old0", "old1", "old2"]


def test_check_fails_when_no_provider_is_chosen(data_dir: Path) -> None:
    """`check` refuses what `scan` refuses: no WATCHER_PROVIDER is exit 2, naming the variable."""
    answer = run_main("cli", "check", data_dir=data_dir, env={"DEVTO_USERNAME": "maya_writes"})
    assert answer.returncode == 2
    assert "FAIL  config" in answer.stdout and "WATCHER_PROVIDER" in answer.stdout


def test_after_the_last_attempt_fails_the_next_step_is_grant(data_dir: Path, tmp_path: Path,
                                                            fake: FakeProvider) -> None:
    """The run that spends a comment's third attempt points at `watcher grant ID`, not at recheck."""
    account = Account(tmp_path / "a.json", [_comment("bad1", timedelta(minutes=5))])
    hooks = _hooks(account, fake)
    fake.script("bad1", "malformed")
    run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    run_main("cli", "recheck", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    last = run_main("cli", "recheck", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    next_line = last.stdout.splitlines()[-1]
    assert "watcher grant bad1" in next_line and "recheck" not in next_line


def test_nothing_needs_you_is_never_said_while_verdicts_wait(data_dir: Path, tmp_path: Path,
                                                             fake: FakeProvider) -> None:
    """A scan with nothing new, while checked comments wait unmarked, points at `watcher inbox`."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    hooks = _hooks(account, fake)
    run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    idle = run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=hooks)
    assert "nothing needs you now" not in idle.stdout
    assert "`watcher inbox`" in idle.stdout.split("next:")[-1]  # the last paragraph, wrapped


def test_a_dev_to_429_is_dev_tos_and_said_once(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A scan cut short by dev.to's 429 says dev.to (not the model provider) and says it once."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    account.interrupt = True
    answer = run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    assert answer.returncode == 3
    assert answer.stderr.count("HTTP 429") == 1, answer.stderr
    next_line = next(line for line in answer.stdout.splitlines() if line.startswith("next:"))
    assert "dev.to" in next_line and "provider" not in next_line


def test_a_setup_stop_lists_no_more_rows_than_the_limit_and_says_its_error_once(
        data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A 401 at the first of 12 planned with --limit 3: 3 rows (1 error, 2 not reached), the rest
    counted as remaining; the error's words appear once in all the output."""
    account = Account(tmp_path / "a.json", [_comment(f"c{i}", timedelta(minutes=30 - i)) for i in range(12)])
    fake.default = "401"
    answer = run_main("cli", "scan", "--limit", "3", "--json", data_dir=data_dir, env=ACCOUNT,
                      hooks=_hooks(account, fake))
    result = answer.envelope["result"]
    assert [i["outcome"] for i in result["items"]] == ["error", "not_started", "not_started"]
    assert result["remaining"] == 9
    human = run_main("cli", "scan", "--limit", "3", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    assert (human.stdout + human.stderr).count("provider unavailable since") <= 1


def test_answered_comments_are_counted_once(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """Comments the author had answered are "already answered", not also "marked replied"."""
    reply = _comment("r1", timedelta(minutes=1), author="maya_writes")
    account = Account(tmp_path / "a.json", [_comment("a1", timedelta(minutes=5), children=[reply])])
    answer = run_main("cli", "scan", "--json", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    result = answer.envelope["result"]
    assert (result["answered"], result["replied"]) == (1, [])


def test_a_short_placeholder_key_does_not_hide_words(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """WATCHER_API_KEY=ollama: "ollama" in the provider's words reaches the person unredacted."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    fake.default = "404-model"
    env = {**ACCOUNT, "WATCHER_API_KEY": "ollama", "WATCHER_BASE_URL": "http://localhost:11434/v1"}
    answer = run_main("cli", "scan", data_dir=data_dir, env=env, hooks=_hooks(account, fake))
    assert "[redacted]" not in answer.stdout + answer.stderr
    assert "ollama" in answer.stdout + answer.stderr


def test_a_demo_run_again_says_it_was_done_and_what_is_set(data_dir: Path, tmp_path: Path) -> None:
    """A second `watcher demo` says the sample was checked before (not "0 checked"); with the
    account configured it does not tell the person to set it; WATCHER_DATA_DIR is named untouched."""
    demo_dir = tmp_path / "demo"
    first = run_main("cli", "--data-dir", str(demo_dir), "demo", data_dir=data_dir)
    assert first.returncode == 0 and "set DEVTO_USERNAME" in first.stdout
    again = run_main("cli", "--data-dir", str(demo_dir), "demo", data_dir=data_dir,
                     env={"DEVTO_USERNAME": "maya", "WATCHER_PROVIDER": "offline"})
    assert "demo: 0 " not in again.stdout and "earlier `watcher demo`" in again.stdout
    assert "set DEVTO_USERNAME" not in again.stdout
    assert f"your data dir {data_dir}" in " ".join(again.stdout.split())  # wrapped at 80
    assert not (data_dir / "inbox").exists()


@pytest.mark.parametrize(("variable", "value", "want"), [
    ("DEVTO_USERNAME", "@alice", "alice"),
])
def test_settings_as_people_type_them(data_dir: Path, variable: str, value: str, want: str) -> None:
    """`DEVTO_USERNAME=@alice` is the account alice."""
    assert load_settings(data_dir=data_dir, env={variable: value}).devto_username == want


def test_an_unknown_provider_names_the_way_to_ollama(data_dir: Path) -> None:
    """WATCHER_PROVIDER=ollama says to use openai with WATCHER_BASE_URL."""
    answer = run_main("cli", "status", data_dir=data_dir, env={"WATCHER_PROVIDER": "ollama"})
    assert answer.returncode == 2 and "use openai with WATCHER_BASE_URL" in answer.stderr


def test_help_has_no_cut_lines_or_typer_artefacts() -> None:
    """`--help` lists each command's line whole; `-h` shows `ID`, not `{ID}` or `<list[str]>`; status
    lists no "unknown id" exit."""
    top = run_main("cli", "--help", data_dir=None, env={"COLUMNS": "80"}).stdout
    commands = top[top.index("Commands:"):]
    assert "…" not in commands and "..." not in commands
    show, recheck = (run_main("cli", name, "-h", data_dir=None).stdout for name in ("show", "recheck"))
    assert "{ID}" not in show and "<str>" not in show and "<list[str]>" not in recheck
    assert "unknown id" not in run_main("cli", "status", "-h", data_dir=None).stdout


def test_a_refused_key_names_the_variable_it_came_from(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A 401 with the key from OPENAI_API_KEY says to check OPENAI_API_KEY."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    fake.default = "401"
    env = {**{k: v for k, v in ACCOUNT.items() if k != "WATCHER_API_KEY"}, "OPENAI_API_KEY": "sk-from-openai-var"}
    answer = run_main("cli", "scan", data_dir=data_dir, env=env, hooks=_hooks(account, fake))
    assert answer.returncode == 2 and "check OPENAI_API_KEY" in answer.stderr, answer.stderr


def test_check_with_a_base_url_missing_api_names_devto_base_url(data_dir: Path) -> None:
    """A 404 for the user at a base without /api is DEVTO_BASE_URL's, not DEVTO_USERNAME's."""
    import httpx

    from watcher.errors import ConfigError
    from watcher.source import check_user

    settings = load_settings(data_dir=data_dir, env={"DEVTO_USERNAME": "maya", "DEVTO_BASE_URL": "https://dev.to"})
    with pytest.raises(ConfigError) as info:
        check_user(settings, transport=httpx.MockTransport(lambda r: httpx.Response(404, text="<html>")),
                   sleep=lambda _s: None)
    assert "DEVTO_BASE_URL" in str(info.value) and "DEVTO_USERNAME" not in str(info.value)


def test_a_429_without_retry_after_does_not_promise_a_free_check(data_dir: Path, tmp_path: Path,
                                                                 fake: FakeProvider) -> None:
    """After a 429 with no Retry-After the next step names the cooldown, not a free probe the next
    run would not make."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    fake.default = "429-none"
    answer = run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    next_line = next(line for line in answer.stdout.splitlines() if line.startswith("next:"))
    assert answer.returncode == 3 and "for free" not in next_line and "cooldown" in next_line


def test_anthropic_with_a_base_url_ending_in_v1_is_told_to_drop_it(data_dir: Path) -> None:
    """Anthropic's model-not-found hint (the registry's, per provider): watcher adds /v1 itself, so
    a base URL ending in /v1 is the fix to name — not `ollama list`, not "include /v1"."""
    import httpx

    from watcher.providers import make_provider

    settings = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-0123",
                                                     "WATCHER_BASE_URL": "https://llm.example/v1"})
    body = json.dumps({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}})
    provider = make_provider(settings, transport=httpx.MockTransport(lambda r: httpx.Response(404, text=body)))
    try:
        from watcher.providers.prompts import render

        result = provider.complete(render(_prompt_comment()))
    finally:
        provider.close()
    assert result.error is not None and result.error.kind == "model_not_found"
    message = result.error.message
    assert "set it to https://llm.example" in message and "ollama" not in message.lower(), message


def _prompt_comment() -> Any:
    from watcher.models import Comment

    return Comment(id="q1", article_id=1, article_title="T", article_url="https://dev.to/a/t", author="reader", created_at="2026-11-30T10:00:00Z", text="Does it work?",
                   url="https://dev.to/reader/comment/q1")


def test_human_output_shows_local_times_to_the_minute_and_json_keeps_utc(data_dir: Path, tmp_path: Path,
                                                                        fake: FakeProvider) -> None:
    """`show` prints times as `YYYY-MM-DD HH:MM ZONE`, never raw UTC with microseconds; --json keeps UTC."""
    import re

    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    human = run_main("cli", "show", "q1", data_dir=data_dir, env=ACCOUNT).stdout
    assert not re.search(r"\dT\d\d:\d\d:\d\d", human), human
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", human)
    shown = run_main("cli", "show", "q1", "--json", data_dir=data_dir, env=ACCOUNT).envelope
    assert shown["result"]["attempts"][0]["reserved_at"].endswith("Z")


def test_piped_output_is_at_most_120_columns_wide(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A table in a pipe or a mail fits 120 columns (its detail cut), however long the error."""
    account = Account(tmp_path / "a.json", [_comment("q1", timedelta(minutes=5))])
    fake.default = "404-model"
    answer = run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    table = [line for line in answer.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 120


@pytest.mark.parametrize("no_color", [False, True])
def test_high_priority_is_coloured_on_a_terminal_unless_no_color(tmp_path: Path, no_color: bool) -> None:
    """In a real terminal (a pty) `inbox` marks `high` in colour; with NO_COLOR set, no colour at all."""
    import os
    import pty
    import re
    import select
    import subprocess

    from _proc import command, env_for

    demo = tmp_path / "data"
    export = tmp_path / "bug.json"
    export.write_text(json.dumps({"username": "maya_writes", "articles": [{
        "id": 1, "title": "Caching", "url": "https://dev.to/maya_writes/caching", "comments_count": 1,
        "comments": [_comment("bug1", timedelta(minutes=5)) | {
            "body_html": "<p>Bug: it crashes with a traceback on Windows, the cache is broken</p>"}]}]}))
    seeded = run_main("cli", "scan", "--source", str(export), data_dir=demo, env={"WATCHER_PROVIDER": "offline"})
    assert seeded.returncode == 0 and "high" in seeded.stdout, seeded.stdout
    env = {k: v for k, v in env_for(None).items() if k != "NO_COLOR"}
    env.update({"TERM": "xterm-256color", "COLUMNS": "100", **({"NO_COLOR": "1"} if no_color else {})})
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command("cli", "--data-dir", str(demo), "inbox"), env=env, stdin=follower,
                            stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 10)
        try:
            chunk = os.read(leader, 65536) if ready else b""
        except OSError:
            chunk = b""
        if not chunk:
            break
        seen += chunk
    proc.wait(10)
    os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert "high" in text
    red = re.search(r"\x1b\[[0-9;]*31m", text) is not None  # NO_COLOR allows bold, never colour
    assert red is not no_color, text[:300]


def test_an_account_without_articles_says_so(data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A scan of an account with no articles says that, not only "nothing to do"."""
    account = Account(tmp_path / "a.json", [])
    account.path.write_text(json.dumps({"username": "maya_writes", "articles": []}))
    answer = run_main("cli", "scan", data_dir=data_dir, env=ACCOUNT, hooks=_hooks(account, fake))
    assert answer.returncode == 0 and "no published articles" in answer.stdout
