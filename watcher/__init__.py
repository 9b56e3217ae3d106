"""devto-watcher: triage new dev.to comments with a language model, under a hard attempt budget."""

__version__ = "0.2.0"
