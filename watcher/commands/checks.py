"""``watcher check``: every free check of a setup in one place (SPEC §13.1), each with its fix.

Nothing here spends an attempt or a token: the provider check is the breaker's probe of the
models endpoint, the dev.to check asks whether the user exists. Nothing is written but a
temporary file in the data dir, to prove it is writable, which is removed at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watcher.commands.results import CheckResult, CheckRow
from watcher.config import NO_PROVIDER, Paths, Settings, load_settings
from watcher.errors import (
    BudgetReached,
    ConfigError,
    ProviderSetup,
    SaveFailed,
    SourceUnavailable,
    WatcherError,
)
from watcher.pipeline.gate import setup_error
from watcher.providers import Provider, make_provider
from watcher.source import check_key, check_user
from watcher.util.urls import shown_url


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    error: WatcherError | None = None  # what the command exits with when this is the first failure

    def row(self) -> CheckRow:
        return CheckRow(name=self.name, ok=self.ok, detail=self.detail, fix=self.fix or None)


def run_checks(
    data_dir: Path | None,
    overrides: dict[str, Any],
    factory: Callable[[Settings], Provider] | None = None,
) -> tuple[CheckResult, WatcherError | None]:
    """Every free check of the setup, in order: the document ``watcher check`` prints, and the error
    the command exits with (the first failed check's), or None when all pass.

    ``factory`` builds the provider to probe in place of :func:`make_provider` (tests)."""
    checks = _each_check(data_dir, overrides, factory)
    failed = [c for c in checks if not c.ok]
    return CheckResult(ok=not failed, checks=[c.row() for c in checks]), failed[
        0
    ].error if failed else None


def _each_check(
    data_dir: Path | None, overrides: dict[str, Any], factory: Callable[[Settings], Provider] | None
) -> list[Check]:
    try:
        settings = load_settings(data_dir=data_dir, overrides=overrides)
    except ConfigError as exc:
        return [Check("config", False, str(exc), "fix the setting it names", exc)]
    if settings.provider_defaulted:
        # scan and recheck refuse this setup (exit 2): check must not pass it, and says so once —
        # the offline classifier it stands in for is no provider the person chose.
        checks = [
            Check(
                "config",
                False,
                NO_PROVIDER,
                "export WATCHER_PROVIDER where watcher runs (cron: the env file)",
                ConfigError(NO_PROVIDER),
            )
        ]
    else:
        checks = [
            Check(
                "config",
                True,
                f"provider {settings.provider}, model {settings.model}; "
                f"data dir {settings.data_dir.resolve()}",
            )
        ]
        checks.append(_key(settings))
        checks.append(
            _provider(settings, factory)
            if checks[-1].ok
            else Check(
                "provider",
                False,
                "not probed: it needs the key first",
                "set the key, then check again",
                ProviderSetup("no API key"),
            )
        )
    if settings.devto_api_key is not None:
        checks.append(_devto_key(settings))
    checks.append(_devto(settings))
    checks.append(_data_dir(settings.data_dir))
    if settings.monthly_tokens is not None:
        checks.append(_monthly_tokens(settings))
    checks.extend(_notify(settings))
    return checks


def _notify(settings: Settings) -> list[Check]:
    """Each WATCHER_NOTIFY target parsed by Apprise, named redacted; nothing sent (SPEC §16.1)."""
    from watcher.notify.check import check_targets

    return [
        Check(row.name, row.ok, row.detail, row.fix, None if row.ok else ConfigError(row.detail))
        for row in check_targets(settings.notify)
    ]


def _key(settings: Settings) -> Check:
    try:
        settings.require_key()
    except ConfigError as exc:
        return Check(
            "api_key",
            False,
            str(exc),
            "export the key in the environment the command runs in "
            "(cron: a private env file; Codex: env_vars in config.toml)",
            exc,
        )
    if settings.api_key is None:
        return Check("api_key", True, f"{settings.provider} needs no key")
    return Check("api_key", True, f"set (never shown), from {settings.api_key_from}")


def _provider(settings: Settings, factory: Callable[[Settings], Provider] | None) -> Check:
    try:
        provider = (factory or make_provider)(settings)
    except ConfigError as exc:
        return Check("provider", False, str(exc), "fix the setting it names", exc)
    try:
        probe = provider.probe()
    finally:
        provider.close()
    where = f"{settings.provider} model {settings.model}" + (
        f" at {settings.shown_base_url}" if settings.base_url else ""
    )
    if probe.ok:
        return Check("provider", True, f"{where}: {probe.message}")
    if probe.kind == "no_models_endpoint":
        # A scan would then spend an attempt to learn what this check cannot see (SPEC §16.3).
        message = f"{where}: {probe.message}"
        return Check(
            "provider",
            False,
            message,
            "set WATCHER_BASE_URL to the server's OpenAI-compatible API (Ollama: "
            "http://localhost:11434/v1)",
            ConfigError(message),
        )
    fix = {
        "unreachable": "start the server, or fix WATCHER_BASE_URL (Ollama: http://localhost:11434/v1)",
        "auth": "check the key and its permissions",
        "model_not_found": "set WATCHER_MODEL to a model the server lists",
    }.get(probe.kind or "", "see the message")
    message = f"{where}: {probe.message}"  # exit 2 or 3 by the breaker's own rule (setup_error)
    return Check("provider", False, message, fix, setup_error(probe.kind or "unreachable", message))


def _devto_key(settings: Settings) -> Check:
    """DEVTO_API_KEY accepted by dev.to (``GET /users/me``): a key pasted into the wrong variable,
    or revoked, fails here instead of at the first scan."""
    try:
        owner = check_key(settings)
    except (ConfigError, SourceUnavailable) as exc:
        return Check(
            "devto_key",
            False,
            str(exc),
            "put the key from https://dev.to/settings/extensions in DEVTO_API_KEY, or unset it",
            exc,
        )
    if owner is None:
        return Check(
            "devto_key",
            True,
            f"set; {shown_url(settings.devto_base_url)} has no /users/me to check it with",
        )
    wanted = settings.devto_username
    if wanted and owner and owner.lower() != wanted.lower():
        message = f"DEVTO_API_KEY is {owner}'s key, but DEVTO_USERNAME is {wanted}"
        return Check(
            "devto_key",
            False,
            message,
            "use the key of the account you watch, or unset DEVTO_API_KEY",
            ConfigError(message),
        )
    return Check("devto_key", True, f"accepted by dev.to ({owner or 'its user'}'s key)")


def _devto(settings: Settings) -> Check:
    if not settings.devto_username:
        if settings.devto_api_key is not None:
            return Check(
                "devto_user", True, "DEVTO_API_KEY set: your own published articles are watched"
            )
        return Check(
            "devto_user",
            False,
            "DEVTO_USERNAME is not set: `watcher scan` has no account to watch",
            "set DEVTO_USERNAME (or pass --source FILE to scan)",
            ConfigError("DEVTO_USERNAME is not set"),
        )
    try:
        check_user(settings)
    except (ConfigError, SourceUnavailable) as exc:
        return Check("devto_user", False, str(exc), "fix the setting it names", exc)
    return Check(
        "devto_user",
        True,
        f"{settings.devto_username} exists on {shown_url(settings.devto_base_url)}",
    )


def _monthly_tokens(settings: Settings) -> Check:
    """WATCHER_MONTHLY_TOKENS against this month's tokens (SPEC §16.4): failed when not even a
    call with an empty prompt would fit (exit 3, as the run would)."""
    from watcher.pipeline.budget import month_used
    from watcher.state.tokens import OUTPUT_CAP, next_month
    from watcher.store.files import FileStore
    from watcher.util.timeutil import utcnow

    budget, month = settings.monthly_tokens or 0, utcnow().strftime("%Y-%m")
    used = month_used(FileStore(settings.paths), month) or 0
    detail = (
        f"{used} of {budget} tokens used in {month}; a call counts up to its prompt at 4 "
        f"characters a token plus {OUTPUT_CAP} out until its usage is recorded"
    )
    if used + OUTPUT_CAP <= budget:
        return Check("monthly_tokens", True, detail)
    error = BudgetReached(used, budget, month, next_month(month))
    return Check("monthly_tokens", False, str(error), "", error)


def _data_dir(root: Path) -> Check:
    from watcher.store.files import FileStore

    existing, exc = FileStore(Paths(root)).writable()
    if exc is not None:
        return Check(
            "data_dir",
            False,
            f"cannot write {existing}: {exc.strerror or exc}",
            "choose a writable --data-dir / WATCHER_DATA_DIR",
            SaveFailed(existing, exc),
        )
    made = (
        ""
        if existing == root
        else f" (does not exist yet; {existing} is writable, so it will be created)"
    )
    return Check("data_dir", True, f"{root.resolve()} is writable{made}")
