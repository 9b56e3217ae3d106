"""Notifications (SPEC §16.1): each round's news to the person's Apprise targets, once.

    targets.py   WATCHER_NOTIFY's URLs, how they are shown (redacted) and redacted from text
    message.py   one message per round from what ``watcher cron`` found, safe in any format
    outbox.py    ``outbox/<id>.json``: a message written before any send, each target's fate
    send.py      the one place Apprise is imported and called
    deliver.py   a round's delivery: add the news to the outbox, then send what is pending

Apprise is imported only by :mod:`watcher.notify.send`, when a message goes out
(``tests/test_notify_imports.py``).
"""
