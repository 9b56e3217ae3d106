"""``watcher schedule systemd|launchd|cron`` (SPEC §16.2): a ready unit, plist or crontab line for
this install, printed — never written anywhere: installing it is the person's two commands
(README, "Running it unattended").

Every path in them is absolute — this executable and the env file
``~/.config/devto-watcher.env`` — because none of the three runs a login shell: a relative path,
``~`` or ``$HOME`` would be resolved by whoever starts it, or not at all. The env file is read with
``set -a``, so it works written either way the README shows (``export A=1`` or ``A=1`` lines).
"""

from __future__ import annotations

import plistlib
import shlex
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from watcher.errors import UsageError

KINDS = ("systemd", "launchd", "cron")
LABEL = "dev.devto-watcher"
UNIT = "devto-watcher.service"


@dataclass(frozen=True)
class Install:
    """What the printed unit runs: this executable, the env file, and the options it needs."""

    executable: tuple[str, ...]  # argv prefix: the watcher script, or python -m watcher
    env_file: Path
    data_dir: Path | None = None  # --data-dir as given to schedule, made absolute

    def argv(self, *args: str) -> list[str]:
        data = ["--data-dir", str(self.data_dir)] if self.data_dir is not None else []
        return [*self.executable, *data, *args]

    def shell(self, *args: str) -> str:
        """The ``sh -c`` text: the env file's variables exported, then watcher in its place."""
        env = shlex.quote(str(self.env_file))
        return f"set -a && . {env} && set +a && exec {shlex.join(self.argv(*args))}"


def this_install(data_dir: Path | None = None, home: Path | None = None) -> Install:
    """This process's own executable: the ``watcher`` script it was started as, else the
    interpreter with ``-m watcher``."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "watcher" and script.exists():
        executable: tuple[str, ...] = (str(script.absolute()),)
    else:
        executable = (str(Path(sys.executable).absolute()), "-m", "watcher")
    home = home or Path.home()
    return Install(
        executable=executable,
        env_file=home / ".config" / "devto-watcher.env",
        data_dir=data_dir.expanduser().absolute() if data_dir is not None else None,
    )


def render(kind: str, install: Install, every: timedelta, every_text: str) -> str:
    if kind == "systemd":
        return systemd_unit(install, every_text)
    if kind == "launchd":
        return launchd_plist(install, every_text)
    if kind == "cron":
        return crontab_line(install, every)
    raise UsageError(f"schedule takes one of {', '.join(KINDS)}, got {kind!r}")


def _systemd_quote(text: str) -> str:
    """One word of ExecStart in double quotes: systemd expands ``%`` specifiers and ``$`` variables
    even there, so both are doubled; backslash and quote are escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def systemd_unit(install: Install, every_text: str) -> str:
    shell = install.shell("watch", "--every", every_text)
    return (
        "# devto-watcher: `watcher watch` as a systemd user service.\n"
        f"# Install: watcher schedule systemd > ~/.config/systemd/user/{UNIT}\n"
        f"#          systemctl --user daemon-reload && systemctl --user enable --now {UNIT}\n"
        "[Unit]\n"
        "Description=devto-watcher: new dev.to comments that need a reply\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart=/bin/sh -c {_systemd_quote(shell)}\n"
        "Restart=on-failure\n"
        "RestartSec=60\n"
        # SIGTERM ends a wait between rounds at once and a round as §13.6 says; 30 s covers a call.
        "TimeoutStopSec=30\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(install: Install, every_text: str) -> str:
    logs = install.env_file.parent.parent / "Library" / "Logs" / "devto-watcher.log"
    document = {
        "Label": LABEL,
        "ProgramArguments": ["/bin/sh", "-c", install.shell("watch", "--every", every_text)],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 60,
        "ProcessType": "Background",
        "StandardOutPath": str(logs),
        "StandardErrorPath": str(logs),
    }
    return plistlib.dumps(document, sort_keys=False).decode("utf-8")


def crontab_line(install: Install, every: timedelta) -> str:
    minutes = int(every.total_seconds() // 60)
    if minutes < 60:
        when = f"*/{minutes} * * * *"
    elif minutes % 60 == 0 and minutes < 24 * 60:
        when = f"0 */{minutes // 60} * * *"
    elif minutes == 24 * 60:
        when = "0 8 * * *"
    else:
        raise UsageError("cron takes a whole number of minutes under an hour, or of hours")
    # cron runs the line with /bin/sh, and turns an unescaped % into a newline.
    command = install.shell("cron").replace("%", "\\%")
    return (
        "# devto-watcher: a `watcher cron` round every interval; cron mails what it prints.\n"
        "# Install: (crontab -l 2>/dev/null; watcher schedule cron) | crontab -\n"
        f"{when} {command}\n"
    )
