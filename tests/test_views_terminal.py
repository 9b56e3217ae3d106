"""SPEC §16.4 on a real terminal: a pseudo-terminal of a set size (or of none: 0 columns, as some
CI runners and editors give) is the command's stdin, stdout and stderr. Output longer than the
screen goes through ``PAGER``, never with ``--no-pager`` or ``--json``; lines fit the width.

The pager here is a small Python program that says it paged and how many lines it was given.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from _proc import ENTRYPOINTS, env_for, run_main
from _terminal import unsafe
from rich.cells import cell_len

PAGER = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
    "import sys; text = sys.stdin.read(); print('PAGED', text.count(chr(10)))")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(*args: str, data_dir: Path, columns: int, rows: int = 24,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """``watcher ARGS`` with a pseudo-terminal of ``columns`` x ``rows`` as its terminal: its exit
    code and everything it showed (colour codes removed, CR LF as LF)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    full_env = env_for(data_dir, {"PAGER": PAGER, "TERM": "xterm", **(env or {})})
    for name in ("COLUMNS", "LINES", "NO_COLOR"):
        full_env.pop(name, None)
    proc = subprocess.Popen([str(ENTRYPOINTS["cli"]), *args], stdin=follower, stdout=follower,
                            stderr=follower, env=full_env, close_fds=True)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    code = proc.wait(timeout=60)
    return code, _ANSI.sub("", shown.decode("utf-8", "replace")).replace("\r\n", "\n")


@pytest.fixture
def demo_dir(tmp_path: Path, data_dir: Path) -> Path:
    """A data dir holding the demo's eleven comments that need a reply."""
    demo = tmp_path / "demo"
    assert run_main("cli", "--data-dir", str(demo), "demo", data_dir=data_dir).returncode == 0
    return demo


def test_output_longer_than_the_screen_goes_through_the_pager(demo_dir: Path) -> None:
    """inbox (about 60 lines) on a 24-line terminal is handed to PAGER, whole."""
    code, shown = on_terminal("--data-dir", str(demo_dir), "inbox", data_dir=demo_dir, columns=80)
    assert code == 0 and re.search(r"PAGED \d{2}", shown), shown[-500:]
    assert "2ac3d" not in shown  # the pager had it, not the terminal


def test_no_pager_and_json_print_straight_to_the_terminal(demo_dir: Path) -> None:
    """--no-pager and --json never start the pager."""
    for args in (("--no-pager", "inbox"), ("inbox", "--json")):
        code, shown = on_terminal("--data-dir", str(demo_dir), *args, data_dir=demo_dir, columns=80)
        assert code == 0 and "PAGED" not in shown and "2ac3d" in shown, args


def test_output_that_fits_the_screen_is_not_paged(demo_dir: Path) -> None:
    """status (a dozen lines) on a 40-line terminal prints as it is."""
    code, shown = on_terminal("--data-dir", str(demo_dir), "status", data_dir=demo_dir,
                              columns=80, rows=40)
    assert code == 0 and "PAGED" not in shown and "provider:" in shown


@pytest.mark.parametrize("columns", [60, 80, 0])
def test_lines_fit_the_terminal_and_a_sizeless_one_is_80_wide(demo_dir: Path, columns: int) -> None:
    """inbox, show and status fit the terminal's width (80 when it reports 0 columns), except a
    URL or a path longer than the line."""
    width = columns or 80
    for args in (("inbox",), ("show", "2ahm5"), ("status",), ("inbox", "--oneline")):
        code, shown = on_terminal("--data-dir", str(demo_dir), "--no-pager", *args,
                                  data_dir=demo_dir, columns=columns, rows=200)
        assert code == 0, shown
        assert unsafe(shown.replace("\x1b", "")) == []
        over = [line for line in shown.splitlines()
                if cell_len(line) > width and not re.fullmatch(r"\s*(https?://|/)\S+", line)]
        assert over == [], (args, width)


def test_a_terminal_of_no_size_gets_its_error_said_not_a_traceback(demo_dir: Path) -> None:
    """A notice on a 0-column terminal (grant's refusal, a missing comment) is wrapped at 80."""
    code, shown = on_terminal("--data-dir", str(demo_dir), "show", "nosuch", data_dir=demo_dir,
                              columns=0)
    assert code == 2 and "Traceback" not in shown and "no comment nosuch" in shown, shown
    code, shown = on_terminal("--data-dir", str(demo_dir), "grant", "2ahm5", data_dir=demo_dir,
                              columns=0)
    assert "Traceback" not in shown and "ValueError" not in shown, shown
