"""Where a study lives: SQLite in the sweep directory by default, Optuna's journal file for shared
filesystems without reliable locks, or any RDB URL (e.g. PostgreSQL) for many nodes."""
from __future__ import annotations

from pathlib import Path

DEFAULT_DB = "optuna.db"
JOURNAL_PREFIX = "journal:"


def resolve_url(storage: str | None, sweep_dir: Path) -> str:
    """The storage URL in full: ``None`` → SQLite file in the sweep dir; ``journal`` → journal file there."""
    if not storage:
        return f"sqlite:///{(Path(sweep_dir) / DEFAULT_DB).resolve()}"
    if storage == "journal":
        return f"{JOURNAL_PREFIX}{(Path(sweep_dir) / 'optuna.journal').resolve()}"
    return storage


def open_storage(url: str, heartbeat_interval: int | None = None, grace_period: int | None = None):
    """An Optuna storage for ``url``; RDB storages get heartbeats so dead workers' trials are failed."""
    import optuna

    if url.startswith(JOURNAL_PREFIX):
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        path = url[len(JOURNAL_PREFIX):]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
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


def check_storage_url(url: str) -> None:
    """Raise a one-line ValueError when the storage cannot be opened (before anything is submitted)."""
    try:
        open_storage(url)
    except Exception as exc:  # SQLAlchemy, driver and filesystem errors all land here
        first_line = (str(exc).strip().splitlines() or [""])[0]  # SQLAlchemy appends SQL and a help URL
        raise ValueError(f"hydra.sweeper.storage={url!r} cannot be opened: {type(exc).__name__}: {first_line}") from None
