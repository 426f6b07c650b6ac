from __future__ import annotations

import functools

import httpcore2
import pytest
from django.db import connection

from tests.factories import StaffFactory, UserFactory

# Rate limits high enough that no test is throttled by another's calls (the live server and the property tests make
# many); tests of the limits set small ones (tests/apps_registry/test_rate_limits.py).
UNTHROTTLED = 1_000_000


def pytest_configure(config):
    """Passwords (people's, and OAuth clients' secrets) are hashed with a fast hasher in tests: the suite hashes
    hundreds, and the served default (PBKDF2 at a million iterations, about 0.4 s each on a 2-core machine) is a
    price for attackers, not for the suite (Django's "Speeding up the tests"). The served hashers stay after it,
    so a hash made the served way still verifies."""
    from django.conf import global_settings, settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
    # Every HTTP client (the tests' own, the SDK client's) builds its TLS context at creation, reading the system's CA
    # bundle: 33 ms a client, for clients that talk plain HTTP to the live servers. One context serves them all.
    httpcore2.default_ssl_context = functools.cache(httpcore2.default_ssl_context)


@pytest.fixture(autouse=True)
def _rate_limits_out_of_the_way(settings):
    from apps_registry.ratelimits import RATE_LIMIT_SETTINGS
    from apps_registry.services.rate_limits import rate_limits_local_forget

    for setting, _default in RATE_LIMIT_SETTINGS:
        setattr(settings, setting, UNTHROTTLED)
    rate_limits_local_forget()  # nothing held from another test's budgets, which its database no longer has


@pytest.fixture
def commit_answer_lost(monkeypatch):
    """The COMMIT of the next mutation that runs its route is carried out by the database, then the connection
    drops before its answer arrives. Armed by the route's run, in its thread: another COMMIT before it (an earlier
    unit's, another thread's, as in a full run of the suite) is left alone."""
    import threading

    from django.db import OperationalError
    from django.db.backends.base.base import BaseDatabaseWrapper

    from apps_registry.services import routes

    original_commit, original_run = BaseDatabaseWrapper._commit, routes._route_run
    armed: list[int] = []  # the thread whose next COMMIT is the mutation's

    def run_then_arm(**kwargs):
        result = original_run(**kwargs)
        if kwargs.get("kind") == "mutation" and not armed:
            armed.append(threading.get_ident())
        return result

    def commit_then_drop(self):
        original_commit(self)
        if armed and armed[0] == threading.get_ident():
            armed[0] = -1  # once
            raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(routes, "_route_run", run_then_arm)
    monkeypatch.setattr(BaseDatabaseWrapper, "_commit", commit_then_drop)


@pytest.fixture
def user(db):
    return UserFactory(username="alice")


@pytest.fixture
def other_user(db):
    return UserFactory(username="bob")


@pytest.fixture
def api(user):
    """The REST API as `user`, with a personal token of all scopes."""
    from rest_framework.test import APIClient

    from apps_registry.services.tokens import token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")
    return client


@pytest.fixture
def staff(db):
    return StaffFactory(username="staffer")


def pytest_ignore_collect(collection_path, config):
    """`-m serial` (make test's second run) collects only the test files that mark a test `serial` (in the file
    itself, as every serial test is): collecting the whole suite to select them took 9 s."""
    if config.getoption("markexpr") != "serial" or not collection_path.name.startswith("test_"):
        return None
    return True if collection_path.suffix == ".py" and "mark.serial" not in collection_path.read_text() else None


def pytest_collection_modifyitems(config, items):
    for item in items:  # pytest_ignore_collect's rule, kept: a test marked elsewhere would never run in make test
        if item.get_closest_marker("serial") and "mark.serial" not in item.path.read_text():
            raise pytest.UsageError(f"{item.nodeid} is marked serial outside its file: mark it in the file itself.")
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (row locks and truly concurrent transactions); set DATABASE_URL")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _sqlite_test_database_skips_fsync():
    """The SQLite test database is a file (settings); a test run need not survive a power cut, so its commits skip
    the fsync the served database makes. Every connection the run opens, live servers' threads included."""
    from django.db.backends.signals import connection_created

    def no_fsync(sender, connection, **kwargs):
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=OFF")

    connection_created.connect(no_fsync, weak=False)
    yield
    connection_created.disconnect(no_fsync)


@pytest.fixture(scope="session", autouse=True)
def _flush_is_cheap():
    """The flush after each test with committed data leaves the same database in a few milliseconds, not 25-90 ms
    (tests/flush.py)."""
    from tests.flush import FlushRows

    flush = FlushRows()
    flush.install()
    yield
    flush.uninstall()
