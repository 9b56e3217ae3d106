"""The CLI as a user types it: options, output streams and exit codes (SPEC §9)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _proc import Answer, envelope, run, run_main, write_export

# These tests choose the offline heuristic explicitly, as a user must for a real source.
OFFLINE = {"WATCHER_PROVIDER": "offline"}


def invoke(*args: str, env: dict[str, str] | None = None, entry: str = "cli") -> Answer:
    """`watcher ARGS` in this process, in the test's data dir, with the offline heuristic."""
    return run_main(entry, *args, data_dir=Path(os.environ["WATCHER_DATA_DIR"]), env={**OFFLINE, **(env or {})})


def sample(*args: str) -> Answer:
    """`scan --source sample` into the test's data dir (the sample's own dir is ./data/demo otherwise)."""
    return invoke("--data-dir", os.environ["WATCHER_DATA_DIR"], "scan", "--source", "sample", *args)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("limit", ["0", "21", "-3"])
def test_limit_outside_1_to_20_is_a_usage_error_and_does_nothing(data_dir: Path, limit: str) -> None:
    """--limit 0, 21 or negative: exit 2 and the data dir stays empty."""
    result = invoke("scan", "--limit", limit, "--json")
    assert result.returncode == 2
    assert "--limit must be between 1 and 20" in json.loads(result.stdout)["error"]["message"]
    assert files_under(data_dir) == []


def test_scan_of_the_bundled_sample_uses_the_offline_classifier(data_dir: Path) -> None:
    """scan --source sample reads the bundled sample with the offline classifier, whatever
    WATCHER_PROVIDER says: a sample comment never reaches a paid model."""
    result = invoke("--data-dir", str(data_dir), "scan", "--source", "sample", "--limit", "20", "--json",
                    env={"WATCHER_PROVIDER": "openai", "OPENAI_API_KEY": "sk-never-used"})
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    # 23 eligible sample comments: 4 the author already answered (never called), 19 called.
    assert doc["ok"] is True and doc["result"]["calls"] == 19 and doc["result"]["answered"] == 4
    assert doc["result"]["provider"] == "offline"
    inbox_doc = json.loads(invoke("inbox", "--json").stdout)
    assert inbox_doc["result"]["count"] >= 1
    assert all(row["verdict"]["needs_reply"] for row in inbox_doc["result"]["comments"])


def test_default_limit_is_five_calls_and_the_rest_are_counted_as_remaining(data_dir: Path, tmp_path: Path) -> None:
    """Without --limit a run makes at most 5 model calls; the rest wait for the next run."""
    export = write_export(tmp_path / "e.json", [f"c{i}" for i in range(8)])
    doc = json.loads(invoke("scan", "--source", str(export), "--json").stdout)["result"]
    assert doc["calls"] == 5 and doc["remaining"] == 3
    doc2 = json.loads(invoke("scan", "--source", str(export), "--json").stdout)["result"]
    assert doc2["calls"] == 3 and doc2["remaining"] == 0


def test_dry_run_takes_no_lock_writes_nothing_and_calls_nothing(data_dir: Path, tmp_path: Path) -> None:
    """--dry-run lists what would be called and leaves the data dir untouched."""
    export = write_export(tmp_path / "e.json", ["a1", "a2", "a3"])
    result = invoke("scan", "--source", str(export), "--dry-run", "--limit", "2", "--json")
    assert result.returncode == 0
    doc = json.loads(result.stdout)["result"]
    assert doc["would_call"] == ["a1", "a2"] and doc["calls"] == 0 and doc["remaining"] == 1
    assert files_under(data_dir) == []


def test_json_output_is_one_document_on_stdout(data_dir: Path) -> None:
    """--json prints exactly one JSON document on stdout; notices go to stderr."""
    result = sample("--limit", "3", "--json")
    json.loads(result.stdout)  # raises if anything else is on stdout
    assert result.stdout.count('"command"') >= 1
    assert "note:" not in result.stdout


def test_missing_api_key_is_a_config_error_before_any_work(data_dir: Path) -> None:
    """WATCHER_PROVIDER=openai without a key: exit 2, message names the variable, nothing written."""
    result = invoke("scan", env={"WATCHER_PROVIDER": "openai", "DEVTO_USERNAME": "someone"})
    assert result.returncode == 2
    assert "WATCHER_API_KEY" in result.stderr
    assert files_under(data_dir) == []


@pytest.mark.parametrize("entry", ["cli", "bridge"])
def test_read_only_commands_never_need_a_key(data_dir: Path, entry: str) -> None:
    """WATCHER_PROVIDER=openai with no key (a Codex shell drops *KEY*): status, inbox, show, mark
    and signals still work from both entrypoints; only a model-calling scan asks for the key."""
    assert sample("--limit", "3").returncode == 0  # offline: some comments to read
    cid = json.loads(invoke("inbox", "--all", "--json").stdout)["result"]["comments"][0]["id"]
    env = {"WATCHER_PROVIDER": "openai"}
    for args in (["status"], ["inbox"], ["show", cid], ["mark", cid, "ignored"], ["signals"]):
        result = invoke(*args, "--json", env=env, entry=entry)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    refused = invoke("scan", "--json", env={**env, "DEVTO_USERNAME": "someone"}, entry=entry)
    assert refused.returncode == 2 and "API key" in json.loads(refused.stdout)["error"]["message"]


def test_show_and_mark_unknown_or_malformed_ids_are_usage_errors(data_dir: Path) -> None:
    """Unknown ids and ids that could be paths are refused with exit 2."""
    for args in (["show", "nosuch"], ["mark", "nosuch", "replied"], ["show", "../../etc"]):
        result = invoke(*args)
        assert result.returncode == 2, args
        assert "error:" in result.stderr


def test_mark_then_inbox_hides_the_replied_comment(data_dir: Path) -> None:
    """Marking a comment replied removes it from `watcher inbox`; `open` brings it back."""
    sample("--limit", "20")
    rows = json.loads(invoke("inbox", "--json").stdout)["result"]["comments"]
    target = rows[0]["id"]
    assert invoke("mark", target, "replied").returncode == 0
    ids = [r["id"] for r in json.loads(invoke("inbox", "--json").stdout)["result"]["comments"]]
    assert target not in ids
    invoke("mark", target, "open")
    ids = [r["id"] for r in json.loads(invoke("inbox", "--json").stdout)["result"]["comments"]]
    assert target in ids


def test_status_shows_states_provider_and_signal_counts(data_dir: Path) -> None:
    """status counts comments by state and shows the signal counts after a scan."""
    sample("--limit", "4")
    doc = json.loads(invoke("status", "--json").stdout)["result"]
    assert doc["states"]["done"] == 4
    assert doc["settings"]["provider"] == "offline" and doc["settings"]["offline"] is True
    assert doc["signals"]["counts"]["verdict.ok"] == 4


def test_show_prints_text_verdict_and_every_attempt(data_dir: Path, tmp_path: Path) -> None:
    """show renders the comment, its verdict and its attempts for a person."""
    export = write_export(tmp_path / "e.json", ["s1"])
    invoke("scan", "--source", str(export))
    result = invoke("show", "s1")
    assert result.returncode == 0
    assert "TAG:s1" in result.stdout and "verdict:" in result.stdout and "attempt 1: scan via cli" in result.stdout


def test_help_explains_commands_and_exit_codes() -> None:
    """--help lists every command and the exit codes."""
    result = invoke("--help")
    for word in ("scan", "recheck", "status", "inbox", "show", "mark", "signals", "Exit codes"):
        assert word in result.stdout


def test_global_options_are_accepted_after_the_command_name(data_dir: Path, tmp_path: Path) -> None:
    """`watcher-bridge status --data-dir D` uses D, as agents type it, not only before the command."""
    other = tmp_path / "elsewhere"
    proc = run_main("bridge", "status", "--data-dir", str(other), "-v", data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert envelope(proc)["result"]["settings"]["data_dir"] == str(other)


def test_bridge_usage_errors_still_answer_with_one_envelope(data_dir: Path) -> None:
    """A bad option or unknown command gives exit 2 and exactly one JSON envelope on stdout.

    The first is a real process (its exit code, its whole stdout); the others run the bridge's
    ``main`` in this process."""
    for answer, args in ((run, ["scan", "--limit", "x"]), (run_main, ["nosuch"]), (run_main, ["show"])):
        proc = answer("bridge", *args, data_dir=data_dir)
        assert proc.returncode == 2, args
        doc = json.loads(proc.stdout)
        assert doc["ok"] is False and doc["exit_code"] == 2 and doc["error"]["kind"] == "usage"


# What typer and click refuse before any command runs, and the command the envelope names.
REFUSED_ARGUMENTS = [
    (("submit", "aaa", "-1", "{}", "--json"), "submit"),  # "-1" parses as an unknown option
    (("submit", "abc", "x", "{}", "--json"), "submit"),
    (("grant", "abc", "--attempts", "1.5", "--json"), "grant"),
    (("scan", "--limit", "--json"), "scan"),
    (("show", "--json"), "show"),
    (("mark", "abc", "--json"), "mark"),
    (("nosuch", "--json"), "nosuch"),
    (("--bogus", "status", "--json"), "status"),
    (("--data-dir", "/tmp", "--json"), ""),
]


@pytest.mark.parametrize(("args", "command"), REFUSED_ARGUMENTS)
def test_with_json_an_argument_typer_refuses_is_one_usage_envelope(data_dir: Path, args: tuple[str, ...],
                                                                     command: str) -> None:
    """SPEC §13.5, §15.5: with --json, typer's own argument errors are exactly one envelope on stdout
    (exit 2, kind usage) naming the command, and the message on stderr."""
    from _proc import run_main

    proc = run_main("cli", *args, data_dir=data_dir)
    assert proc.returncode == 2, proc.stdout
    doc = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert (doc["ok"], doc["command"], doc["exit_code"], doc["result"]) == (False, command, 2, None)
    assert doc["error"]["kind"] == "usage" and doc["error"]["message"] in proc.stderr


@pytest.mark.parametrize(("args", "command"), [
    (("submit", "aaa", "-1", "{}"), "submit"), (("--bogus", "status"), "status"), (("--verbose",), ""),
    (("grant", "abc", "--attempts", "1.5"), "grant")])
def test_the_bridge_answers_every_refused_argument_with_one_envelope_naming_the_command(
        data_dir: Path, args: tuple[str, ...], command: str) -> None:
    """The bridge: one envelope, naming the command (not an option standing before it). (`watcher-bridge
    mcp` is the exception by design: its stdout is the protocol, tests/test_mcp_server.py.)"""
    from _proc import run_main

    proc = run_main("bridge", *args, data_dir=data_dir)
    assert proc.returncode == 2, proc.stdout
    doc = json.loads(proc.stdout)
    assert (doc["ok"], doc["command"], doc["exit_code"], doc["error"]["kind"]) == (False, command, 2, "usage")


def test_cooldown_makes_runs_exit_3_even_with_nothing_to_call_while_status_still_works(data_dir: Path) -> None:
    """During a provider cooldown scan/recheck exit 3 and say until when; status and mark work."""
    from watcher.config import load_settings
    from watcher.pipeline import write_cooldown
    from watcher.store.files import FileStore

    sample("--limit", "2")
    until = write_cooldown(FileStore(load_settings().paths), 60, reason="rate_limited: test")
    for args in (["recheck", "--json"], ["--data-dir", os.environ["WATCHER_DATA_DIR"], "scan", "--source", "sample",
                                         "--limit", "1", "--json"]):
        result = invoke(*args)
        assert result.returncode == 3, args
        doc = json.loads(result.stdout)
        assert doc["error"]["message"].startswith(f"provider cooldown until {until}")
        assert doc["result"]["calls"] == 0
    status = json.loads(invoke("status", "--json").stdout)["result"]
    assert status["cooldown"]["until"] == until
    assert status["states"]["done"] == 2  # the cooled-down scan made no call


def test_bridge_routes_mcp_with_global_options_before_or_after(data_dir: Path) -> None:
    """`watcher-bridge --data-dir D mcp` and `watcher-bridge mcp --data-dir D` both reach the MCP server.

    Through the bridge's ``main`` in this process: a process would spend ~1.5 s of CPU importing
    the MCP SDK to print its help (test_mcp_server.py starts real servers)."""
    for args in (["--data-dir", str(data_dir), "mcp", "--help"], ["mcp", "--help", "--data-dir", str(data_dir)]):
        proc = run_main("bridge", *args, data_dir=data_dir)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Serve the watcher commands as MCP tools" in proc.stdout


def test_recheck_reports_a_failed_comment_whose_inbox_file_vanished(data_dir: Path, tmp_path: Path) -> None:
    """A failed comment known to the index whose inbox file is gone is reported, not skipped silently."""
    from watcher.config import Paths
    from watcher.models import AttemptError
    from watcher.store.files import FileStore

    export = write_export(tmp_path / "e.json", ["gone1"])
    paths = Paths(data_dir)
    invoke("scan", "--source", str(export))
    record = FileStore(paths).load_record("gone1")
    assert record is not None
    # turn it into a failed comment, index it, then lose its inbox file
    failed = record.model_copy(update={"verdict": None, "attempts": [record.attempts[0].model_copy(
        update={"outcome": "error", "error": AttemptError(kind="malformed_json", message="x")})]})
    FileStore(paths).save_record(failed)
    invoke("status")
    paths.inbox_file("gone1").unlink()
    doc = json.loads(invoke("recheck", "--json").stdout)["result"]
    assert [(i["id"], i["outcome"]) for i in doc["items"]] == [("gone1", "skipped")]
    assert "gone" in doc["items"][0]["message"] and doc["calls"] == 0


def test_check_lists_every_free_check_in_order_and_exits_with_the_first_failure(data_dir: Path) -> None:
    """`watcher check --json`: config, key, provider, dev.to user, data dir; with no DEVTO_USERNAME
    only the dev.to check fails, so the command exits 2 with that check's message."""
    result = invoke("check", "--json")
    doc = json.loads(result.stdout)
    checks = [(c["name"], c["ok"]) for c in doc["result"]["checks"]]
    assert checks == [("config", True), ("api_key", True), ("provider", True), ("devto_user", False),
                      ("data_dir", True)]
    assert (result.returncode, doc["error"]["kind"]) == (2, "config")
    assert "DEVTO_USERNAME is not set" in doc["error"]["message"]


@pytest.mark.parametrize("entry", ["cli", "bridge"])
def test_hooks_handed_to_main_reach_the_pipeline_beside_the_progress_display(
        data_dir: Path, tmp_path: Path, entry: str) -> None:
    """`main(argv, hooks=...)`: the store factory and progress callbacks a caller hands the front end
    are the ones the batch uses; the human front end still renders its table (and its progress)."""
    from watcher.config import Paths
    from watcher.pipeline import Hooks, ItemResult
    from watcher.store.files import FileStore

    opened: list[Path] = []

    class Recorded(FileStore):
        def __init__(self, paths: Paths) -> None:
            opened.append(paths.root)
            super().__init__(paths)

    planned: list[int] = []
    items: list[ItemResult] = []
    export = write_export(tmp_path / "e.json", ["h1", "h2"])
    hooks = Hooks(make_store=Recorded, on_planned=planned.append, on_item=items.append)
    done = run_main(entry, "scan", "--source", str(export), data_dir=data_dir,
                    env={"WATCHER_PROVIDER": "offline"}, hooks=hooks)
    assert done.returncode == 0, done.stderr
    assert opened == [data_dir] and planned == [2] and [(i.id, i.outcome) for i in items] == [
        ("h1", "verdict"), ("h2", "verdict")]
    assert (done.envelope is None) == (entry == "cli")  # the cli printed its table, the bridge its envelope


def test_status_and_check_name_the_variable_the_key_came_from_never_the_key(data_dir: Path) -> None:
    """ANTHROPIC_API_KEY (what Claude Code hands the servers it starts): status --json names it, the human
    status says "key: from ANTHROPIC_API_KEY", check's api_key line too; the key itself appears nowhere."""
    key = "sk-ant-status-never-shown"
    env = {"WATCHER_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": key,
           "WATCHER_BASE_URL": "http://127.0.0.1:9"}  # a closed port: check's probe fails fast, offline
    status = invoke("status", "--json", env=env)
    assert json.loads(status.stdout)["result"]["settings"]["api_key_from"] == "ANTHROPIC_API_KEY"
    human = invoke("status", env=env)
    assert "key:       from ANTHROPIC_API_KEY (never shown)" in human.stdout
    check = json.loads(invoke("check", "--json", env=env).stdout)
    line = next(c for c in check["result"]["checks"] if c["name"] == "api_key")
    assert line["ok"] and line["detail"] == "set (never shown), from ANTHROPIC_API_KEY"
    for text in (status.stdout, human.stdout, human.stderr, json.dumps(check)):
        assert key not in text


def test_an_unexpanded_setting_stops_status_with_exit_2_naming_it(data_dir: Path) -> None:
    """DEVTO_USERNAME="${DEVTO_USERNAME}" (a client passed it literally): status exits 2 and says which."""
    result = invoke("status", "--json", env={"DEVTO_USERNAME": "${DEVTO_USERNAME}"})
    doc = json.loads(result.stdout)
    assert (result.returncode, doc["error"]["kind"]) == (2, "config")
    assert doc["error"]["message"].startswith("DEVTO_USERNAME is the unexpanded text ${DEVTO_USERNAME}")


def _one_comment(tmp_path: Path) -> tuple[str, str]:
    """A scanned comment's id and its dev.to link."""
    export = write_export(tmp_path / "e.json", ["open1"])
    invoke("scan", "--source", str(export))
    shown = json.loads(invoke("show", "open1", "--json").stdout)["result"]
    return "open1", shown["comment"]["url"]


def test_open_hands_the_comments_link_to_the_browser(data_dir: Path, tmp_path: Path) -> None:
    """`watcher open ID` prints the comment's dev.to link and gives it to the browser ($BROWSER)."""
    cid, url = _one_comment(tmp_path)
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {tmp_path / "opened"}\n')
    browser.chmod(0o755)
    proc = run("cli", "open", cid, data_dir=data_dir, env={"BROWSER": str(browser)})
    assert (proc.returncode, proc.stdout) == (0, url + "\n"), proc.stderr
    assert (tmp_path / "opened").read_text() == url + "\n"


def test_open_without_a_browser_prints_the_link_and_says_so(data_dir: Path, tmp_path: Path) -> None:
    """Where no browser can be started, the link is still printed, a line on stderr says so, exit 0."""
    cid, url = _one_comment(tmp_path)
    proc = run("cli", "open", cid, "--json", data_dir=data_dir, env={"BROWSER": str(tmp_path / "none")})
    assert proc.returncode == 0
    assert envelope(proc)["result"] == {"id": cid, "url": url, "opened": False}
    human = run("cli", "open", cid, data_dir=data_dir, env={"BROWSER": str(tmp_path / "none")})
    assert human.stdout == url + "\n" and "no web browser" in human.stderr


def test_open_is_the_persons_own_and_not_offered_to_agents(data_dir: Path, tmp_path: Path) -> None:
    """The bridge has no `open` (an unknown command, exit 2); an unknown id is a usage error."""
    cid, _ = _one_comment(tmp_path)
    assert envelope(invoke("open", cid, entry="bridge"))["exit_code"] == 2
    assert invoke("open", "zzzz9").returncode == 2
