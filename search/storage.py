"""The Optuna storage of ``search.tune``: URL parsing, credential masking, heartbeats, stale trials.

* :func:`parse_storage` reads ``--storage`` with SQLAlchemy's URL parser, so a SQLite URL's query is
  honoured (``sqlite:///q.db?timeout=5`` is the file ``q.db`` with a 5 s lock timeout, never a file
  named ``q.db?timeout=5``) and an unknown SQLite option is refused by name before anything is created.
* :func:`mask` / :func:`mask_text`: what is printed, logged or written to a file carries the URL with its
  password replaced by ``***`` (``URL.render_as_string(hide_password=True)``).
* :func:`make_storage` turns on Optuna's trial heartbeat: each worker records a heartbeat for the trials
  it holds (:class:`Heartbeat`), and :func:`expire_stale` marks FAIL every RUNNING trial whose worker
  stopped beating for ``grace_s`` seconds (``optuna.storages.fail_stale_trials``), so a killed worker
  never leaves a trial RUNNING forever.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from dataclasses import dataclass, field

# sqlite3.connect keyword arguments a sqlite:/// URL's query may set (value parsers).
SQLITE_QUERY = {"timeout": float, "detect_types": int, "cached_statements": int}
DEFAULT_SQLITE_TIMEOUT_S = 60.0
# Seconds without a heartbeat after which a RUNNING trial is failed (--stale-after default).
DEFAULT_STALE_AFTER_S = 120
# A RUNNING trial started this long ago is failed whatever its heartbeat says: no step of a trial takes an
# hour (the GPU worker's timeouts are minutes), and trials written without heartbeats (an older tiledsl, or
# a worker killed between ask and its first beat) expire this way.
CLAIM_TIMEOUT_S = 3600.0

_CRED = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]*)@")


class StorageURLError(ValueError):
    """``--storage`` is not a URL this tuner can open (the message never holds the password)."""


@dataclass(frozen=True)
class StorageURL:
    """A parsed ``--storage`` URL.

    Attributes:
        url: the URL as given (may hold a password: never print it, print :attr:`masked`).
        masked: the URL with its password replaced by ``***``.
        sqlite_path: the SQLite file (None for another database or ``sqlite:///:memory:``).
        sqlite_kwargs: ``sqlite3.connect`` keyword arguments from the URL's query.
    """

    url: str
    masked: str
    sqlite_path: str | None = None
    sqlite_kwargs: dict = field(default_factory=dict)


def mask(url: str) -> str:
    """``url`` with any password replaced by ``***`` (SQLAlchemy's rendering; a regex when it does not parse)."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return mask_text(url)


def mask_text(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it replaced by ``***``."""
    return _CRED.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


def parse_storage(url: str) -> StorageURL:
    """Parse ``--storage``.

    Raises:
        StorageURLError: not an SQLAlchemy URL, or a SQLite query option that is unknown or of the wrong
            type (the message names it and lists the known ones).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        u = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StorageURLError(f"not a database URL ({mask_text(str(exc))}); e.g. sqlite:///tune.db or "
                              "postgresql://user@host/db") from None
    masked = u.render_as_string(hide_password=True)
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:"):
        return StorageURL(url, masked)
    kwargs: dict = {"timeout": DEFAULT_SQLITE_TIMEOUT_S}
    for k, v in u.query.items():
        if k not in SQLITE_QUERY:
            raise StorageURLError(f"SQLite option {k!r} in the URL's query is not supported; supported: "
                                  f"{', '.join(SQLITE_QUERY)}")
        text = v[-1] if isinstance(v, tuple) else v
        try:
            kwargs[k] = SQLITE_QUERY[k](text)
        except ValueError:
            raise StorageURLError(f"SQLite option {k}={text!r} is not a {SQLITE_QUERY[k].__name__}") from None
        if k == "timeout" and not (math.isfinite(kwargs[k]) and kwargs[k] >= 0):
            raise StorageURLError(f"SQLite option timeout={text!r} must be a finite number of seconds ≥ 0")
    return StorageURL(url, masked, u.database, kwargs)


def make_storage(url: str, stale_after_s: int = DEFAULT_STALE_AFTER_S):
    """Optuna's RDB storage for ``url`` with trial heartbeats; SQLite files get WAL, synchronous=NORMAL.

    Optuna commits every parameter and attribute separately; with SQLite's default rollback journal
    each commit waits for an fsync (milliseconds). WAL with synchronous=NORMAL keeps the file
    consistent after a crash of the process (the last commits may be lost on power failure) and
    lets several worker processes read while one writes. Other URLs (PostgreSQL, MySQL) are passed
    to Optuna unchanged.

    Args:
        url: the ``--storage`` URL.
        stale_after_s: a RUNNING trial without a heartbeat for this many seconds is failed by
            :func:`expire_stale` (heartbeats every ``stale_after_s / 4`` s, at least 1 s).

    Raises:
        StorageURLError: see :func:`parse_storage`.
    """
    import optuna

    parsed = parse_storage(url)
    kwargs: dict = {"heartbeat_interval": heartbeat_interval(stale_after_s), "grace_period": int(stale_after_s)}
    if parsed.sqlite_path is not None:
        import sqlite3

        def connect():
            # isolation_level=None: pysqlite issues no BEGIN of its own; SQLAlchemy's "begin" event below does
            conn = sqlite3.connect(parsed.sqlite_path, check_same_thread=False, isolation_level=None,
                                   **parsed.sqlite_kwargs)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            return conn

        kwargs["engine_kwargs"] = {"creator": connect}
    import warnings

    # the tuner drives ask/tell itself and beats with Heartbeat (below), which Optuna cannot see
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    for attempt in range(5):  # workers started together race to create the schema: the loser retries
        try:
            with warnings.catch_warnings():  # heartbeat_interval / grace_period are marked experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = optuna.storages.RDBStorage(url, **kwargs)
            if parsed.sqlite_path is not None:
                _immediate_transactions(storage.engine)
            return storage
        except Exception as exc:  # sqlalchemy IntegrityError / OperationalError of the race only
            race = type(exc).__name__ == "IntegrityError" or (
                type(exc).__name__ == "OperationalError" and any(w in str(exc) for w in ("locked", "already exists")))
            if attempt == 4 or "sqlalchemy" not in type(exc).__module__ or not race:
                raise
            time.sleep(0.2 + random.random())
    raise AssertionError("unreachable")


def _immediate_transactions(engine) -> None:
    """Every transaction on ``engine`` starts with ``BEGIN IMMEDIATE`` (SQLite's write lock, taken up front).

    Optuna reads a row "for update" before changing it (e.g. popping an enqueued WAITING trial to RUNNING);
    SQLite has no ``SELECT ... FOR UPDATE``, and pysqlite's deferred transactions let two workers both read
    WAITING and both take the same trial. With the lock taken at BEGIN the read and the write are one
    atomic step; other workers wait (the URL's ``timeout``) instead. SQLAlchemy's documented pysqlite recipe.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def heartbeat_interval(stale_after_s: float) -> int:
    """Seconds between heartbeats for a grace period of ``stale_after_s`` (a quarter of it, at least 1)."""
    return max(1, int(stale_after_s) // 4)


# pip packages of the SQLAlchemy database drivers (DBAPI modules) an Optuna storage URL may name
DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]", "pg8000": "pg8000",
                   "asyncpg": "asyncpg", "MySQLdb": "mysqlclient", "pymysql": "PyMySQL",
                   "mysql.connector": "mysql-connector-python", "cx_Oracle": "cx_Oracle", "oracledb": "oracledb",
                   "pyodbc": "pyodbc", "pymssql": "pymssql"}


def driver_problem(url: str) -> str | None:
    """The missing database driver of storage ``url``, named with the ``pip install`` that provides it
    (``postgresql://`` without psycopg2 → ``pip install psycopg2-binary``), or None."""
    try:
        from sqlalchemy.engine import make_url

        dialect = make_url(url).get_dialect()
    except Exception:  # not a URL SQLAlchemy knows: make_storage reports it
        return None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = getattr(exc, "name", None) or ""
        pkg = DRIVER_PACKAGES.get(module) or DRIVER_PACKAGES.get(module.split(".")[0]) or module or "its driver"
        text = (f"the database driver of {make_url(url).drivername!r} is not installed (no module "
                f"{module!r}): pip install '{pkg}'")
        if module == "psycopg":  # SQLAlchemy 2.1's default PostgreSQL driver; psycopg2 needs its own spelling
            text += " (or, with psycopg2: pip install psycopg2-binary and write postgresql+psycopg2://...)"
        return text
    return None


def storage_problem(url: str) -> str | None:
    """Why the Optuna storage ``url`` cannot be opened (one line, password masked), or None when it opens.

    Opens it (creating the SQLite file and Optuna's tables when missing, as the run would) and closes it.
    """
    import os

    try:
        parsed = parse_storage(url)
    except StorageURLError as exc:
        return str(exc)
    if parsed.sqlite_path is not None:
        folder = os.path.dirname(os.path.abspath(parsed.sqlite_path))
        if not os.path.isdir(folder):
            return f"the folder {folder} of the SQLite file does not exist"
        if os.path.isdir(parsed.sqlite_path):
            return f"{parsed.sqlite_path} is a folder, not a SQLite file"
    why = driver_problem(url)
    if why is not None:
        return why
    try:
        st = make_storage(url)
    except Exception as exc:
        return storage_failure(exc).replace(url, parsed.masked)
    engine = getattr(st, "engine", None)
    if engine is not None:
        engine.dispose()
    return None


def storage_failure(exc: BaseException) -> str:
    """One line saying why a storage call failed: the database driver's own words (``database is locked``,
    ``database disk image is malformed``) from the innermost exception Optuna wrapped, password masked."""
    inner = exc
    seen = set()
    while (inner.__cause__ or inner.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        inner = inner.__cause__ or inner.__context__
    orig = getattr(inner, "orig", None)  # a SQLAlchemy error wraps the driver's
    text = str(orig if orig is not None else inner)
    text = " ".join(text.split("(Background on this error")[0].split("[SQL:")[0].split()) or type(inner).__name__
    return mask_text(text)


def expire_stale(study, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> list[int]:
    """Fail the RUNNING trials of ``study`` whose worker is gone; returns the numbers failed here.

    * a heartbeat older than the storage's grace period: ``optuna.storages.fail_stale_trials``;
    * no ``claim`` yet and started more than ``stale_after_s`` ago: the worker died between ``ask`` and its
      first steps (a live worker claims its trial, after its first heartbeat, within milliseconds);
    * started more than :data:`CLAIM_TIMEOUT_S` ago, whatever else (trials of workers without heartbeats).
    """
    import datetime as dt
    import warnings

    import optuna
    from optuna.trial import TrialState

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    old = []
    now = dt.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        age = (now - t.datetime_start).total_seconds() if t.datetime_start is not None else 0.0
        if age > CLAIM_TIMEOUT_S or ("claim" not in t.user_attrs and age > stale_after_s):
            try:
                study.tell(t.number, state=TrialState.FAIL)
                old.append(t.number)
            except Exception:  # another worker expired or finished it first
                pass
    return old


class Heartbeat:
    """A daemon thread recording Optuna heartbeats for the trials this process holds RUNNING.

    ``hold(trial)`` when a trial is asked, ``release(trial)`` when it is told; :meth:`stop` at the end.
    """

    def __init__(self, storage, interval_s: float) -> None:
        self.storage = storage
        self.interval_s = interval_s
        self._trials: dict[int, object] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tiledsl-heartbeat", daemon=True)
        self._thread.start()

    def hold(self, trial) -> None:
        """Beat for ``trial`` (an ``optuna.Trial`` just asked) until :meth:`release`."""
        with self._lock:
            self._trials[trial._trial_id] = trial
        self._beat([trial._trial_id])

    def release(self, trial) -> None:
        """Stop beating for ``trial`` (it was told)."""
        with self._lock:
            self._trials.pop(trial._trial_id, None)

    def held(self) -> list:
        """The trials asked and not yet released."""
        with self._lock:
            return list(self._trials.values())

    def _beat(self, ids) -> None:
        for tid in ids:
            try:
                self.storage.record_heartbeat(tid)
            except Exception:  # a storage hiccup: the next beat tries again
                pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                ids = list(self._trials)
            self._beat(ids)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
