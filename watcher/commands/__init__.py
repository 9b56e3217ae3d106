"""The core commands: each a function over a :class:`~watcher.commands.core.Context` that returns
a typed result (:mod:`watcher.commands.results`), run through one
:func:`~watcher.commands.core.execute`
that maps errors to exit codes and wraps the result in the envelope
(:mod:`watcher.commands.envelope`).
"""
