"""The fork server (tests/_forkserver.py) starts processes that behave as an exec'd console script.

The suite's ``watcher`` / ``watcher-bridge`` processes come from it; these tests hold it to the
real thing: the same output, exit code and fault hooks, a process of its own, killable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _forkserver import FRESH, ForkedProcess, forkable
from _proc import MODULES, command, env_for, run, write_export

CASES = [
    ("cli", ("status", "--json")),
    ("cli", ("status",)),  # the human table
    ("cli", ("show", "nosuch")),  # exit 2, a message on stderr
    ("cli", ("recheck", "--limit", "x")),  # a usage error from the option parser
    ("cli", ("--help",)),
    ("bridge", ("status",)),
    ("bridge", ("mark", "../x", "replied")),
]


def _both(entry: str, args: tuple[str, ...], env: dict[str, str]) -> tuple[tuple[int, str, str], ...]:
    execed = subprocess.run(command(entry, *args), env=env, capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL, check=False)
    forked = ForkedProcess(command(entry, *args), MODULES[entry], env)
    out, err = forked.communicate(timeout=60)
    return (execed.returncode, execed.stdout, execed.stderr), (forked.wait(), out, err)


@pytest.mark.parametrize(("entry", "args"), CASES, ids=[" ".join((e, *a)) for e, a in CASES])
def test_a_forked_process_answers_as_the_execed_console_script(entry: str, args: tuple[str, ...],
                                                                data_dir: Path) -> None:
    execed, forked = _both(entry, args, env_for(data_dir, {"COLUMNS": "100"}))
    assert forked == execed


def test_a_forked_process_has_the_fault_hooks_its_pythonpath_names(data_dir: Path, tmp_path: Path) -> None:
    """sitecustomize comes from PYTHONPATH as at start-up: a kill point kills the forked child."""
    export = write_export(tmp_path / "e.json", ["a1"])
    env = env_for(data_dir, {"WATCHER_PROVIDER": "offline"}, fault="kill_at=after_lock")
    execed, forked = _both("cli", ("scan", "--source", str(export), "--json"), env)
    assert execed[0] == forked[0] == -signal.SIGKILL
    assert forked[1] == execed[1] == ""


def test_a_forked_process_is_its_own_process_and_sigkill_ends_it(data_dir: Path, tmp_path: Path) -> None:
    """Held in a model call: its own pid and working directory, still running; SIGKILL ends it."""
    export = write_export(tmp_path / "e.json", ["a1"])
    with running_fake() as fake:
        fake.script("a1", "hold")
        proc = ForkedProcess(command("cli", "scan", "--source", str(export)), MODULES["cli"],
                             env_for(data_dir, fake.env()))
        fake.wait_in_flight()
        assert proc.pid != os.getpid() and proc.poll() is None
        assert Path(f"/proc/{proc.pid}/cwd").resolve() == Path.cwd().resolve()
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        fake.release()
    assert proc.returncode == -signal.SIGKILL


def test_a_forked_mcp_server_leads_its_own_session_and_ends_at_stdin_eof(data_dir: Path) -> None:
    """As the SDK's stdio client starts it (``start_new_session``): its own session and process group
    (the SDK's shutdown signals the group), the SDK preloaded; closing stdin ends it with 0."""
    env = {"PATH": os.environ["PATH"], "WATCHER_DATA_DIR": str(data_dir), "WATCHER_PROVIDER": "offline"}
    proc = ForkedProcess(command("bridge", "mcp"), MODULES["bridge"], env, stdin=subprocess.PIPE,
                         start_new_session=True, preload="mcp")
    proc.stdin.write('{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    proc.stdin.flush()
    assert '"id":1' in proc.stdout.readline().replace(" ", "")
    assert os.getsid(proc.pid) == os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_a_forked_child_has_watcher_preloaded_but_imports_what_reads_its_streams_fresh(tmp_path: Path) -> None:
    """watcher's modules come from the server; watcher.cli.render, which asks at import whether stdout
    is a terminal, is imported in the child, with the child's own streams (tests/_forkserver.py)."""
    script = tmp_path / "which.py"
    script.write_text("import json, sys\n"
                      "print(json.dumps({name: name in sys.modules for name in sys.argv[1:]}))\n")
    names = ["watcher.commands.core", "watcher.pipeline.locked", *FRESH]
    proc = ForkedProcess([str(script), *names], None, {"PATH": os.environ["PATH"]})
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {name: name not in FRESH for name in names}


def test_another_trees_watcher_on_pythonpath_is_execed_and_runs_that_tree(data_dir: Path, tmp_path: Path) -> None:
    """A PYTHONPATH holding a watcher of its own: an exec'd process imports that one, so the suite
    execs it rather than fork a child that would have the preloaded watcher."""
    other = tmp_path / "other"
    (other / "watcher").mkdir(parents=True)
    (other / "watcher" / "__init__.py").write_text("")
    (other / "watcher" / "cli.py").write_text("def main():\n    print('the other tree')\n    return 0\n")
    env = {"PYTHONPATH": str(other)}
    assert not forkable(env_for(data_dir, env))
    assert forkable(env_for(data_dir, {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}))
    done = run("cli", "status", data_dir=data_dir, env=env)
    assert (done.returncode, done.stdout) == (0, "the other tree\n"), done.stderr
