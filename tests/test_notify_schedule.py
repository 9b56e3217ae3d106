"""``watcher schedule`` (SPEC §16.2): units for this install that their tools accept, with
absolute paths, that run watcher with the env file's settings."""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from watcher.commands.schedule import Install, render, this_install
from watcher.errors import UsageError

EVERY = timedelta(minutes=10)


def _install(tmp_path: Path, env_lines: str = "export DEVTO_USERNAME=maya_writes\n") -> Install:
    """An install whose "watcher" is a stub that prints its argv and one setting."""
    stub = tmp_path / "bin dir" / "watcher"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\necho "ARGS $* USER=$DEVTO_USERNAME"\n', encoding="utf-8")
    stub.chmod(0o755)
    env_file = tmp_path / "home" / ".config" / "devto-watcher.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text(env_lines, encoding="utf-8")
    return Install(executable=(str(stub),), env_file=env_file, data_dir=tmp_path / "da%ta $dir")


def test_this_install_names_absolute_paths(tmp_path: Path) -> None:
    """The executable, the env file and a relative --data-dir are all absolute."""
    install = this_install(Path("rel/data"), home=tmp_path)
    assert all(Path(p).is_absolute() for p in install.executable[:1])
    assert install.env_file == tmp_path / ".config" / "devto-watcher.env"
    assert install.data_dir is not None and install.data_dir.is_absolute()


def test_launchd_plist_parses_and_runs_watch(tmp_path: Path) -> None:
    """plistlib reads it; its program, run by sh, is watch with the env file's settings."""
    install = _install(tmp_path)
    plist = plistlib.loads(render("launchd", install, EVERY, "10m").encode("utf-8"))
    assert plist["Label"] == "dev.devto-watcher" and plist["RunAtLoad"] is True
    ran = subprocess.run(plist["ProgramArguments"], capture_output=True, text=True, check=True)
    assert ran.stdout == f"ARGS --data-dir {install.data_dir} watch --every 10m USER=maya_writes\n"


@pytest.mark.parametrize("env_lines", ["export DEVTO_USERNAME=maya_writes\n", "DEVTO_USERNAME=maya_writes\n"])
def test_cron_line_runs_cron_with_either_env_file_style(tmp_path: Path, env_lines: str) -> None:
    """Five time fields, then a command that exports the env file (``export`` or not) and runs cron."""
    install = _install(tmp_path, env_lines)
    (line,) = [x for x in render("cron", install, EVERY, "10m").splitlines() if not x.startswith("#")]
    fields = line.split(" ", 5)
    assert fields[:5] == ["*/10", "*", "*", "*", "*"]
    command = fields[5].replace("\\%", "%")  # cron's own unescaping of %
    ran = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", command], capture_output=True,
                         text=True, check=True)
    assert ran.stdout == f"ARGS --data-dir {install.data_dir} cron USER=maya_writes\n"


def test_cron_line_for_hours(tmp_path: Path) -> None:
    """Two hours is minute 0 of every second hour."""
    assert "\n0 */2 * * * " in render("cron", _install(tmp_path), timedelta(hours=2), "2h")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """``systemd-analyze verify`` accepts the service (quoting, % and $ included)."""
    unit = tmp_path / "devto-watcher.service"
    unit.write_text(render("systemd", _install(tmp_path), EVERY, "10m"), encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                          check=False, env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
    assert done.returncode == 0, done.stderr
    assert "devto-watcher.service:" not in done.stderr


def test_systemd_execstart_runs_watch(tmp_path: Path) -> None:
    """ExecStart, unescaped as systemd does, runs watch with the env file's settings."""
    install = _install(tmp_path)
    (exec_start,) = [x for x in render("systemd", install, EVERY, "10m").splitlines()
                     if x.startswith("ExecStart=")]
    argv = shlex.split(exec_start.removeprefix("ExecStart=").replace("%%", "%").replace("$$", "$"))
    ran = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert ran.stdout == f"ARGS --data-dir {install.data_dir} watch --every 10m USER=maya_writes\n"


def test_unknown_kind_is_a_usage_error(tmp_path: Path) -> None:
    """Only systemd, launchd and cron."""
    with pytest.raises(UsageError):
        render("upstart", _install(tmp_path), EVERY, "10m")
