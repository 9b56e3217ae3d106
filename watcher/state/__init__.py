"""State as data: the pure rules over a comment's inbox record (:mod:`watcher.state.records`) and
the merge of ``seen.json`` (:mod:`watcher.state.seen`). No files here: the store reads and
writes."""
