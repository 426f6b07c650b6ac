"""The pool's check on PostgreSQL (charming/postgres.py IdleConnectionCheck): a round trip only for a connection that
sat idle, or that the server hung up on; none for a connection in steady use."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from charming.postgres import IdleConnectionCheck

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def raw():
    """A connection of its own (autocommit, as the pool keeps them), with every query it sends counted."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("prepare_threshold", None)
    conn = psycopg.connect(**params, autocommit=True)
    sent: list[str] = []
    execute = conn.execute

    def counted(query, *args, **kwargs):
        sent.append(str(query))
        return execute(query, *args, **kwargs)

    conn.execute = counted  # type: ignore[method-assign]
    conn.sent = sent  # type: ignore[attr-defined]
    yield conn
    conn.close()


def test_a_connection_back_within_the_idle_spell_is_not_checked(raw):
    check = IdleConnectionCheck(idle_seconds=60)
    check(raw)  # first checkout: nothing known about it, checked
    check(raw)
    check(raw)
    assert raw.sent == [""]


def test_a_connection_idle_longer_than_the_setting_is_checked_each_time(raw):
    check = IdleConnectionCheck(idle_seconds=0)
    check(raw)
    check(raw)
    assert raw.sent == ["", ""]


def test_a_connection_the_server_hung_up_on_fails_the_check_however_recent(raw):
    check = IdleConnectionCheck(idle_seconds=60)
    check(raw)
    with connection.cursor() as cursor:  # what a restart does to every pooled connection
        cursor.execute("SELECT pg_terminate_backend(%s)", [raw.info.backend_pid])
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the server's goodbye reaches the socket
        try:
            check(raw)
        except psycopg.OperationalError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the check let a connection the server closed through")
    assert raw.sent == ["", ""]
