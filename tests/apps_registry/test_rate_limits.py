"""Rate limits (apps_registry/ratelimits.py, services/rate_limits.py): the budgets kept in the database, and the
REST API's 429s. The /mcp side is tests/mcp_tools/test_rate_limits.py."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections
from rest_framework.test import APIClient

from apps_registry.access import membership_set
from apps_registry.exceptions import AuthenticationFailed, NotFound, RateLimited
from apps_registry.models import ApiToken, RateBudget, Record
from apps_registry.ratelimits import RATE_LIMITS, current_rate
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.rate_limits import (
    app_budget_take,
    auth_failures_check,
    authentication_throttled,
    client_address_key,
    rate_budget_take,
    token_budget_take,
)
from apps_registry.services.routes import route_run
from apps_registry.services.tokens import token_create
from tests.mcp_tools.test_mutate_app import DEFINITION

NOW = 1_800_000_000.0


def limit(settings, name: str, per_minute: int, burst: int) -> None:
    declared = next(limit for limit in RATE_LIMITS if limit.name == name)
    setattr(settings, declared.per_minute_setting, per_minute)
    setattr(settings, declared.burst_setting, burst)


# --- the budget itself ---


@pytest.mark.django_db
def test_a_budget_admits_its_burst_then_one_call_per_interval(settings):
    limit(settings, "token", per_minute=60, burst=3)  # one call a second after a burst of 3
    rate = current_rate("token")

    assert [rate_budget_take(key="k", rate=rate, now=NOW) for _ in range(3)] == [None, None, None]
    assert rate_budget_take(key="k", rate=rate, now=NOW) == pytest.approx(1.0)
    assert rate_budget_take(key="k", rate=rate, now=NOW + 0.5) == pytest.approx(0.5)
    assert rate_budget_take(key="k", rate=rate, now=NOW + 1.0) is None
    assert rate_budget_take(key="k", rate=rate, now=NOW + 1.0) == pytest.approx(1.0)


@pytest.mark.django_db
def test_refused_calls_take_nothing_and_an_idle_budget_refills_to_its_burst_only(settings):
    limit(settings, "token", per_minute=60, burst=2)
    rate = current_rate("token")
    for _ in range(2):
        assert rate_budget_take(key="k", rate=rate, now=NOW) is None
    for _ in range(50):
        assert rate_budget_take(key="k", rate=rate, now=NOW) is not None

    assert rate_budget_take(key="k", rate=rate, now=NOW + 1) is None  # the 50 refusals did not push it back
    later = NOW + 3600  # an hour idle: the burst again, not 3600 calls
    assert [rate_budget_take(key="k", rate=rate, now=later) for _ in range(3)][2] is not None


@pytest.mark.django_db
def test_budgets_are_separate_per_key(settings):
    limit(settings, "token", per_minute=1, burst=1)
    rate = current_rate("token")

    assert rate_budget_take(key="a", rate=rate, now=NOW) is None
    assert rate_budget_take(key="a", rate=rate, now=NOW) == pytest.approx(60.0)
    assert rate_budget_take(key="b", rate=rate, now=NOW) is None


@pytest.mark.django_db
def test_a_limit_of_zero_per_minute_is_off(settings):
    limit(settings, "token", per_minute=0, burst=1)

    for _ in range(20):
        token_budget_take(key="token:1")
    assert not RateBudget.objects.exists()


@pytest.mark.django_db
def test_the_token_limit_follows_its_settings_and_names_itself(settings):
    limit(settings, "token", per_minute=2, burst=2)
    token_budget_take(key="token:1")
    token_budget_take(key="token:1")

    with pytest.raises(RateLimited) as refused:
        token_budget_take(key="token:1")

    error = refused.value
    assert error.kind == "rate_limited"
    assert error.http_status == 429
    assert error.details == {
        "limit": "token",
        "per_minute": 2,
        "burst": 2,
        "setting": "CHARMING_RATE_TOKEN_PER_MINUTE",
        "retry_after_seconds": error.retry_after_seconds,
    }
    assert 1 <= error.retry_after_seconds <= 30
    assert error.message == (
        "This token made too many requests (its limit: 2 per minute, bursts of 2). Nothing ran; try again in "
        f"{error.retry_after_seconds} seconds."
    )


@pytest.mark.django_db(transaction=True)
def test_two_connections_share_one_budget(settings):
    """Each thread has its own database connection, as each worker process has: the budget is the database's."""
    limit(settings, "token", per_minute=1, burst=2)
    results: list[float | None] = []

    def take() -> None:
        try:
            results.append(rate_budget_take(key="shared", rate=current_rate("token")))
        finally:
            connections.close_all()

    for _ in range(3):
        thread = threading.Thread(target=take)
        thread.start()
        thread.join()

    assert results[:2] == [None, None]
    assert results[2] is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_takes_on_separate_connections_admit_exactly_the_burst(settings):
    limit(settings, "app", per_minute=1, burst=5)
    rate = current_rate("app")
    start = threading.Barrier(16)
    results: list[float | None] = []
    lock = threading.Lock()

    def take() -> None:
        try:
            start.wait()
            outcome = rate_budget_take(key="race", rate=rate)
            with lock:
                results.append(outcome)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=take) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 16
    assert sum(outcome is None for outcome in results) == 5


@pytest.mark.django_db
def test_budgets_whose_time_has_passed_are_swept(settings, monkeypatch):
    from apps_registry.services import rate_limits

    monkeypatch.setattr(rate_limits, "_last_sweep", 0.0)
    limit(settings, "token", per_minute=60, burst=5)
    rate = current_rate("token")
    rate_budget_take(key="idle", rate=rate, now=NOW)  # swept now: the last sweep was long ago
    rate_budget_take(key="idle-too", rate=rate, now=NOW + 30)  # within a minute of that sweep: none

    rate_budget_take(key="busy", rate=rate, now=NOW + 61)

    assert set(RateBudget.objects.values_list("key", flat=True)) == {"busy"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_another_process_draws_on_the_same_budget(settings):
    import os
    import subprocess
    import sys
    from pathlib import Path

    limit(settings, "token", per_minute=1, burst=2)
    for _ in range(2):
        token_budget_take(key="token:42")
    db = connections["default"].settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CHARMING_RATE_TOKEN_PER_MINUTE": "1",
        "CHARMING_RATE_TOKEN_BURST": "2",
        "DJANGO_SETTINGS_MODULE": "charming.settings",
    }
    script = (
        "import django; django.setup()\n"
        "from apps_registry.exceptions import RateLimited\n"
        "from apps_registry.services.rate_limits import token_budget_take\n"
        "try:\n"
        "    token_budget_take(key='token:42')\n"
        "    print('admitted')\n"
        "except RateLimited as error:\n"
        "    print('refused', error.retry_after_seconds)\n"
        "token_budget_take(key='token:43')\n"
        "print('other admitted')\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0].startswith("refused ") and int(lines[0].split()[1]) >= 1
    assert lines[1] == "other admitted"
    assert RateBudget.objects.filter(key="token:43").exists()  # and this process sees what that one wrote


# --- the app budget ---


@pytest.mark.django_db
def test_the_app_budget_counts_its_members_calls_only(settings, user, other_user):
    limit(settings, "app", per_minute=1, burst=2)
    app = app_definition_save(actor=user, definition=DEFINITION)
    for _ in range(10):
        app_budget_take(actor=other_user, app_id=app.id)  # not a member: counts nothing

    app_budget_take(actor=user, app_id=app.id)
    membership_set(actor=user, app=app, user=other_user, role="viewer")
    app_budget_take(actor=other_user, app_id=app.id)
    with pytest.raises(RateLimited) as refused:
        app_budget_take(actor=user, app_id=app.id)

    assert refused.value.details["limit"] == "app"
    assert refused.value.message.startswith(
        "This app had too many calls (its limit, across all its callers: 1 per minute, bursts of 2). Nothing ran;"
    )


@pytest.mark.django_db
def test_a_spent_app_budget_tells_a_non_member_nothing(settings, user, other_user):
    limit(settings, "app", per_minute=1, burst=1)
    app = app_definition_save(actor=user, definition=DEFINITION)
    app_budget_take(actor=user, app_id=app.id)
    with pytest.raises(RateLimited):
        app_budget_take(actor=user, app_id=app.id)

    app_budget_take(actor=other_user, app_id=app.id)  # admitted here: the access rules answer not_found, as for any id

    with pytest.raises(NotFound):
        route_run(actor=other_user, app_id=app.id, op="add_expense", params={}, kind="mutation")


# --- failed authentications per address ---


@pytest.mark.django_db
def test_failed_authentications_block_their_address_and_not_another_and_successes_count_nothing(settings):
    limit(settings, "auth_failures", per_minute=1, burst=3)
    lookups: list[str] = []

    def refused() -> None:
        lookups.append("looked up")
        raise AuthenticationFailed("Unknown token")

    for _ in range(20):
        assert authentication_throttled(address="10.0.0.9", authenticate=lambda: "ok") == "ok"
    for _ in range(3):
        with pytest.raises(AuthenticationFailed):
            authentication_throttled(address="10.0.0.9", authenticate=refused)

    with pytest.raises(RateLimited) as blocked:
        authentication_throttled(address="10.0.0.9", authenticate=refused)
    assert len(lookups) == 3  # the fourth was refused before its lookup
    assert blocked.value.details["limit"] == "auth_failures"
    assert authentication_throttled(address="10.0.0.10", authenticate=lambda: "ok") == "ok"


def test_an_ipv6_address_counts_by_its_64_and_a_mapped_ipv4_as_itself():
    assert (
        client_address_key("2001:db8:1:2::5") == client_address_key("2001:db8:1:2:ffff::1") == "auth:2001:db8:1:2::/64"
    )
    assert client_address_key("2001:db8:1:3::5") != client_address_key("2001:db8:1:2::5")
    assert client_address_key("::ffff:10.1.2.3") == "auth:10.1.2.3"
    assert client_address_key(None) == client_address_key("not an address") == "auth:unknown"


@pytest.mark.django_db
def test_checking_an_address_takes_nothing(settings):
    limit(settings, "auth_failures", per_minute=1, burst=1)
    for _ in range(10):
        auth_failures_check(address="10.0.0.9")
    assert not RateBudget.objects.exists()


# --- REST ---


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=DEFINITION)


def api_for(token: str, address: str = "127.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def add_expense(client: APIClient, app, amount: float = 1.0):
    return client.post(
        f"/api/apps/{app.id}/run/add_expense/", {"params": {"amount": amount, "category": "tea"}}, format="json"
    )


@pytest.mark.django_db
def test_rest_a_spent_token_budget_is_429_with_retry_after_and_nothing_runs(settings, user, budget):
    limit(settings, "token", per_minute=1, burst=2)
    api = api_for(token_create(user=user).plaintext)
    assert add_expense(api, budget).status_code == 200
    assert api.get("/api/apps/").status_code == 200

    refused = add_expense(api, budget)

    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["kind"] == "rate_limited"
    assert error["message"].startswith("This token made too many requests (its limit: 1 per minute, bursts of 2).")
    assert refused["Retry-After"] == str(error["details"]["retry_after_seconds"])
    assert int(refused["Retry-After"]) >= 1
    assert Record.objects.count() == 1


@pytest.mark.django_db
def test_rest_a_spent_app_budget_is_429_rate_limited_for_every_caller_and_nothing_is_written(
    settings, user, other_user, budget
):
    limit(settings, "app", per_minute=1, burst=2)
    membership_set(actor=user, app=budget, user=other_user, role="editor")
    assert add_expense(api_for(token_create(user=user).plaintext), budget).status_code == 200
    assert add_expense(api_for(token_create(user=other_user).plaintext), budget).status_code == 200

    refused = add_expense(api_for(token_create(user=user).plaintext), budget)

    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["kind"] == "rate_limited"
    assert error["details"]["limit"] == "app"
    assert refused["Retry-After"] == str(error["details"]["retry_after_seconds"])
    assert Record.objects.count() == 2
    # Another app of the same owner is not affected.
    other = app_definition_save(actor=user, definition={**DEFINITION, "name": "Other"})
    assert add_expense(api_for(token_create(user=user).plaintext), other).status_code == 200


@pytest.mark.django_db
def test_rest_refused_tokens_block_their_address_before_the_lookup_and_not_another(settings, user):
    limit(settings, "auth_failures", per_minute=1, burst=2)
    for refused_token in ("chm_not-a-real-token", "not-an-oauth-token"):  # both authenticators count
        assert api_for(refused_token, "203.0.113.7").get("/api/apps/").status_code == 401
    good = token_create(user=user)

    blocked = api_for(good.plaintext, "203.0.113.7").get("/api/apps/")

    assert blocked.status_code == 429
    assert blocked.json()["error"]["kind"] == "rate_limited"
    assert blocked.json()["error"]["details"]["limit"] == "auth_failures"
    assert int(blocked["Retry-After"]) >= 1
    assert ApiToken.objects.get(pk=good.token.pk).last_used_at is None  # its token was never looked up
    assert api_for(good.plaintext, "203.0.113.8").get("/api/apps/").status_code == 200


@pytest.mark.django_db
def test_rest_successful_authentications_do_not_count_against_the_address(settings, user):
    limit(settings, "auth_failures", per_minute=1, burst=1)
    token = token_create(user=user).plaintext
    for _ in range(5):
        assert api_for(token, "203.0.113.9").get("/api/apps/").status_code == 200


def test_every_rate_limit_is_in_env_example_and_in_the_operations_docs():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    lines = (root / ".env.example").read_text().splitlines()
    docs = (root / "docs" / "operations.md").read_text().split("\n## Rate limits\n", 1)[1].split("\n## ", 1)[0]
    for declared in RATE_LIMITS:
        for setting, default in (
            (declared.per_minute_setting, declared.per_minute_default),
            (declared.burst_setting, declared.burst_default),
        ):
            assert f"{setting}={default}" in lines, f".env.example lacks {setting}={default}"
            assert f"| `{setting}` | {default} |" in docs, f"docs/operations.md's Rate limits table lacks {setting}"


@pytest.mark.django_db
def test_rest_an_oauth_client_has_one_budget_per_user_whichever_access_token_it_holds(settings, user, other_user):
    from django.test import Client

    from tests.oauth_helpers import register_ok, tokens_for

    limit(settings, "token", per_minute=1, burst=2)
    client_id = register_ok(Client())["client_id"]

    def access_token_for(person) -> str:
        browser = Client()
        browser.force_login(person)
        return tokens_for(browser, client_id, resource="http://127.0.0.1:8000/api/")["access_token"]

    first, second = access_token_for(user), access_token_for(user)
    assert first != second
    assert api_for(first).get("/api/apps/").status_code == 200
    assert api_for(second).get("/api/apps/").status_code == 200

    refused = api_for(first).get("/api/apps/")

    assert refused.status_code == 429
    assert refused.json()["error"]["details"]["limit"] == "token"
    assert api_for(access_token_for(other_user)).get("/api/apps/").status_code == 200  # the same client, another user


@pytest.mark.django_db
def test_a_busy_token_draws_its_budget_in_batches_and_is_admitted_exactly_its_burst(settings):
    from django.test.utils import CaptureQueriesContext

    limit(settings, "token", per_minute=1, burst=40)  # a batch of at most min(8, 40 // 4) calls
    admitted = 0
    with CaptureQueriesContext(connections["default"]) as queries:
        for _ in range(40):
            token_budget_take(key="token:busy")
            admitted += 1
    for _ in range(5):
        with pytest.raises(RateLimited):
            token_budget_take(key="token:busy")

    assert admitted == 40  # batches of 1, 2, 4, 8, 8, 8, 8, then the one call left, taken alone; then refusals
    takes = [q["sql"] for q in queries.captured_queries if "ratebudget" in q["sql"]]
    # 7 batches (39 calls); for the 40th, a batch of 8 refused with its read, then one call alone; a sweep: 11, not 40
    assert len(takes) <= 11, takes
    assert RateBudget.objects.get(key="token:busy").tat == pytest.approx(time.time() + 40 * 60, abs=5)


@pytest.mark.django_db
def test_a_busy_member_draws_the_app_budget_in_batches_and_is_admitted_exactly_its_burst(settings, user):
    from django.test.utils import CaptureQueriesContext

    limit(settings, "app", per_minute=1, burst=40)  # a batch of at most min(8, 40 // 4) runs
    app = app_definition_save(actor=user, definition=DEFINITION)
    admitted = 0
    with CaptureQueriesContext(connections["default"]) as queries:
        for _ in range(40):
            app_budget_take(actor=user, app_id=app.id)
            admitted += 1
    for _ in range(5):
        with pytest.raises(RateLimited):
            app_budget_take(actor=user, app_id=app.id)

    assert admitted == 40
    takes = [q["sql"] for q in queries.captured_queries if "ratebudget" in q["sql"]]
    assert len(takes) <= 11, takes  # batches of 1, 2, 4, 8, 8, 8, 8, then the last run alone: not 40
    assert RateBudget.objects.get(key=f"app:{app.id}").tat == pytest.approx(time.time() + 40 * 60, abs=5)


@pytest.mark.django_db
def test_a_non_member_holds_no_batch_of_an_app_budget_to_spend_once_a_member(settings, user, other_user):
    limit(settings, "app", per_minute=1, burst=40)
    app = app_definition_save(actor=user, definition=DEFINITION)
    for _ in range(20):  # counts nothing, and takes nothing ahead for later
        app_budget_take(actor=other_user, app_id=app.id)
    assert not RateBudget.objects.filter(key=f"app:{app.id}").exists()

    membership_set(actor=user, app=app, user=other_user, role="editor")
    app_budget_take(actor=other_user, app_id=app.id)
    app_budget_take(actor=user, app_id=app.id)

    # Both members' runs were taken from the budget (a batch of 1 each), neither from something held: two intervals.
    assert RateBudget.objects.get(key=f"app:{app.id}").tat == pytest.approx(time.time() + 2 * 60, abs=5)
