"""WATCHER_NOTIFY (SPEC §16.1): Apprise URLs split as Apprise splits them, and secret everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher.config import load_settings
from watcher.errors import ConfigError
from watcher.notify.redact import redaction
from watcher.notify.targets import parse_targets, split_urls

MAIL = "mailtos://me:hunter2pass@smtp.example.com?to=me@example.com,you@example.com"
NTFY = "ntfy://my-secret-topic"
DISCORD = "discord://123456789012/AbCdEfGhIjKlMnOp"
SECRETS = ("hunter2pass", "me@example.com", "my-secret-topic", "123456789012", "AbCdEfGhIjKlMnOp")


def test_spaces_and_commas_separate_urls_but_a_comma_inside_one_stays() -> None:
    """A comma before the next ``scheme://`` separates; one between recipients does not."""
    assert split_urls(f" {MAIL},{NTFY}  {DISCORD} ,") == [MAIL, NTFY, DISCORD]


def test_a_part_that_is_no_url_is_refused_without_quoting_it(tmp_path: Path) -> None:
    """Exit 2 names the target's position, never its text (it may be half a secret)."""
    with pytest.raises(ConfigError) as caught:
        load_settings(data_dir=tmp_path, env={"WATCHER_NOTIFY": f"{NTFY} hunter2pass"})
    assert "#2" in caught.value.message and "hunter2pass" not in caught.value.message


def test_targets_show_only_their_scheme() -> None:
    """str, repr and shown of a target and of the settings hold no part of the URL."""
    settings = load_settings(data_dir="/nonexistent", env={"WATCHER_NOTIFY": f"{MAIL} {NTFY}"})
    shown = " ".join([repr(settings), str(settings.notify), *(t.shown for t in settings.notify)])
    assert "mailtos://[redacted] (#1)" in shown and "ntfy://[redacted] (#2)" in shown
    assert not [s for s in SECRETS if s in shown]


def test_config_file_key_notify(tmp_path: Path) -> None:
    """``notify`` in config.toml, as a string or a list, is the same setting."""
    (tmp_path / "config.toml").write_text(f'notify = ["{NTFY}", "{DISCORD}"]\n', encoding="utf-8")
    assert [t.scheme for t in load_settings(data_dir=tmp_path, env={}).notify] == ["ntfy", "discord"]


def test_target_id_is_stable_and_no_secret() -> None:
    """The outbox names a target by a hash: the same each round, no part of the URL."""
    (first,) = parse_targets(DISCORD)
    (again,) = parse_targets(DISCORD)
    assert first.id == again.id and not [s for s in SECRETS if s in first.id]


def test_redaction_removes_every_secret_part() -> None:
    """Password, address, topic, webhook id and token are gone from a text quoting them."""
    targets = parse_targets(f"{MAIL} {NTFY} {DISCORD}")
    text = (
        f"failed {MAIL} and {NTFY}; webhook 123456789012 token AbCdEfGhIjKlMnOp; "
        'echo {"to": "me@example.com", "auth": "hunter2pass"}'
    )
    assert not [s for s in SECRETS if s in redaction(targets).text(text)]


def test_redaction_keeps_server_names() -> None:
    """A server's name is no secret: the error that says which server failed stays readable."""
    targets = parse_targets(MAIL)
    assert "smtp.example.com" in redaction(targets).text("cannot reach smtp.example.com")


def test_an_agents_verdict_is_redacted_of_the_urls() -> None:
    """The URLs join the keys an agent's submitted verdict is redacted of."""
    settings = load_settings(data_dir="/nonexistent", env={"WATCHER_NOTIFY": f"{MAIL} {NTFY}"})
    assert {MAIL, NTFY} <= {k.get_secret_value() for k in settings.known_keys}
