"""SPEC §13.4 and §9: the first ten minutes — the demo apart, a missing setup that fails
loudly, help that teaches, a table that says what matters, cron that mails only what is new."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _proc import Answer, command, env_for, run, run_main, write_export

COMMANDS = ("demo", "scan", "recheck", "status", "inbox", "show", "mark", "check", "grant", "signals", "claim", "submit")


def invoke(*args: str, env: dict[str, str] | None = None, entry: str = "cli") -> Answer:
    """`watcher ARGS` in this process, in the test's data dir unless ``env`` names another."""
    return run_main(entry, *args, data_dir=Path(os.environ["WATCHER_DATA_DIR"]), env=env)


def test_demo_runs_the_sample_offline_in_its_own_data_dir(data_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`watcher demo` in a fresh directory: ./data/demo gets the sample through the real pipeline,
    offline even with a paid provider configured; the account's data dir is never touched."""
    account = tmp_path / "account"
    account.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    env = {"WATCHER_PROVIDER": "openai", "OPENAI_API_KEY": "sk-never-used", "WATCHER_DATA_DIR": str(account)}
    result = invoke("demo", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "need a reply" in result.stdout and "rm -rf" in result.stdout
    demo = work / "data" / "demo"
    assert len(list((demo / "inbox").glob("*.json"))) == 23
    assert list(account.iterdir()) == []  # WATCHER_DATA_DIR is never the demo's
    records = [json.loads(p.read_text()) for p in (demo / "inbox").glob("*.json")]
    attempts = [a for r in records for a in r["attempts"]]
    assert len(attempts) == 19 and {(a["provider"], a["outcome"]) for a in attempts} == {("offline", "ok")}
    assert sum(1 for r in records if r.get("replied_at") and not r["attempts"]) == 4  # answered: never called
    assert "4 more the author had already answered on dev.to" in result.stdout
    again = invoke("demo", "--json", env=env)
    doc = json.loads(again.stdout)["result"]
    assert sum(run["calls"] for run in doc["scans"]) == 0 and doc["inbox"]["count"] >= 1


def test_a_cron_line_without_its_environment_fails_loudly(data_dir: Path) -> None:
    """No variables at all (cron): scan exits 2 and says what to set; with a username but no
    provider, exit 2 naming WATCHER_PROVIDER. Nothing is written either way.

    The bare line is a real process, as cron starts it; the two after it run ``main`` in this process."""
    bare = run("cli", "scan", data_dir=data_dir)
    assert bare.returncode == 2 and "DEVTO_USERNAME" in bare.stderr and "watcher demo" in bare.stderr
    no_provider = run_main("cli", "scan", data_dir=data_dir, env={"DEVTO_USERNAME": "someone"})
    assert no_provider.returncode == 2 and "WATCHER_PROVIDER" in no_provider.stderr
    recheck = run_main("bridge", "recheck", data_dir=data_dir)
    assert recheck.returncode == 2 and "WATCHER_PROVIDER" in json.loads(recheck.stdout)["error"]["message"]
    assert list(data_dir.iterdir()) == []


def test_the_data_dir_is_shown_absolute_and_a_missing_one_is_named(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`cd /tmp; watcher inbox --data-dir relative/data` that is not there: stderr says so, and
    status shows the absolute path (a relative WATCHER_DATA_DIR is refused:
    tests/test_first_contact_mistakes.py)."""
    monkeypatch.chdir(tmp_path)
    shown = run_main("cli", "inbox", "--data-dir", "relative/data", data_dir=None)
    assert shown.returncode == 0
    assert f"{tmp_path}/relative/data does not exist" in shown.stderr
    status = json.loads(run_main("cli", "status", "--json", "--data-dir", "relative/data",
                                 data_dir=None).stdout)["result"]
    assert status["settings"]["data_dir"] == str(tmp_path / "relative" / "data")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_has_examples_and_exit_codes(command: str) -> None:
    """`watcher CMD -h` teaches: an example and the exit codes."""
    result = invoke(command, "-h")
    assert result.returncode == 0
    assert "Examples:" in result.stdout and "Exit codes:" in result.stdout, result.stdout


def test_top_level_help_lists_settings_version_and_bridge_help() -> None:
    """-h lists every variable and config.toml; --version; the bridge's help explains the envelope and mcp."""
    top = invoke("-h").stdout
    for word in ("WATCHER_PROVIDER", "WATCHER_TIMEOUT", "DEVTO_USERNAME", "config.toml", "watcher demo"):
        assert word in top
    from watcher import __version__

    assert invoke("--version").stdout.strip() == f"devto-watcher {__version__}"
    bridge = invoke("--help", entry="bridge")
    assert bridge.returncode == 0 and "envelope" in bridge.stdout.lower() and "watcher-bridge mcp" in bridge.stdout


def test_a_bad_number_is_echoed_back() -> None:
    """--limit abc says what was typed."""
    result = invoke("scan", "--limit", "abc")
    assert result.returncode == 2 and "'abc' is not a whole number" in result.stderr


def test_inbox_new_lists_each_comment_needing_a_reply_once(data_dir: Path, tmp_path: Path) -> None:
    """First --new lists what needs a reply; the second prints nothing at all (cron sends no mail);
    a comment that needs a reply later is listed once, by the next --new."""
    env = {"WATCHER_PROVIDER": "offline"}
    export = write_export(tmp_path / "e.json", ["q1", "q2", "q3"])
    assert invoke("scan", "--source", str(export), "--limit", "2", env=env).returncode == 0
    first = invoke("inbox", "--new", env=env)
    assert first.returncode == 0 and "q1" in first.stdout and "q2" in first.stdout
    second = invoke("inbox", "--new", env=env)
    assert second.returncode == 0 and second.stdout == ""
    invoke("scan", "--source", str(export), env=env)
    third = invoke("inbox", "--new", "--json", env=env)
    assert [r["id"] for r in json.loads(third.stdout)["result"]["comments"]] == ["q3"]
    assert "q1" in invoke("inbox", env=env).stdout  # plain inbox still lists everything open


def test_the_table_says_what_each_comment_is_and_what_to_do_next(data_dir: Path, tmp_path: Path) -> None:
    """A verdict row shows needs-reply, category, priority and summary; an error row its kind and
    message; the closing line fits: after a setup failure it never says 'watcher inbox'."""
    export = write_export(tmp_path / "e.json", ["ok1", "bad"])
    with running_fake() as fake:
        fake.script("bad", "malformed")
        wide = {**fake.env(), "COLUMNS": "120"}  # the table is as wide as the output (SPEC §16.4)
        ok = run("cli", "scan", "--source", str(export), data_dir=data_dir, env=wide)
        assert "needs a reply · question · normal: Asks how to configure" in ok.stdout
        row = next(line for line in ok.stdout.splitlines() if "ok1" in line)
        assert "Asks how to configure the thing." in row  # one line: a row is cut, never wrapped
        assert "malformed_json" in ok.stdout and "next: `watcher inbox` shows the 1" in ok.stdout
        fake.default = "401"
        other = write_export(tmp_path / "f.json", ["z1"], article_id=99)
        failed = run("cli", "scan", "--source", str(other), data_dir=data_dir, env=fake.env())
    assert failed.returncode == 2
    assert "next: fix the setup" in failed.stdout and "watcher inbox" not in failed.stdout.split("next:")[1]


@pytest.mark.slow
def test_a_terminal_sees_the_comment_being_checked_and_the_elapsed_time(data_dir: Path, tmp_path: Path) -> None:
    """In a real terminal (a pty) the progress bar names the comment with the model and the time."""
    export = write_export(tmp_path / "e.json", ["held"])
    with running_fake() as fake:
        fake.script("held", "hold")
        leader, follower = pty.openpty()
        proc = subprocess.Popen(command("cli", "scan", "--source", str(export)),
                                env={**env_for(data_dir, fake.env()), "TERM": "xterm", "COLUMNS": "120"},
                                stdin=follower, stdout=follower, stderr=follower, close_fds=True)
        os.close(follower)
        seen = b""
        deadline = time.monotonic() + 20
        while b"asking the model about held" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                seen += os.read(leader, 65536)
        fake.release()
        while proc.poll() is None or select.select([leader], [], [], 0.1)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(30)
        os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert "asking the model about held" in text
    assert "0:00:0" in text  # the elapsed-time column
    assert proc.returncode == 0 and "needs a reply" in text
