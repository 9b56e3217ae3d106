"""Small helpers every layer uses: text made safe for a terminal (:mod:`~watcher.util.visible`),
times (:mod:`~watcher.util.timeutil`), URLs and their credentials (:mod:`~watcher.util.urls`), and
worker threads (:mod:`~watcher.util.threads`)."""
