"""Which statements PostgreSQL prepares (apps_registry/plans.py, charming/postgres.py): only those the code declares
plan-stable, so no statement whose best plan depends on its values (a find over an app's records) keeps a plan."""

from __future__ import annotations

import pytest
from django.db import connection

from apps_registry.plans import plan_stable
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.routes import route_run
from apps_registry.services.tokens import token_authenticate, token_create

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

USES = 8  # more than the default DATABASE_PREPARE_THRESHOLD (5)
DEFINITION = {
    "format": 1,
    "name": "Plans",
    "collections": {"items": {}},
    "routes": {
        "add": {
            "kind": "mutation",
            "input": {"type": "object"},
            "steps": [{"insert": {"collection": "items", "value": "params"}, "as": "item"}, {"return": "item.id"}],
        },
        "of_kind": {
            "kind": "query",
            "input": {"type": "object"},
            "steps": [
                {"find": {"collection": "items", "where": {"kind": "params.kind"}}, "as": "found"},
                {"return": "size(found)"},
            ],
        },
    },
}


@pytest.fixture(autouse=True)
def _no_statement_prepared_yet():
    """The test connection outlives a test: forget what earlier tests prepared (psycopg forgets it too)."""
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


def _prepared() -> list[str]:
    """The statements this connection has prepared."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_statement_is_prepared_only_when_declared_plan_stable():
    declared = plan_stable("SELECT %s::int + 2 AS declared_sum")
    for n in range(USES):
        with connection.cursor() as cursor:
            cursor.execute(declared, [n])
            cursor.execute("SELECT %s::int + 3 AS undeclared_sum", [n])

    prepared = _prepared()
    assert any("declared_sum" in statement for statement in prepared), prepared
    assert not any("undeclared_sum" in statement for statement in prepared), prepared


def test_a_routes_lookups_and_writes_are_prepared_and_its_find_over_records_never_is(user, settings):
    # Every call takes from the budgets (no batch held ahead), so their statement is used USES times.
    settings.CHARMING_RATE_TOKEN_BATCH = settings.CHARMING_RATE_APP_BATCH = 1
    app = app_definition_save(actor=user, definition=DEFINITION)
    plaintext = token_create(user=user, name="plans").plaintext
    for n in range(USES):
        assert token_authenticate(plaintext=plaintext).user == user
        route_run(actor=user, app_id=app.id, op="add", params={"kind": f"k{n % 2}"}, kind="mutation")
        found = route_run(actor=user, app_id=app.id, op="of_kind", params={"kind": "k1"}, kind="query")
        assert found.value == (n + 1) // 2

    prepared = _prepared()
    on_records = [statement for statement in prepared if "apps_registry_record" in statement]
    # The insert of values is prepared; the find (its plan depends on the app's size and the filter) is not.
    assert [statement.split(" (")[0] for statement in on_records] == ['INSERT INTO "apps_registry_record"'], prepared
    for lookup in ("apps_registry_route", "apps_registry_apitoken", "apps_registry_ratebudget", "records_held"):
        assert any(lookup in statement for statement in prepared), (lookup, prepared)
