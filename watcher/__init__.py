"""devto-watcher: triage new dev.to comments with a language model, under a hard attempt budget."""

import sys

__version__ = "0.2.0"

# `import httpx` also imports httpx's own command-line client (httpx._main) whenever click is
# installed, and with it click, rich.progress, rich.syntax and pygments: about 0.1 s of CPU in
# every watcher process that talks HTTP, for a CLI watcher never runs (encode/httpx discussion
# #3523, PR #3547). Marking the module absent makes httpx fall back to its stub `main`. Only if
# httpx is not imported yet: a process that already has it keeps what it has.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
