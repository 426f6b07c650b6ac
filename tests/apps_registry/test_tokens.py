from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps_registry.exceptions import NotFound
from apps_registry.models import ApiToken
from apps_registry.services.tokens import token_create, token_hash, token_revoke, token_revoke_own
from tests.factories import UserFactory, make_app

pytestmark = pytest.mark.django_db


def get_apps(token: str | None = None, header: str | None = None):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    elif token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/apps/")


def test_token_is_stored_only_as_a_hash(user):
    issued = token_create(user=user, name="laptop")
    row = ApiToken.objects.get(pk=issued.token.pk)
    assert row.secret_hash == token_hash(issued.plaintext)
    assert issued.plaintext.startswith(row.prefix)
    assert issued.plaintext not in {getattr(row, f.attname) for f in ApiToken._meta.concrete_fields}


def test_valid_token_authenticates_and_records_last_use(user):
    app = make_app(owner=user, name="Budget")
    issued = token_create(user=user)
    response = get_apps(issued.plaintext)
    assert response.status_code == 200
    assert response.json()["value"] == [{"id": str(app.id), "name": "Budget", "description": "", "role": "owner"}]
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at is not None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "Missing token"),
        ("Bearer chm_nope_nope", "Unknown token"),
        ("Basic dXNlcjpwYXNz", "Malformed Authorization header"),
    ],
)
def test_missing_unknown_or_malformed_token_gets_401_saying_which(db, header, message):
    response = get_apps(header=header)
    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith(message)
    assert response["WWW-Authenticate"].startswith("Bearer")
    if header:
        assert header.split(" ", 1)[1] not in response.content.decode()


def test_expired_token_gets_401_saying_expired(user):
    issued = token_create(user=user, expires_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = get_apps(issued.plaintext)
    assert response.status_code == 401
    body = response.content.decode()
    assert "Expired token" in body and issued.plaintext not in body


def test_revoked_token_gets_401_saying_revoked(user):
    issued = token_create(user=user)
    token_revoke(token=issued.token)
    response = get_apps(issued.plaintext)
    assert response.status_code == 401
    assert "Revoked token" in response.json()["error"]["message"]


def test_create_token_command_prints_the_token_once(user, capsys):
    call_command("create_token", "alice", "--name", "ci", "--expires-days", "7")
    out, err = capsys.readouterr()
    plaintext = out.strip()
    token = ApiToken.objects.get(secret_hash=token_hash(plaintext))
    assert token.name == "ci" and token.expires_at is not None
    assert token.scopes == "apps:read apps:write apps:delete"  # every scope by default
    assert token.prefix in err and plaintext not in err
    assert "scopes apps:read apps:write apps:delete" in err


def test_create_token_command_takes_repeatable_scopes(user, capsys):
    call_command("create_token", "alice", "--scope", "apps:write", "--scope", "apps:read")
    out, err = capsys.readouterr()
    token = ApiToken.objects.get(secret_hash=token_hash(out.strip()))
    assert token.scopes == "apps:read apps:write"
    assert "scopes apps:read apps:write)" in err


def test_create_token_command_rejects_an_unknown_scope_quoting_it(user):
    with pytest.raises(CommandError) as exc:
        call_command("create_token", "alice", "--scope", "apps:read", "--scope", "apps:admin")
    assert str(exc.value) == "Unknown scope 'apps:admin': choose from apps:read, apps:write, apps:delete."
    assert not ApiToken.objects.exists()


def test_token_create_refuses_unknown_or_no_scopes(user):
    from apps_registry.exceptions import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        token_create(user=user, scopes=["apps:read", "admin"])
    assert exc.value.message == "Unknown scope 'admin': a token's scopes are apps:read, apps:write, apps:delete."
    with pytest.raises(InvalidInput) as exc:
        token_create(user=user, scopes=[])
    assert exc.value.message == "A token needs at least one scope: apps:read, apps:write, apps:delete."


@pytest.mark.parametrize(
    ("path", "method", "body", "scope"),
    [
        ("/api/apps/{app}/run/add/", "post", {"params": {}}, "apps:write"),
        ("/api/apps/{app}/run/add/", "post", {"params": {}, "kind": "mutation"}, "apps:write"),
        ("/api/apps/{app}/feedback/", "post", {"body": "hi"}, "apps:write"),
        ("/api/apps/{app}/definition/", "get", None, "apps:write"),
        ("/api/apps/{app}/definition/", "delete", None, "apps:write"),
        ("/api/apps/definitions/", "post", {"name": "X", "routes": {}}, "apps:write"),
    ],
)
def test_a_read_only_token_is_refused_every_write_on_rest_naming_the_scope(user, path, method, body, scope):
    app = make_app(owner=user, name="Budget")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, scopes=['apps:read']).plaintext}")

    response = getattr(api, method)(path.format(app=app.id), body, format="json")

    assert response.status_code == 403
    assert response.json()["error"] == {
        "kind": "insufficient_scope",
        "message": (
            f"This token does not carry the {scope} scope (add, change and remove data in your apps, create or edit "
            f"apps, and share them), which this needs. Connect again granting {scope}, or use a token that has it."
        ),
        "details": {"scope": scope},
    }
    assert response["WWW-Authenticate"] == f'Bearer realm="charming", error="insufficient_scope", scope="{scope}"'
    assert not app.feedback.exists() and app.routes.count() == 0


def test_a_read_only_token_lists_queries_and_reads_its_feedback_on_rest(user):
    app = make_app(owner=user, name="Budget")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, scopes=['apps:read']).plaintext}")

    assert api.get("/api/apps/").status_code == 200
    assert api.get(f"/api/apps/{app.id}/feedback/").status_code == 200
    query = api.post(f"/api/apps/{app.id}/run/nothing/", {"kind": "query"}, format="json")
    assert query.status_code == 404 and query.json()["error"]["kind"] == "unknown_op"  # past the scope check


def test_a_write_only_token_cannot_list_on_rest(user):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, scopes=['apps:write']).plaintext}")
    response = api.get("/api/apps/")
    assert response.status_code == 403 and response.json()["error"]["details"] == {"scope": "apps:read"}


def test_every_rest_view_declares_the_need_of_each_of_its_methods():
    from django.urls import URLPattern, get_resolver

    from apps_registry.access import NEEDS
    from apps_registry.api.permissions import view_need

    checked = 0
    for pattern in get_resolver("apps_registry.api.urls").url_patterns:
        assert isinstance(pattern, URLPattern)
        view = pattern.callback.view_class
        if hasattr(view, "need_for"):
            checked += 1
            continue
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(view, method):
                request = type("R", (), {"method": method.upper()})()
                assert view_need(request, view()) in NEEDS
                checked += 1
    assert checked >= 5


def test_create_token_command_rejects_unknown_user_and_bad_expiry(user):
    with pytest.raises(CommandError, match="No user named 'zed'"):
        call_command("create_token", "zed")
    with pytest.raises(CommandError, match="--expires-days must be a positive number of days, got 0"):
        call_command("create_token", "alice", "--expires-days", "0")


@pytest.mark.parametrize("days", [0, -3])
def test_a_token_lifetime_that_is_not_positive_is_invalid_input(user, days):
    from apps_registry.exceptions import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        token_create(user=user, expires_days=days)
    assert exc.value.message == f"A token's lifetime must be a positive number of days, got {days}."
    assert not ApiToken.objects.exists()


def test_without_a_credential_the_bearer_authenticator_steps_aside_for_the_next_one(user, client, monkeypatch):
    from rest_framework.authentication import SessionAuthentication
    from rest_framework.test import APIRequestFactory

    from apps_registry.api.apps import AppListView
    from apps_registry.authentication import BearerTokenAuthentication

    assert BearerTokenAuthentication().authenticate(APIRequestFactory().get("/api/apps/")) is None
    monkeypatch.setattr(AppListView, "authentication_classes", [BearerTokenAuthentication, SessionAuthentication])
    make_app(owner=user, name="Budget")
    client.force_login(user)

    response = client.get("/api/apps/")

    assert response.status_code == 200
    assert [a["name"] for a in response.json()["value"]] == ["Budget"]


def test_with_nothing_authenticated_the_api_answers_401_saying_the_token_is_missing(db):
    response = get_apps()
    assert response.status_code == 401
    assert response.json() == {
        "ok": False,
        "error": {
            "kind": "unauthenticated",
            "message": "Missing token: send the header 'Authorization: Bearer <token>'.",
        },
    }
    assert response["WWW-Authenticate"] == 'Bearer realm="charming"'


def test_token_revoke_own_revokes_the_actors_token():
    alice = UserFactory(username="alice")
    issued = token_create(user=alice, name="laptop")
    assert token_revoke_own(actor=alice, token_id=issued.token.pk).revoked


def test_token_revoke_own_reports_another_users_token_like_a_missing_one():
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    issued = token_create(user=alice, name="laptop")
    with pytest.raises(NotFound) as theirs:
        token_revoke_own(actor=bob, token_id=issued.token.pk)
    with pytest.raises(NotFound) as missing:
        token_revoke_own(actor=bob, token_id=999999)
    assert theirs.value.message == f"No token with id {issued.token.pk} exists."
    assert missing.value.message == "No token with id 999999 exists."
    issued.token.refresh_from_db()
    assert not issued.token.revoked


@pytest.mark.django_db(transaction=True)
def test_tokens_issued_before_scopes_existed_keep_all_three():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("apps_registry", "0009_idempotent_results")], [("apps_registry", "0010_token_scopes")]
    executor = MigrationExecutor(connection)
    old_apps = executor.loader.project_state(before).apps
    executor.migrate(before)
    try:
        user = old_apps.get_model("auth", "User").objects.create(username="old")
        old_apps.get_model("apps_registry", "ApiToken").objects.create(
            user=user, prefix="chm_old", secret_hash="x" * 64
        )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert ApiToken.objects.get(prefix="chm_old").scope_set == {"apps:read", "apps:write", "apps:delete"}


def test_token_lookup_is_one_unordered_query_and_writes_last_use_once_a_minute(user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps_registry.services.tokens import token_authenticate

    issued = token_create(user=user)
    with CaptureQueriesContext(connection) as first:
        token = token_authenticate(plaintext=issued.plaintext)
    assert token.user == user
    selects = [q["sql"] for q in first.captured_queries if q["sql"].startswith("SELECT")]
    updates = [q["sql"] for q in first.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(selects) == 1 and "ORDER BY" not in selects[0] and "JOIN" in selects[0]  # the user with it
    assert len(updates) == 1 and "last_used_at" in updates[0].split("WHERE", 1)[1]  # conditional, not blind
    with CaptureQueriesContext(connection) as again:
        token_authenticate(plaintext=issued.plaintext)
    assert [q["sql"].split(" ", 1)[0] for q in again.captured_queries] == ["SELECT"]  # used a moment ago


def test_a_stale_last_use_is_written_only_if_no_other_request_wrote_it_first(user):
    from apps_registry.services.tokens import token_last_used_note

    issued = token_create(user=user)
    stale = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.filter(pk=issued.token.pk).update(last_used_at=stale)
    read_by_a = ApiToken.objects.get(pk=issued.token.pk)
    read_by_b = ApiToken.objects.get(pk=issued.token.pk)
    token_last_used_note(token=read_by_a)
    written = ApiToken.objects.get(pk=issued.token.pk).last_used_at
    assert written is not None and written > stale
    token_last_used_note(token=read_by_b)  # read the stale value too, but another request has written since
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at == written


def test_a_revoked_token_is_refused_on_the_next_request(user):
    issued = token_create(user=user)
    assert get_apps(issued.plaintext).status_code == 200
    token_revoke(token=issued.token)
    response = get_apps(issued.plaintext)
    assert response.status_code == 401
    assert response.json()["error"]["message"].startswith("Revoked token")


def test_the_token_lookup_loads_whole_token_and_user_instances_as_the_orm_would(user, django_assert_num_queries):
    from apps_registry.services.tokens import token_authenticate

    issued = token_create(user=user, expires_days=3, scopes=["apps:read"])
    token = token_authenticate(plaintext=issued.plaintext)
    expected = ApiToken.objects.select_related("user").get(pk=issued.token.pk)
    with django_assert_num_queries(0):  # nothing deferred: every field came with the one query
        for model_field in ApiToken._meta.concrete_fields:
            assert getattr(token, model_field.attname) == getattr(expected, model_field.attname), model_field.name
        for model_field in type(user)._meta.concrete_fields:
            assert getattr(token.user, model_field.attname) == getattr(expected.user, model_field.attname)
        assert timezone.is_aware(token.expires_at) and timezone.is_aware(token.user.date_joined)
        assert token.scope_set == {"apps:read"}
    assert not token._state.adding and token._state.db == "default"
    token.name = "renamed"
    token.save(update_fields=["name"])  # an instance the ORM can save, not a copy of one
    assert ApiToken.objects.get(pk=token.pk).name == "renamed"
