"""What keeps the lane on loopback, and what shows it did.

Two witnesses, checked after every test (conftest's ``ws`` fixture):

- **A refusing proxy.** Every client session runs with ``HTTP_PROXY``, ``HTTPS_PROXY`` and
  ``ALL_PROXY`` (both spellings) pointing at :class:`Refuser`, a TCP listener on 127.0.0.1 that
  records the first line a client sends it (``CONNECT github.com:443 HTTP/1.1``) and hangs up, and
  ``NO_PROXY`` naming loopback only. A client that honours the proxy variables (both do) and tries
  to reach anything beyond loopback — an update check, telemetry, a plugin marketplace — shows up
  in :attr:`Refuser.hits`, and gets nothing.
- **strace**, when ``WATCHER_REALCLIENTS_STRACE=1``: each client session runs under ``strace -f``
  tracing ``connect``, ``sendto`` and ``sendmsg`` (the client and everything it starts, the MCP
  server included), and :func:`beyond_loopback` lists every address in the trace that is not
  loopback — a DNS query included, so a name looked up without a proxy is caught too.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

STRACE = os.environ.get("WATCHER_REALCLIENTS_STRACE", "") == "1"
LOOPBACK = "127.0.0.1,localhost,::1"
# An address in strace's rendering of a sockaddr: inet_addr("1.2.3.4") or inet_pton(AF_INET6, "…").
_ADDRESS = re.compile(r'inet_addr\("(?P<v4>[^"]+)"\)|inet_pton\(AF_INET6, "(?P<v6>[^"]+)"')
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")


class Refuser(socketserver.ThreadingTCPServer):
    """A proxy that lets nothing through: it notes each connection's first line and closes it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.hits: list[str] = []
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Note)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def note(self, line: str) -> None:
        with self._lock:
            self.hits.append(line)


class _Note(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        assert isinstance(self.server, Refuser)
        self.request.settimeout(2)
        try:
            first = self.request.recv(1024)
        except OSError:
            first = b""
        line = first.split(b"\r\n", 1)[0].decode("latin-1") or "(a connection that sent nothing)"
        self.server.note(line)


@contextmanager
def refusing_proxy() -> Iterator[Refuser]:
    server = Refuser()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Offline:
    """One test's witnesses: the proxy's URL its sessions get, and where their traces go."""

    proxy_url: str | None = None
    traces: list[Path] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        if not self.proxy_url:
            return {}
        names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        proxies = {n: self.proxy_url for n in names} | {n.lower(): self.proxy_url for n in names}
        return proxies | {"NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}

    def traced(self, argv: list[str], where: Path) -> list[str]:
        """``argv`` under ``strace -f`` when the lane traces connections, else as it is."""
        if not STRACE:
            return argv
        strace = shutil.which("strace")
        assert strace, "WATCHER_REALCLIENTS_STRACE=1 needs strace on PATH"
        out = where.with_name(f"{where.stem}.{len(self.traces)}.trace")
        self.traces.append(out)
        return [
            strace,
            "-f",
            "-qq",
            "-e",
            "signal=none",
            "-e",
            "trace=connect,sendto,sendmsg",
            "-o",
            str(out),
            *argv,
        ]

    def beyond_loopback(self) -> list[str]:
        """Every traced connect/sendto/sendmsg to an address that is not loopback."""
        found = []
        for trace in self.traces:
            try:
                lines = trace.read_text(errors="replace").splitlines()
            except FileNotFoundError:
                continue
            for line in lines:
                for match in _ADDRESS.finditer(line):
                    address = match["v4"] or match["v6"]
                    if not _is_loopback(address):
                        port = _PORT.search(line)
                        found.append(
                            f"{address}:{port.group(1) if port else '?'} ({trace.name}: {line[:160]})"
                        )
        return found


def _is_loopback(address: str) -> bool:
    if address.startswith("::ffff:"):
        address = address[len("::ffff:") :]
    if address in ("0.0.0.0", "::"):  # noqa: S104 - a connect to "any" reaches this host only
        return True
    try:
        return address.startswith("127.") or socket.inet_pton(
            socket.AF_INET6, address
        ) == socket.inet_pton(socket.AF_INET6, "::1")
    except OSError:
        return False
