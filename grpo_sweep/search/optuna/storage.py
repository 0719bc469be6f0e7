"""Where a study lives: SQLite in the sweep directory by default, Optuna's journal file for shared
filesystems without reliable locks, or any RDB URL (e.g. PostgreSQL) for many nodes."""

from __future__ import annotations

import re
from pathlib import Path

DEFAULT_DB = "optuna.db"
JOURNAL_PREFIX = "journal:"
# where a URL with a password comes from: the environment, so that the saved config holds the interpolation only
ENV_HINT = "hydra.sweeper.storage='${oc.env:OPTUNA_STORAGE}' with the URL in OPTUNA_STORAGE"
_ENV_ONLY = re.compile(r"\$\{oc\.env:(\w+)\}")


def resolve_url(storage: str | None, sweep_dir: Path) -> str:
    """The storage URL in full: ``None`` → SQLite file in the sweep dir; ``journal`` → journal file there."""
    if not storage:
        return f"sqlite:///{(Path(sweep_dir) / DEFAULT_DB).resolve()}"
    if storage == "journal":
        return f"{JOURNAL_PREFIX}{(Path(sweep_dir) / 'optuna.journal').resolve()}"
    return storage


def open_storage(url: str, heartbeat_interval: int | None = None, grace_period: int | None = None):
    """An Optuna storage for ``url``; RDB storages get heartbeats so dead workers' trials are failed. ``url`` may be
    the setting as study.json keeps it, an environment interpolation (``${oc.env:OPTUNA_STORAGE}``)."""
    import optuna

    url = resolved(url)
    if url.startswith(JOURNAL_PREFIX):
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        path = url[len(JOURNAL_PREFIX) :]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats: stable in practice
        return _rdb(url, heartbeat_interval, grace_period)


def _rdb(url: str, heartbeat_interval: int | None, grace_period: int | None):
    import optuna

    return optuna.storages.RDBStorage(
        url,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        # SQLite under several writers: wait for the lock instead of failing at once
        engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None,
    )


def resolved(url: str) -> str:
    """``url`` with its interpolations (``${oc.env:NAME}``) resolved, as Hydra resolves the setting."""
    if "${" not in url:
        return url
    from omegaconf import OmegaConf

    return str(OmegaConf.create({"url": url}).url)


def _parsed(url: str):
    from sqlalchemy.engine import make_url

    return make_url(url)


def shown(url: str) -> str:
    """``url`` as it may be printed or saved: its password masked (``postgresql://u:***@host/db``)."""
    return _parsed(url).render_as_string(hide_password=True) if _password(url) else url


def dashboard_argument(stored: str) -> str:
    """The storage as an argument of ``optuna-dashboard``: the variable a URL came from, not its password."""
    env = _ENV_ONLY.fullmatch(stored)
    return f'"${env.group(1)}"' if env else shown(stored).replace(JOURNAL_PREFIX, "", 1)


def saved(given: str | None, url: str) -> str:
    """What study.json keeps of the storage: the URL in full, or, where it came from the environment, the
    interpolation (the password stays there)."""
    return given if given and "${" in given else url


def check_no_password(given: str | None) -> None:
    """Refuse a password written into ``hydra.sweeper.storage`` (``given``: the setting before interpolation): Hydra
    saves the setting with the study (multirun.yaml, each worker's .hydra/). Raises a one-line ValueError."""
    if given and "${" not in given and _password(given):
        raise ValueError(
            f"hydra.sweeper.storage={shown(given)!r}: a password in the URL would be saved with the "
            f"study's config; give {ENV_HINT}, or the password through the driver (PGPASSWORD, ~/.pgpass)"
        )


def check_storage_url(url: str) -> None:
    """Raise a one-line ValueError when the storage cannot be opened (before anything is submitted); the URL's
    password masked."""
    url = resolved(url)
    try:
        open_storage(url)
    except Exception as exc:  # SQLAlchemy, driver and filesystem errors all land here
        first_line = (str(exc).strip().splitlines() or [""])[0]  # SQLAlchemy appends SQL and a help URL
        if _password(url):
            first_line = first_line.replace(_password(url), "***")
        hint = {
            "ArgumentError": "; use null (SQLite in the study's directory), journal, or an SQLAlchemy URL such as "
            "postgresql+psycopg2://user@host/db",
            "ImportError": " (PostgreSQL: pip install psycopg2-binary; MySQL: pip install pymysql)",
        }.get(type(exc).__name__, "")
        raise ValueError(
            f"hydra.sweeper.storage={shown(url)!r} cannot be opened: {type(exc).__name__}: {first_line}{hint}"
        ) from None


def _password(url: str) -> str | None:
    if url.startswith(JOURNAL_PREFIX) or "://" not in url:
        return None
    try:
        return _parsed(url).password
    except Exception:  # no URL SQLAlchemy reads (check_storage_url names what is wrong with it)
        return None
