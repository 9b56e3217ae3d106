"""Mistakes a new user makes are refused before anything is written (SPEC §15.5, §16.3)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _proc import command, env_for, run, run_main

from watcher.store.scratch import scratch_data_dir, sweep

# A user id with no passwd entry, as a container runtime gives one (`docker run --user 54321`).
NO_PASSWD_UID = 54321


def test_a_relative_watcher_data_dir_is_refused_naming_the_absolute_path(tmp_path: Path) -> None:
    """WATCHER_DATA_DIR=state/w: exit 2 naming the absolute path it would mean, nothing made."""
    answer = run("cli", "status", data_dir=None, env={"WATCHER_DATA_DIR": "state/w"})
    assert answer.returncode == 2, answer.stderr
    assert (
        "relative path" in answer.stderr and f"WATCHER_DATA_DIR={tmp_path}/state/w" in answer.stderr
    )
    assert not (tmp_path / "state").exists()


def test_a_relative_data_dir_option_is_taken_as_typed(tmp_path: Path) -> None:
    """--data-dir state/w on the command line is the shell's path: it is used, not refused."""
    answer = run("cli", "status", "--data-dir", "state/w", data_dir=None)
    assert answer.returncode == 0, answer.stderr
    assert str(tmp_path / "state" / "w") in answer.stdout


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run as a user with no passwd entry",
)
@pytest.mark.parametrize("args", [("status",), ("inbox",), ("scan",), ("check",), ("signals",)])
def test_no_home_and_no_passwd_entry_is_a_config_error_naming_the_setting(
    args: tuple[str, ...],
) -> None:
    """HOME unset for a uid with no passwd entry: exit 2 naming WATCHER_DATA_DIR, not a crash."""
    env = env_for(None)
    env.pop("HOME", None)
    env.pop("XDG_DATA_HOME", None)
    as_nobody = [
        "setpriv",
        f"--reuid={NO_PASSWD_UID}",
        f"--regid={NO_PASSWD_UID}",
        "--clear-groups",
    ]
    answer = subprocess.run(
        [*as_nobody, *command("cli", *args)],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert answer.returncode == 2, (answer.returncode, answer.stderr)
    assert "WATCHER_DATA_DIR" in answer.stderr and "internal error" not in answer.stderr


@pytest.mark.parametrize("where", ["the data dir", "inside it", "containing it"])
def test_an_eval_dir_sharing_files_with_the_data_dir_is_refused(
    tmp_path: Path, data_dir: Path, where: str
) -> None:
    """eval --set --eval-dir that is, lies inside or contains the data dir: exit 2, nothing written."""
    (data_dir / "seen.json").write_text('{"schema_version": 1, "comments": {}, "articles": {}}')
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    eval_dir = {
        "the data dir": data_dir,
        "inside it": data_dir / "inbox",
        "containing it": tmp_path,
    }[where]
    answer = run_main(
        "cli", "eval", "--set", "bundled", "--eval-dir", str(eval_dir), data_dir=data_dir
    )
    assert answer.returncode == 2, answer.stderr
    assert "your data dir" in answer.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_a_scratch_dir_of_a_killed_eval_is_swept_by_the_next(tmp_path: Path) -> None:
    """A process SIGKILLed inside its scratch dir leaves it; the next scratch dir removes it."""
    parent = tmp_path / "shm"
    parent.mkdir()
    code = (
        f"from watcher.store.scratch import scratch_data_dir\n"
        f"with scratch_data_dir(parent={str(parent)!r}) as p:\n"
        f"    (p / 'inbox').mkdir(); print(p, flush=True); input()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    left = Path(child.stdout.readline().strip())
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert left.is_dir()
    with scratch_data_dir(parent=str(parent)) as mine:
        assert not left.exists() and mine.is_dir()
    assert list(parent.iterdir()) == []


def test_a_scratch_dir_of_a_running_process_or_another_name_is_kept(tmp_path: Path) -> None:
    """Only PREFIX<pid>- dirs of gone processes go: a live one's and unrelated names stay."""
    live = tmp_path / f"watcher-eval-{os.getpid()}-abc"
    other = tmp_path / "watcher-evaluation-notes"
    gone = tmp_path / f"watcher-eval-{_dead_pid()}-xyz"
    for path in (live, other, gone):
        path.mkdir()
    assert sweep(str(tmp_path)) == [gone]
    assert live.is_dir() and other.is_dir() and not gone.exists()


def test_an_empty_named_data_dir_beside_a_default_that_holds_state_is_named(data_dir: Path) -> None:
    """WATCHER_DATA_DIR empty while the default data dir holds comments: a note names the default;
    once the named one holds state, no note."""
    default = Path(os.environ["XDG_DATA_HOME"]) / "devto-watcher"
    (default / "inbox").mkdir(parents=True)
    first = run_main("cli", "status", data_dir=data_dir)
    assert first.returncode == 0 and f"default data dir {default} does" in first.stderr, first.stderr
    (data_dir / "inbox").mkdir()
    assert "default data dir" not in run_main("cli", "status", data_dir=data_dir).stderr
