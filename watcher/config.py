"""Configuration: environment, optional ``<data-dir>/config.toml``, CLI options over both.

Precedence (highest first): CLI option, ``WATCHER_*``/``DEVTO_*`` environment variable,
``config.toml`` key (same name, lower case, without ``WATCHER_``), built-in default.
Secrets live only in memory, inside :class:`pydantic.SecretStr`, so a ``repr`` or a JSON dump
of the settings never shows them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from watcher.commands.results import PublicSettings
from watcher.config_values import named_key
from watcher.config_values import refuse_unexpanded as _refuse_unexpanded
from watcher.errors import ConfigError
from watcher.notify.targets import Target, parse_targets
from watcher.paths import Paths as Paths  # noqa: PLC0414 - watcher.config.Paths stays public
from watcher.providers.registry import PROVIDERS, ProviderSpec, provider_spec
from watcher.state.tokens import parse_monthly_tokens
from watcher.util.urls import check_http_url, marked, shown_url, split_credentials

__all__ = ["Paths", "Settings", "load_settings"]  # Paths: watcher.config.Paths stays public

# env name -> config.toml key. The toml key is the env name in lower case without WATCHER_.
_ENV_KEYS = {
    "WATCHER_PROVIDER": "provider",
    "WATCHER_MODEL": "model",
    "WATCHER_BASE_URL": "base_url",
    "WATCHER_API_KEY": "api_key",
    "WATCHER_API_KEY_ENV": "api_key_env",
    "WATCHER_TIMEOUT": "timeout",
    "WATCHER_PARALLEL": "parallel",
    "WATCHER_INCLUDE_OWN_COMMENTS": "include_own_comments",
    "WATCHER_BACKLOG_DAYS": "backlog_days",
    "WATCHER_PRICES": "prices",
    "WATCHER_MONTHLY_TOKENS": "monthly_tokens",
    "DEVTO_USERNAME": "devto_username",
    "DEVTO_API_KEY": "devto_api_key",
    "DEVTO_BASE_URL": "devto_base_url",
    "WATCHER_NOTIFY": "notify",
}

# What `watcher --help` says of each variable (a test checks every one above is here).
SETTINGS_HELP = {
    "WATCHER_DATA_DIR": "data directory (also --data-dir); default the user's data directory "
    "($XDG_DATA_HOME/devto-watcher, else ~/.local/share/devto-watcher; the platform's on others)",
    "WATCHER_PROVIDER": "openai (or any OpenAI-compatible server: Ollama, vLLM, llama.cpp), "
    "anthropic, offline (the built-in heuristic), or agent (the agent you work with gives the "
    "verdicts over MCP claim/submit, no key); required to scan",
    "WATCHER_MODEL": "model name; default "
    + ", ".join(f"{n}: {s.default_model}" for n, s in PROVIDERS.items() if s.needs_key),
    "WATCHER_BASE_URL": "provider base URL (Ollama: http://localhost:11434/v1)",
    "WATCHER_API_KEY": "API key; falls back to OPENAI_API_KEY / ANTHROPIC_API_KEY",
    "WATCHER_API_KEY_ENV": "the variable that holds the API key (e.g. OPENAI_API_KEY): spent "
    "even by the MCP server, which otherwise leaves a key inherited from its client unspent",
    "WATCHER_TIMEOUT": "seconds one model call may take in all (default 60)",
    "WATCHER_PARALLEL": "model calls in flight at once in one run, 1-8 (also --parallel); "
    "default 4 for the providers' own endpoints, 1 when WATCHER_BASE_URL names another server "
    "(a local Ollama answers one request at a time)",
    "WATCHER_INCLUDE_OWN_COMMENTS": "also triage your own comments (default false)",
    "WATCHER_BACKLOG_DAYS": "on an account's first scan, older comments are recorded as baseline "
    "and never sent to the model (default 14; `scan --since DATE` queues them)",
    "WATCHER_PRICES": "dollars per million tokens, for the usage command: model=in/out, "
    "comma-separated (e.g. gpt-6-luna=0.15/0.60)",
    "WATCHER_MONTHLY_TOKENS": "provider tokens a UTC month may spend: a call goes out only if its "
    "worst case (prompt at 4 characters a token + 2048 out) fits in what is left; unset: no limit",
    "DEVTO_USERNAME": "the dev.to account whose articles to watch",
    "DEVTO_API_KEY": "optional: watch /articles/me/published with this key",
    "DEVTO_BASE_URL": "Forem API base (default https://dev.to/api)",
    "WATCHER_NOTIFY": "Apprise URLs, separated by spaces or commas (ntfy://topic, "
    "mailtos://user:pass@smtp.host?to=me@example.com, discord://…): where `cron` and `watch` "
    "send each round's news; secrets, never shown",
}


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    provider: str = "offline"
    model: str = PROVIDERS["offline"].default_model
    # Never with credentials: those are in base_url_auth (see watcher.util.urls).
    base_url: str = ""
    base_url_auth: SecretStr | None = None
    api_key: SecretStr | None = None
    timeout: float = 60.0
    parallel: int = 1
    devto_username: str | None = None
    devto_api_key: SecretStr | None = None
    devto_base_url: str = "https://dev.to/api"
    # Every key the configuration holds, used by this provider or not (WATCHER_API_KEY, each
    # provider's own variable, DEVTO_API_KEY): what an agent's submitted verdict is redacted of,
    # since with provider agent api_key is None although the agent's shell may hold a key.
    known_keys: tuple[SecretStr, ...] = ()
    include_own_comments: bool = False
    backlog_days: int = 14
    prices: str | None = None  # WATCHER_PRICES as given; watcher.commands.usage reads it
    monthly_tokens: int | None = None  # WATCHER_MONTHLY_TOKENS (watcher.pipeline.budget)
    # True when nothing chose a provider and the offline classifier stands in.
    provider_defaulted: bool = False
    # Where the key came from (a variable's name, the config file, the command line), never the
    # key: a client may hand the server a key of its own (SPEC §15.3, §15.4).
    api_key_from: str | None = None
    # The part of data_dir the user chose (Paths.chosen); None: all of it.
    data_dir_chosen: Path | None = None
    # True when nothing named a data dir and the user's data directory stands in (SPEC §15.5).
    data_dir_defaulted: bool = False
    # WATCHER_NOTIFY's Apprise URLs (SPEC §16.1): secrets, each shown as its Target.shown only.
    notify: tuple[Target, ...] = ()
    # The provider variable whose key is left unspent: the MCP server's environment is its
    # client's (Claude Code hands over its own ANTHROPIC_API_KEY), see withhold_inherited_keys.
    api_key_withheld: str | None = None
    # The variable api_key_env names and who named it, set or not (config_values.named_key).
    api_key_env: str | None = None

    @property
    def paths(self) -> Paths:
        return Paths(self.data_dir, self.data_dir_chosen)

    def require_key(self) -> None:
        """Raise :class:`ConfigError` (exit 2) when the provider needs a key and none is set.

        Asked by the commands that call the model (scan, recheck) before any work."""
        spec = provider_spec(self.provider)
        if spec.needs_key and self.api_key is None and self.api_key_withheld:
            raise ConfigError(
                f"the only API key is {self.api_key_withheld}, in the environment the MCP client "
                "started this server with (perhaps the client's own key): to let watcher spend "
                "it, set WATCHER_API_KEY in the server's env (its value, or "
                f"${{{self.api_key_withheld}}}), or api_key_env = "
                f'"{self.api_key_withheld}" or api_key in config.toml'
            )
        if spec.needs_key and self.api_key is None and self.api_key_env:
            raise ConfigError(f"no API key: {self.api_key_env} is not set in this environment")
        if spec.needs_key and (self.api_key is None or not self.api_key.get_secret_value()):
            raise ConfigError(
                f"No API key found for provider {self.provider} — set {spec.key_hint()} "
                "(for a local OpenAI-compatible server without keys, any non-empty value works)"
            )

    @property
    def shown_base_url(self) -> str:
        """The base URL as messages and status show it: ``http://[redacted]@host/v1`` when
        credentials go with it."""
        return (
            marked(self.base_url)
            if self.base_url_auth is not None and self.base_url
            else self.base_url
        )

    def public(self) -> PublicSettings:
        """What ``status`` may show: never a secret, only whether one is set."""
        return PublicSettings(
            data_dir=str(self.data_dir),
            provider=self.provider,
            model=self.model,
            base_url=self.shown_base_url or None,
            api_key_set=self.api_key is not None,
            api_key_from=self.api_key_from
            if self.api_key is not None
            else (self.api_key_withheld and f"{self.api_key_withheld} (withheld: see check)")
            or (self.api_key_env and f"{self.api_key_env}: not set"),
            timeout_s=self.timeout,
            parallel=self.parallel,
            offline=self.provider == "offline",
            provider_defaulted=self.provider_defaulted,
            devto_username=self.devto_username,
            devto_api_key_set=self.devto_api_key is not None,
            devto_base_url=shown_url(self.devto_base_url),
        )


DEMO_DIR = Path("data") / "demo"
# The working directory's ./data, the default data dir of releases before 0.2.0 (CHANGELOG.md): a
# run that finds state there and none in the default says how to move it (SPEC §15.5).
OLD_DEFAULT_DIR = Path("data")
APP_NAME = "devto-watcher"


def default_data_dir() -> Path:
    """The user's data directory for watcher: ``$XDG_DATA_HOME/devto-watcher``, else
    ``~/.local/share/devto-watcher`` on Linux; the platform's own elsewhere (platformdirs). One
    per user, whatever directory a run starts in: a default relative to it would give every working
    directory (cron's ``$HOME``, a checkout, an agent's workspace) a 3-attempt budget of its own."""
    from watcher.util.datadir import home_data_dir

    return home_data_dir(APP_NAME)


def demo_settings(data_dir: Path | str | None = None) -> Settings:
    """The bundled sample's own setup (SPEC §13.4): the offline classifier, in the data dir given
    on the command line or ``./data/demo`` — never ``WATCHER_DATA_DIR``, never the data dir or
    the provider a real account uses, so a sample comment never reaches a paid model."""
    root = Path(data_dir or DEMO_DIR).expanduser().absolute()
    # ./data/demo: data/ and demo/ are the demo's own directories, like inbox/ (Paths.chosen).
    chosen = root if data_dir else Path.cwd()
    return Settings(
        data_dir=root,
        provider="offline",
        model=PROVIDERS["offline"].default_model,
        data_dir_chosen=chosen,
    )


# Offline verdicts for real comments count as done and would never reach the real model once the
# environment is fixed: choosing the heuristic must be explicit (SPEC §13.4). scan, recheck and
# check all refuse with these words.
NO_PROVIDER = (
    "no model provider chosen: set WATCHER_PROVIDER=openai or anthropic (and its API key), "
    "WATCHER_PROVIDER=agent for the agent you work with to give the verdicts over MCP, "
    "or WATCHER_PROVIDER=offline for the built-in heuristic"
)


def data_paths(
    *, data_dir: Path | str | None = None, env: Mapping[str, str] | None = None
) -> Paths:
    """The data dir alone, as :func:`load_settings` resolves it: what a command that must still
    write there when another setting is wrong (``watcher cron``'s memory) can open."""
    env = os.environ if env is None else env
    # Absolute from here on: every message and `status` names the one directory meant, whatever
    # directory a later reader of the output is in (SPEC §13.4).
    given = data_dir or env.get("WATCHER_DATA_DIR")
    if not data_dir:
        _refuse_unexpanded("WATCHER_DATA_DIR", env.get("WATCHER_DATA_DIR"))
    from watcher.util.datadir import named_data_dir

    setting = "--data-dir" if data_dir else "WATCHER_DATA_DIR"
    root = named_data_dir(given, setting) if given else default_data_dir()
    # A data dir the user named is theirs, links and all; in the default, devto-watcher/ is
    # watcher's.
    return Paths(root, root if given else root.parent)


def load_settings(
    *,
    data_dir: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Resolve settings; raise :class:`ConfigError` (exit 2) for anything unusable.

    Reads ``config.toml`` from the data dir if it exists; never creates anything.
    """
    env = os.environ if env is None else env
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    paths = data_paths(data_dir=data_dir, env=env)
    root, chosen, given = paths.root, paths.user_part, bool(data_dir or env.get("WATCHER_DATA_DIR"))
    config_file = paths.config_file
    file_values = _read_config_file(config_file)

    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for env_name, key in _ENV_KEYS.items():
        if key in overrides:
            values[key], origin[key] = overrides[key], "the command line"
        elif env.get(env_name, "") != "":
            values[key], origin[key] = env[env_name], env_name
        elif key in file_values:
            values[key], origin[key] = file_values[key], f"{config_file} ({key})"
        if key in values:
            _refuse_unexpanded(origin[key], values[key])
    return _build(root, values, env, origin, chosen, defaulted=not given)


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    import tomllib  # only when there is a config file to read

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    known = set(_ENV_KEYS.values())
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}"
        )
    return data


def _build(
    root: Path,
    values: dict[str, Any],
    env: Mapping[str, str],
    origin: Mapping[str, str],
    chosen: Path,
    *,
    defaulted: bool,
) -> Settings:
    spec = provider_spec(str(values.get("provider", "offline")).strip().lower())
    provider = spec.name
    # A missing key is not an error here: status, inbox, show, mark and signals never need one
    # (a Codex shell strips *KEY* variables); commands that call the model ask require_key().
    api_key, api_key_from = values.get("api_key"), origin.get("api_key")
    withheld = key_env = None
    if not api_key and "api_key_env" in values:
        api_key, key_env = named_key(values["api_key_env"], origin["api_key_env"], env, _ENV_KEYS)
        api_key_from = key_env
    elif not api_key:
        api_key_from = spec.fallback_key_var(env)
        api_key = spec.fallback_key(env)
        if spec.is_remote and api_key_from:
            _refuse_unexpanded(api_key_from, api_key)
        if _INHERITED_KEYS_WITHHELD and spec.is_remote and api_key:
            withheld, api_key, api_key_from = api_key_from, None, None
    devto_key = values.get("devto_api_key") or None
    for key in ("api_key", "devto_api_key"):
        if key in values and not isinstance(values[key], str):
            raise ConfigError(f"{key} must be a string")
    notify = parse_targets(values["notify"], origin["notify"]) if "notify" in values else ()
    known = [
        values.get("api_key"),
        *(env.get(var) for other in PROVIDERS.values() for var in other.key_env),
        api_key,  # what api_key_env names, too
        devto_key,
        *(target.url.get_secret_value() for target in notify),  # secrets too (SPEC §16.1)
    ]
    base_url, base_url_auth = split_credentials(_base_url(spec, values))
    return Settings(
        data_dir=root,
        provider=provider,
        model=str(values.get("model") or spec.default_model),
        base_url=base_url,
        base_url_auth=SecretStr(base_url_auth) if base_url_auth else None,
        api_key=SecretStr(api_key) if api_key and spec.is_remote else None,
        timeout=_positive_float(values.get("timeout", 60.0)),
        parallel=parse_parallel(values["parallel"])
        if "parallel" in values
        else _default_parallel(spec, base_url),
        devto_username=(str(values["devto_username"]).strip().lstrip("@") or None)
        if "devto_username" in values
        else None,
        devto_api_key=SecretStr(devto_key) if devto_key else None,
        known_keys=tuple(
            SecretStr(key) for key in dict.fromkeys(k for k in known if isinstance(k, str) and k)
        ),
        devto_base_url=check_http_url(
            str(values.get("devto_base_url") or "https://dev.to/api").rstrip("/"), "DEVTO_BASE_URL"
        ),
        include_own_comments=_bool(values.get("include_own_comments", False)),
        backlog_days=_days(values.get("backlog_days", 14)),
        prices=str(values["prices"]) if values.get("prices") else None,
        monthly_tokens=parse_monthly_tokens(values.get("monthly_tokens")),
        provider_defaulted="provider" not in values,
        api_key_from=api_key_from if api_key and spec.is_remote else None,
        data_dir_chosen=chosen,
        data_dir_defaulted=defaulted,
        notify=notify,
        api_key_withheld=withheld,
        api_key_env=key_env if spec.is_remote else None,
    )


# A provider's own key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY) is spent only when the user
# set it for watcher: not in the MCP server, whose environment is its client's (SPEC §15.3).
_INHERITED_KEYS_WITHHELD = False


def withhold_inherited_keys() -> None:
    """From now on this process spends a key only from WATCHER_API_KEY or the config file (the MCP
    server calls it as it starts: bridge/mcp_server.py)."""
    global _INHERITED_KEYS_WITHHELD
    _INHERITED_KEYS_WITHHELD = True


def _base_url(spec: ProviderSpec, values: dict[str, Any]) -> str:
    url = str(values.get("base_url") or spec.default_base_url).rstrip("/")
    return check_http_url(url, "WATCHER_BASE_URL") if spec.is_remote else url


def _positive_float(value: Any) -> float:
    if isinstance(value, bool):  # float(True) is 1.0: `timeout = true` must not mean one second
        raise ConfigError(f"timeout must be a number of seconds, got {value!r} (WATCHER_TIMEOUT)")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"timeout must be a number of seconds, got {value!r} (WATCHER_TIMEOUT)"
        ) from None
    if not 0 < number <= 3600:
        raise ConfigError(
            f"timeout must be between 0 and 3600 seconds, got {number} (WATCHER_TIMEOUT)"
        )
    return number


MAX_PARALLEL = 8
# The providers' own hosted endpoints take concurrent requests; any other server (a local Ollama,
# a llama.cpp) is assumed to answer one at a time, where queued requests would only run into
# their deadline (SPEC §15.1).
HOSTED_PARALLEL = 4


def _default_parallel(spec: ProviderSpec, base_url: str) -> int:
    return (
        HOSTED_PARALLEL if spec.is_remote and base_url == spec.default_base_url.rstrip("/") else 1
    )


def parse_parallel(value: Any) -> int:
    """``--parallel`` / ``WATCHER_PARALLEL`` / ``parallel``: a whole number 1–8, else exit 2."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= MAX_PARALLEL:
        raise ConfigError(
            f"parallel must be a whole number of model calls from 1 to {MAX_PARALLEL}, "
            f"got {value!r} (WATCHER_PARALLEL, --parallel)"
        )
    return int(text)


def _days(value: Any) -> int:
    try:
        days = int(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"WATCHER_BACKLOG_DAYS must be a whole number of days, got {value!r}"
        ) from None
    if not 0 <= days <= 3650:
        raise ConfigError(f"WATCHER_BACKLOG_DAYS must be between 0 and 3650, got {days}")
    return days


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"expected true/false, got {value!r} (WATCHER_INCLUDE_OWN_COMMENTS)")
