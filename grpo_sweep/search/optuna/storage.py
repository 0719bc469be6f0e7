"""Where a study lives: SQLite in the sweep directory by default, Optuna's journal file for shared
filesystems without reliable locks, or any RDB URL (e.g. PostgreSQL) for many nodes."""

from __future__ import annotations

import re
from pathlib import Path

from ...run.redact import credential_in, redact

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
    """``url`` as it may be printed or saved: its password masked (``postgresql://u:***@host/db``), and every other
    secret it carries (``?password=***``, run/redact.py)."""
    return redact(_parsed(url).render_as_string(hide_password=True) if _password(url) else url, [])


def dashboard_argument(stored: str) -> str:
    """The storage as an argument of ``optuna-dashboard``: the variable a URL came from, not its password."""
    env = _ENV_ONLY.fullmatch(stored)
    return f'"${env.group(1)}"' if env else shown(stored).replace(JOURNAL_PREFIX, "", 1)


def saved(given: str | None, url: str) -> str | None:
    """What study.json keeps of the storage: the setting itself where it is the study directory's own file (null,
    journal: read back against the directory the reader is given, so a moved or copied study reads its own), the
    interpolation where the URL came from the environment (the password stays there), else the URL in full."""
    return given if not given or given == "journal" or "${" in given else url


class StudyUnreadable(ValueError):
    """A study whose database cannot be read (missing, damaged, no such study in it); the message names it."""


def study_url(stored: str | None, sweep_dir: Path) -> tuple[str, bool]:
    """The URL a study in ``sweep_dir`` reads (study.json's ``stored``), and whether it is the directory's own file.
    A study.json written before the setting was kept (an absolute path to the sweep's default file) is read as the
    directory's own when the sweep's multirun.yaml says the default was used: never another directory's."""
    if not stored or stored == "journal":
        return resolve_url(stored, sweep_dir), True
    default = {"sqlite:///": DEFAULT_DB, JOURNAL_PREFIX: "optuna.journal"}
    for prefix, name in default.items():
        if stored.startswith(prefix) and Path(stored[len(prefix) :]).name == name:
            setting = _sweep_setting(sweep_dir)
            if setting is None or setting == "journal":
                return resolve_url(setting, sweep_dir), True
    return stored, False


def _sweep_setting(sweep_dir: Path) -> str | None:
    """hydra.sweeper.storage as the sweep's multirun.yaml keeps it ("?" where it keeps none)."""
    from omegaconf import OmegaConf

    try:
        saved_config = OmegaConf.to_container(OmegaConf.load(Path(sweep_dir) / "multirun.yaml"), resolve=False)
        return saved_config["hydra"]["sweeper"]["storage"]
    except Exception:  # no multirun.yaml, or one of another shape: keep the URL study.json recorded
        return "?"


def load_study_read_only(study_name: str, stored: str | None, sweep_dir: Path):
    """``(study, url)``: the study ``study_name`` as ``sweep_dir``'s study.json records its storage (``stored``),
    opened for reading only (an SQLite file is opened read-only: a damaged one is never rewritten, a missing one never
    made). StudyUnreadable, one line naming the database, when it cannot be."""
    import warnings
    from urllib.parse import quote

    import optuna

    url, own = study_url(stored, sweep_dir)
    plain, where = url, shown(resolved(url))
    for prefix in ("sqlite:///", JOURNAL_PREFIX):
        if own and url.startswith(prefix):
            path = Path(url[len(prefix) :])
            where = str(path)
            if not path.is_file():
                what = "is missing" if not path.exists() else "is not a file"
                raise StudyUnreadable(f"{path} {what}: the study's trials are kept there; nothing was written")
    try:
        if own and url.startswith("sqlite:///"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                # SQLite's URI form opens the file read-only (its path percent-encoded: a `?` or `#` in it is no query)
                storage = _rdb(f"sqlite:///file:{quote(url[len('sqlite:///') :])}?mode=ro&uri=true", None, None)
        else:
            storage = open_storage(url)
        return optuna.load_study(study_name=study_name, storage=storage), plain
    except KeyError:
        raise StudyUnreadable(f"{where} holds no study {study_name!r}; nothing was written") from None
    except Exception as exc:  # SQLAlchemy's and the driver's: a damaged file, a server that is down
        first_line = (str(exc).strip().splitlines() or [""])[0]
        if _password(resolved(plain)):
            first_line = first_line.replace(_password(resolved(plain)), "***")
        raise StudyUnreadable(
            f"{where} cannot be read as study {study_name!r}'s Optuna database: {type(exc).__name__}: {first_line}; "
            "nothing was written"
        ) from None


def check_no_password(given: str | None) -> None:
    """Refuse a password written into ``hydra.sweeper.storage`` (``given``: the setting before interpolation): Hydra
    saves the setting with the study (multirun.yaml, each worker's .hydra/). Raises a one-line ValueError."""
    if not given:
        return
    if "${" in given:
        # the interpolations stay unresolved in what is saved; what is typed around them is saved as it is
        typed = re.sub(r"\$\{[^}]*\}", "", given)
        what = credential_in(typed) and "a secret"
    else:
        # SQLAlchemy's word for the password (p%40ss decoded), the redactor's for the rest (?password=, ?sslpassword=)
        what = "a password" if _password(given) else "a secret" if credential_in(given) else None
    if what:
        raise ValueError(
            f"hydra.sweeper.storage={shown(given)!r}: {what} in the URL would be saved with the "
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
        first_line = redact(first_line, [])
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
