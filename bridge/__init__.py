"""The Codex entrypoint: the same watcher commands, answered as one JSON envelope each.

Nothing here decides anything about attempts, locks or state; it only adapts input and output.
"""
