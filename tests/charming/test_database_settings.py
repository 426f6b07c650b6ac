"""DATABASES from the environment: Django's psycopg pool on PostgreSQL (sized by DATABASE_POOL_*), none on SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT_DATABASE = (
    "import json; from charming import settings; d = settings.DATABASES['default']; "
    "p = dict(d.get('OPTIONS', {}).get('pool') or {}); c = p.pop('check', None); "
    "print(json.dumps({'pool': p or None, 'health': d.get('CONN_HEALTH_CHECKS', False), "
    "'idle_check': getattr(c, 'idle_seconds', None)}))"
)


PRINT_BINDING = (
    "import json; from charming import settings; o = dict(settings.DATABASES['default'].get('OPTIONS', {})); "
    "o['cursor_factory'] = o['cursor_factory'].__qualname__ if 'cursor_factory' in o else None; "
    "print(json.dumps({k: o[k] for k in ('server_side_binding', 'prepare_threshold', 'options', 'cursor_factory') "
    "if o.get(k) is not None}))"
)


def loaded_with(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`script` run in a fresh process whose environment has only the DATABASE_ variables given."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DATABASE_")}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env={**environment, **env}, capture_output=True, text=True
    )


def settings_with(**env: str) -> subprocess.CompletedProcess[str]:
    return loaded_with(PRINT_DATABASE, **env)


def binding_with(**env: str) -> subprocess.CompletedProcess[str]:
    return loaded_with(PRINT_BINDING, **env)


POSTGRES = "postgres://charming@127.0.0.1:5432/charming"


def test_postgresql_gets_a_health_checked_pool_sized_from_the_environment():
    loaded = settings_with(
        DATABASE_URL=POSTGRES, DATABASE_POOL_MIN_SIZE="1", DATABASE_POOL_MAX_SIZE="7", DATABASE_POOL_TIMEOUT="2.5"
    )

    assert loaded.returncode == 0, loaded.stderr
    # The pool's own check, after an idle spell only (charming.postgres.IdleConnectionCheck), not Django's every time.
    assert json.loads(loaded.stdout) == {
        "pool": {"min_size": 1, "max_size": 7, "timeout": 2.5},
        "health": False,
        "idle_check": 5.0,
    }


def test_the_idle_spell_before_a_pooled_connection_is_checked_is_a_setting():
    loaded = settings_with(DATABASE_URL=POSTGRES, DATABASE_HEALTH_CHECK_IDLE_SECONDS="0.5")

    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["idle_check"] == 0.5

    refused = settings_with(DATABASE_URL=POSTGRES, DATABASE_HEALTH_CHECK_IDLE_SECONDS="-1")
    assert refused.returncode != 0
    assert "DATABASE_HEALTH_CHECK_IDLE_SECONDS must be 0 or more seconds" in refused.stderr


def test_the_pool_can_be_turned_off_and_sqlite_has_none():
    for env in ({"DATABASE_URL": POSTGRES, "DATABASE_POOL": "false"}, {"DATABASE_URL": "sqlite:///var/x.sqlite3"}):
        loaded = settings_with(**env)

        assert loaded.returncode == 0, loaded.stderr
        assert json.loads(loaded.stdout)["pool"] is None


def test_persistent_connections_with_the_pool_stop_the_start_with_what_to_change():
    loaded = settings_with(DATABASE_URL=POSTGRES, DATABASE_CONN_MAX_AGE="60")

    assert loaded.returncode != 0
    assert (
        "DATABASE_CONN_MAX_AGE must be 0 while the connection pool is on (the pool keeps connections open): "
        "unset DATABASE_CONN_MAX_AGE, or set DATABASE_POOL=false"
    ) in loaded.stderr


def test_postgresql_binds_values_server_side_and_prepares_plan_stable_statements_unless_told_off():
    # PlanStableCursor prepares only the statements declared plan-stable (tests/charming/test_postgres_plans.py).
    prepared = {"server_side_binding": True, "prepare_threshold": 5, "cursor_factory": "PlanStableCursor"}
    cases = [
        ({}, prepared),
        ({"DATABASE_PREPARE_THRESHOLD": "1"}, {**prepared, "prepare_threshold": 1}),
        ({"DATABASE_PREPARE_THRESHOLD": " OFF "}, {}),  # client-side binding: PgBouncer in transaction mode
        ({"DATABASE_POOL": "false"}, prepared),
    ]
    for env, expected in cases:
        loaded = binding_with(DATABASE_URL=POSTGRES, **env)

        assert loaded.returncode == 0, loaded.stderr
        assert json.loads(loaded.stdout) == expected, env
    # Options given in the URL are kept.
    given = binding_with(DATABASE_URL=POSTGRES + "?options=-c%20search_path%3Dcharming")
    assert json.loads(given.stdout) == {**prepared, "options": "-c search_path=charming"}
    sqlite = binding_with(DATABASE_URL="sqlite:///var/x.sqlite3")
    assert json.loads(sqlite.stdout) == {}


def test_a_prepare_threshold_that_is_not_a_count_of_at_least_one_stops_the_start_with_what_to_write():
    # 0 would prepare at first use: a round trip of its own, which a statement sent once never earns back.
    for value in ("sometimes", "0", "-3"):
        loaded = binding_with(DATABASE_URL=POSTGRES, DATABASE_PREPARE_THRESHOLD=value)

        assert loaded.returncode != 0
        assert (
            "DATABASE_PREPARE_THRESHOLD must be a whole number of uses of at least 1 (a statement is prepared once "
            f"a connection has sent it that many times) or off, got {value!r}."
        ) in loaded.stderr
