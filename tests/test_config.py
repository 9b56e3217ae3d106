"""Configuration (SPEC §3): CLI option > environment > config.toml > default; loud config
errors (exit 2); secrets never in repr, public output or any error message."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher.config import Paths, load_settings
from watcher.errors import EXIT_USAGE, ConfigError, exit_code_for
from watcher.providers import PROVIDERS

SECRET = "sk-THIS-IS-THE-SECRET-1234"


def _toml(data_dir: Path, text: str) -> None:
    Paths(data_dir).config_file.write_text(text, "utf-8")


def test_defaults_are_offline_with_60_s_timeout(data_dir: Path) -> None:
    """Nothing configured: offline provider (flagged as defaulted), 60 s, no key."""
    s = load_settings(data_dir=data_dir, env={})
    assert (s.provider, s.model, s.timeout, s.api_key, s.provider_defaulted) == (
        "offline", PROVIDERS["offline"].default_model, 60.0, None, True)


def test_default_data_dir_is_the_users_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With neither --data-dir nor WATCHER_DATA_DIR, the data dir is the user's data directory
    (SPEC §15.5; here the test's XDG_DATA_HOME), whatever the working directory, held as an absolute
    path so every message names the one directory meant (SPEC §13.4)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert load_settings(env={}).data_dir == tmp_path / "xdg" / "devto-watcher"


def test_every_setting_is_explained_in_the_help() -> None:
    """`watcher --help` lists every environment variable config reads (SETTINGS_HELP is complete)."""
    from watcher.config import _ENV_KEYS, SETTINGS_HELP

    assert set(SETTINGS_HELP) == {*_ENV_KEYS, "WATCHER_DATA_DIR"}


def test_data_dir_argument_beats_watcher_data_dir(tmp_path: Path) -> None:
    """--data-dir wins over WATCHER_DATA_DIR, which wins over ./data."""
    assert load_settings(data_dir=tmp_path / "x", env={"WATCHER_DATA_DIR": str(tmp_path / "y")}).data_dir == (
        tmp_path / "x")
    assert load_settings(env={"WATCHER_DATA_DIR": str(tmp_path / "y")}).data_dir == tmp_path / "y"
    assert load_settings(data_dir=tmp_path / "x", env={}).data_dir == tmp_path / "x"


def test_precedence_option_over_env_over_toml_over_default(data_dir: Path) -> None:
    """Each layer overrides the one below it, key by key; a key no layer sets keeps its default."""
    _toml(data_dir, 'model = "from-toml"\ntimeout = 11\ndevto_username = "toml-user"\n')
    env = {"WATCHER_MODEL": "from-env", "WATCHER_TIMEOUT": "22"}
    s = load_settings(data_dir=data_dir, env=env, overrides={"model": "from-option", "timeout": None})
    assert (s.model, s.timeout, s.devto_username) == ("from-option", 22.0, "toml-user")
    assert (s.provider_defaulted, s.devto_base_url, s.backlog_days) == (True, "https://dev.to/api", 14)


def test_empty_env_var_does_not_hide_config_toml(data_dir: Path) -> None:
    """WATCHER_MODEL='' counts as unset, so config.toml still applies."""
    _toml(data_dir, 'model = "from-toml"\n')
    assert load_settings(data_dir=data_dir, env={"WATCHER_MODEL": ""}).model == "from-toml"


def test_reads_os_environ_by_default(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without env=, the process environment is used (and the autouse fixture's data dir)."""
    monkeypatch.setenv("WATCHER_TIMEOUT", "7")
    s = load_settings()
    assert (s.data_dir, s.timeout) == (data_dir, 7.0)


def test_unknown_toml_key_is_a_config_error(data_dir: Path) -> None:
    """A typo in config.toml is exit 2 naming the key and the known keys."""
    _toml(data_dir, 'modle = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(data_dir=data_dir, env={})
    assert "modle" in str(info.value) and "model" in str(info.value)
    assert exit_code_for(info.value) == EXIT_USAGE


@pytest.mark.parametrize("text", ['model = "x', "model = x", b"\xff\xfe".decode("latin-1")])
def test_invalid_toml_is_a_config_error(data_dir: Path, text: str) -> None:
    """Unparsable or non-UTF-8 config.toml is exit 2 naming the file."""
    Paths(data_dir).config_file.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError, match="config.toml"):
        load_settings(data_dir=data_dir, env={})


def test_missing_config_toml_is_fine_and_nothing_is_created(data_dir: Path) -> None:
    """Loading settings never creates files."""
    load_settings(data_dir=data_dir, env={})
    assert list(data_dir.iterdir()) == []


@pytest.mark.parametrize(("provider", "fallback"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_missing_key_for_real_provider_is_config_error_naming_watcher_api_key(
    data_dir: Path, provider: str, fallback: str
) -> None:
    """openai/anthropic without a key: loading works (read-only commands need none), and asking
    for the key before a model call is exit 2 naming which variables to set."""
    settings = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": provider})
    with pytest.raises(ConfigError) as info:
        settings.require_key()
    assert "WATCHER_API_KEY" in str(info.value) and fallback in str(info.value)
    assert exit_code_for(info.value) == EXIT_USAGE


def test_provider_key_fallbacks_apply_only_to_their_provider(data_dir: Path) -> None:
    """OPENAI_API_KEY serves openai; it does not satisfy anthropic."""
    s = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "openai", "OPENAI_API_KEY": SECRET})
    assert s.api_key is not None and s.api_key.get_secret_value() == SECRET
    with pytest.raises(ConfigError):
        load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "anthropic", "OPENAI_API_KEY": SECRET}).require_key()


def test_watcher_api_key_beats_the_provider_fallback(data_dir: Path) -> None:
    """WATCHER_API_KEY wins over OPENAI_API_KEY."""
    s = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": "mine",
                                              "OPENAI_API_KEY": "generic"})
    assert s.api_key is not None and s.api_key.get_secret_value() == "mine"


def test_offline_provider_holds_no_key(data_dir: Path) -> None:
    """A stray key is not kept when the provider is offline."""
    s = load_settings(data_dir=data_dir, env={"WATCHER_API_KEY": SECRET})
    assert s.api_key is None and s.public().api_key_set is False


def test_unknown_provider_is_a_config_error(data_dir: Path) -> None:
    """WATCHER_PROVIDER must be one of the three."""
    with pytest.raises(ConfigError, match="openai, anthropic, offline"):
        load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "gemini"})


def test_provider_default_model_and_base_url(data_dir: Path) -> None:
    """A real provider gets its sensible default model and base URL (trailing slash trimmed)."""
    s = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "anthropic", "WATCHER_API_KEY": SECRET})
    assert (s.model, s.base_url, s.provider_defaulted) == (
        PROVIDERS["anthropic"].default_model, "https://api.anthropic.com", False)
    s = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": "k",
                                              "WATCHER_BASE_URL": "http://127.0.0.1:8080/v1/"})
    assert s.base_url == "http://127.0.0.1:8080/v1"


def test_secret_never_in_repr_str_or_public(data_dir: Path) -> None:
    """Both keys live only as SecretStr: repr/str/public()/its JSON never show them."""
    env = {"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": SECRET, "DEVTO_API_KEY": SECRET + "-devto"}
    s = load_settings(data_dir=data_dir, env=env)
    public = s.public()
    for text in (repr(s), str(s), public.model_dump_json(), repr(public)):
        assert SECRET not in text
    assert public.api_key_set is True and public.devto_api_key_set is True


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        (f'api_key = "{SECRET}"\nbogus = 1\n', {}),
        (f'api_key = "{SECRET}', {}),
        (f'api_key = "{SECRET}"\n', {"WATCHER_PROVIDER": "openai", "WATCHER_TIMEOUT": "soon"}),
        (f'api_key = "{SECRET}"\n', {"WATCHER_PROVIDER": "nope"}),
        (f'api_key = "{SECRET}"\ninclude_own_comments = "maybe"\n', {"WATCHER_PROVIDER": "openai"}),
        ("api_key = 12345\n", {"WATCHER_PROVIDER": "openai"}),
        (f'devto_api_key = "{SECRET}"\ntimeout = -1\n', {}),
    ],
)
def test_secret_never_in_config_error_messages(data_dir: Path, toml: str, env: dict[str, str]) -> None:
    """Whatever else is wrong, the error message never contains the key."""
    _toml(data_dir, toml)
    with pytest.raises(ConfigError) as info:
        load_settings(data_dir=data_dir, env=env)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert "12345" not in str(info.value)


@pytest.mark.parametrize(("raw", "expected"), [("30", 30.0), ("0.5", 0.5), ("3600", 3600.0)])
def test_watcher_timeout_accepts_positive_seconds(data_dir: Path, raw: str, expected: float) -> None:
    """WATCHER_TIMEOUT is seconds, 0 < t <= 3600."""
    assert load_settings(data_dir=data_dir, env={"WATCHER_TIMEOUT": raw}).timeout == expected


@pytest.mark.parametrize("raw", ["soon", "0", "-5", "3601", "nan", "inf", "1e9"])
def test_watcher_timeout_rejects_nonsense(data_dir: Path, raw: str) -> None:
    """Non-numbers, zero, negatives, NaN/inf and absurd values are exit-2 errors naming WATCHER_TIMEOUT."""
    with pytest.raises(ConfigError, match="WATCHER_TIMEOUT"):
        load_settings(data_dir=data_dir, env={"WATCHER_TIMEOUT": raw})


def test_toml_timeout_true_is_not_one_second(data_dir: Path) -> None:
    """A TOML boolean is not a number of seconds."""
    _toml(data_dir, "timeout = true\n")
    with pytest.raises(ConfigError, match="WATCHER_TIMEOUT"):
        load_settings(data_dir=data_dir, env={})


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("yes", True), ("false", False), ("off", False)])
def test_include_own_comments_parses_booleans(data_dir: Path, raw: str, expected: bool) -> None:
    """WATCHER_INCLUDE_OWN_COMMENTS takes the usual spellings."""
    assert load_settings(data_dir=data_dir, env={"WATCHER_INCLUDE_OWN_COMMENTS": raw}).include_own_comments is expected


def test_paths_lay_out_the_data_dir(tmp_path: Path) -> None:
    """Every file of SPEC §4 at its documented place; building Paths touches nothing."""
    p = Paths(tmp_path / "d")
    rel = {name: getattr(p, name).relative_to(p.root).as_posix() for name in (
        "seen", "provider_state", "observations", "signals_state", "signals_cursor",
        "pipeline_lock_file", "seen_lock_file", "signals_lock_file", "quarantine", "config_file")}
    assert rel == {
        "seen": "seen.json", "provider_state": "provider.json", "observations": "observations.jsonl",
        "signals_state": "signals/state.json", "signals_cursor": "signals/cursor.json",
        "pipeline_lock_file": "locks/pipeline.lock", "seen_lock_file": "locks/seen.lock",
        "signals_lock_file": "locks/signals.lock", "quarantine": "quarantine", "config_file": "config.toml",
    }
    assert p.inbox_file("3bkf").relative_to(p.root).as_posix() == "inbox/3bkf.json"
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(("name", "value"), [
    ("DEVTO_BASE_URL", "localhost:8080/api"), ("DEVTO_BASE_URL", "ftp://dev.to/api"),
    ("DEVTO_BASE_URL", "http://[::1"), ("WATCHER_BASE_URL", "localhost:11434/v1"),
])
def test_base_urls_that_are_not_http_urls_are_config_errors_at_load(tmp_path: Path, name: str, value: str) -> None:
    """A base URL without an http(s) scheme and host is refused before any work (exit 2), naming it."""
    env = {name: value, "WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": "k"}
    with pytest.raises(ConfigError, match=name):
        load_settings(data_dir=tmp_path, env=env)


# ---- unexpanded ${NAME} and where the key came from (SPEC §15.4, §15.3) -----------------------------------


@pytest.mark.parametrize(
    ("env", "setting", "variable"),
    [
        # Claude Code passes an MCP server's "env": {"DEVTO_USERNAME": "${DEVTO_USERNAME}"} on literally
        # when the variable is not set where it runs.
        ({"DEVTO_USERNAME": "${DEVTO_USERNAME}"}, "DEVTO_USERNAME", "DEVTO_USERNAME"),
        ({"WATCHER_PROVIDER": "${WATCHER_PROVIDER}"}, "WATCHER_PROVIDER", "WATCHER_PROVIDER"),
        ({"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": "${OPENAI_KEY}"}, "WATCHER_API_KEY", "OPENAI_KEY"),
        ({"WATCHER_PROVIDER": "openai", "OPENAI_API_KEY": "${OPENAI_API_KEY}"}, "OPENAI_API_KEY", "OPENAI_API_KEY"),
        ({"WATCHER_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY:-}"}, "ANTHROPIC_API_KEY",
         "ANTHROPIC_API_KEY"),
        ({"WATCHER_BASE_URL": "${BASE}/v1", "WATCHER_PROVIDER": "openai"}, "WATCHER_BASE_URL", "BASE"),
        ({"DEVTO_API_KEY": "dev-${DEVTO_TOKEN}"}, "DEVTO_API_KEY", "DEVTO_TOKEN"),
    ],
)
def test_an_unexpanded_reference_is_a_config_error_naming_the_variable(
        data_dir: Path, env: dict[str, str], setting: str, variable: str) -> None:
    """A setting whose value holds `${NAME}` (or `${NAME:-default}`) is exit 2 naming the setting and NAME."""
    with pytest.raises(ConfigError) as info:
        load_settings(data_dir=data_dir, env=env)
    message = str(info.value)
    assert exit_code_for(info.value) == EXIT_USAGE
    assert message.startswith(f"{setting} is the unexpanded text ${{{variable}")
    assert f"set {variable} there" in message


def test_an_unexpanded_data_dir_or_config_file_value_is_refused_too(data_dir: Path) -> None:
    """WATCHER_DATA_DIR="${HOME}/watcher" and a config.toml `devto_username = "${USER}"` are exit 2 too."""
    with pytest.raises(ConfigError, match=r"^WATCHER_DATA_DIR is the unexpanded text \$\{HOME\}"):
        load_settings(env={"WATCHER_DATA_DIR": "${HOME}/watcher"})
    _toml(data_dir, 'devto_username = "${USER}"\n')
    with pytest.raises(ConfigError, match=r"config\.toml \(devto_username\) is the unexpanded text \$\{USER\}"):
        load_settings(data_dir=data_dir, env={})


def test_an_unexpanded_key_in_the_message_is_only_the_reference(data_dir: Path) -> None:
    """A key with a `${…}` inside: the message quotes the reference, never the rest of the key."""
    with pytest.raises(ConfigError) as info:
        load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": SECRET + "${X}"})
    assert "${X}" in str(info.value) and SECRET not in str(info.value)


def test_an_unused_provider_key_may_stay_unexpanded(data_dir: Path) -> None:
    """OPENAI_API_KEY="${OPENAI_API_KEY}" is no setting of an anthropic or agent run: not an error."""
    for provider in ("anthropic", "agent", "offline"):
        s = load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": provider, "OPENAI_API_KEY": "${OPENAI_API_KEY}"})
        assert s.api_key is None


@pytest.mark.parametrize(
    ("env", "toml", "source"),
    [
        ({"WATCHER_PROVIDER": "openai", "WATCHER_API_KEY": SECRET, "OPENAI_API_KEY": "other"}, None, "WATCHER_API_KEY"),
        ({"WATCHER_PROVIDER": "openai", "OPENAI_API_KEY": SECRET}, None, "OPENAI_API_KEY"),
        # What Claude Code hands an MCP server it starts: its own ANTHROPIC_API_KEY.
        ({"WATCHER_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": SECRET}, None, "ANTHROPIC_API_KEY"),
        ({"WATCHER_PROVIDER": "openai"}, f'api_key = "{SECRET}"\n', "config.toml (api_key)"),
    ],
)
def test_public_settings_name_where_the_key_came_from_never_the_key(
        data_dir: Path, env: dict[str, str], toml: str | None, source: str) -> None:
    """public().api_key_from is the variable (or the config file) the key was read from."""
    if toml:
        _toml(data_dir, toml)
    public = load_settings(data_dir=data_dir, env=env).public()
    assert public.api_key_set is True and public.api_key_from is not None and public.api_key_from.endswith(source)
    assert SECRET not in public.model_dump_json()


def test_no_key_no_source(data_dir: Path) -> None:
    """Without a key (or with a provider that takes none) api_key_from is None."""
    assert load_settings(data_dir=data_dir, env={"WATCHER_PROVIDER": "openai"}).public().api_key_from is None
    assert load_settings(data_dir=data_dir, env={"WATCHER_API_KEY": SECRET}).public().api_key_from is None
