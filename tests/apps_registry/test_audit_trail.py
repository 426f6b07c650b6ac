"""The audit trail of access-changing acts beyond sharing and deletion: tokens and OAuth disconnections; the admin
shows it (and the change log) to staff, with no secret in it."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from apps_registry.models import AuditEvent, Change
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.oauth import oauth_client_disconnect
from apps_registry.services.routes import route_run
from apps_registry.services.tokens import token_create, token_revoke_own
from tests.apps_registry.test_changes import TASKS
from tests.oauth_helpers import register_ok, tokens_for

pytestmark = pytest.mark.django_db


def test_issuing_and_revoking_a_token_are_audited_by_prefix_without_the_secret(user):
    issued = token_create(user=user, name="laptop", scopes=["apps:read"])
    created = AuditEvent.objects.get(action="token.create")
    assert (created.actor, created.details["prefix"], created.details["name"]) == (user, issued.token.prefix, "laptop")
    assert created.details["scopes"] == "apps:read"
    token_revoke_own(actor=user, token_id=issued.token.pk)
    token_revoke_own(actor=user, token_id=issued.token.pk)  # twice: audited once
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1
    secret = issued.plaintext.rsplit("_", 1)[-1]
    assert secret not in json.dumps(list(AuditEvent.objects.values_list("details", flat=True)))


def test_disconnecting_an_oauth_client_is_audited(user):
    browser = Client()
    browser.force_login(user)
    client_id = register_ok(Client(), client_name="Claude")["client_id"]
    tokens = tokens_for(browser, client_id)
    from oauth2_provider.models import Application

    application = Application.objects.get(client_id=client_id)
    assert oauth_client_disconnect(user=user, application_id=application.pk) >= 1
    event = AuditEvent.objects.get(action="oauth.disconnect")
    assert (event.actor, event.details["client_name"]) == (user, "Claude")
    assert tokens["access_token"] not in json.dumps(event.details)
    assert oauth_client_disconnect(user=user, application_id=application.pk) == 0  # nothing left: no new event
    assert AuditEvent.objects.filter(action="oauth.disconnect").count() == 1


def test_staff_filter_the_audit_trail_by_action_and_read_the_change_log(client, staff, user):
    token_create(user=user, name="t")
    app = app_definition_save(actor=user, definition=TASKS)
    route_run(actor=user, app_id=app.id, op="add", params={"id": "t1", "title": "Milk"}, kind="mutation", via="mcp")
    client.force_login(staff)
    audit = client.get(reverse("admin:apps_registry_auditevent_changelist") + "?action=token.create")
    assert audit.status_code == 200 and "token.create" in audit.content.decode()
    change = Change.objects.get()
    listed = client.get(reverse("admin:apps_registry_change_changelist") + "?via=mcp")
    assert listed.status_code == 200 and "add" in listed.content.decode()
    page = client.get(reverse("admin:apps_registry_change_change", args=[change.pk]))
    assert page.status_code == 200 and "Milk" in page.content.decode()
    assert client.post(reverse("admin:apps_registry_change_delete", args=[change.pk])).status_code == 403
