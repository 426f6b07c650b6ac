from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from apps_registry.models import Advisory, ApiToken, AuditEvent, FeedbackResponse, Storage
from apps_registry.services.tokens import token_create
from tests.factories import AdvisoryFactory, FeedbackFactory, RecordFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def populated(staff):
    """One object of every registered model, so every change page can be opened."""
    advisory = AdvisoryFactory()
    feedback = FeedbackFactory(app=advisory.app)
    FeedbackResponse.objects.create(feedback=feedback, staff_author=staff, body="Thanks!")
    RecordFactory(storage=advisory.app.storage)
    advisory.app.routes.create(name="add", kind="mutation")
    token_create(user=advisory.app.owner)
    AuditEvent.objects.create(actor=staff, actor_repr="staffer", action="app.delete", details={})
    return advisory


def registered_models():
    return [model for model in admin.site._registry if model._meta.app_label == "apps_registry"]


def admin_url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_changelist_and_change_page_renders_for_staff(client, staff, populated):
    client.force_login(staff)
    models = registered_models()
    assert len(models) >= 9
    for model in models:
        response = client.get(admin_url(model, "changelist"))
        assert response.status_code == 200, model
        obj = model.objects.first()
        assert obj is not None, model
        response = client.get(admin_url(model, "change", obj.pk))
        assert response.status_code == 200, model


def test_admin_search_boxes_find_things(client, staff, populated):
    client.force_login(staff)
    response = client.get(admin_url(type(populated.app), "changelist"), {"q": populated.app.name})
    assert populated.app.name in response.content.decode()


def test_non_staff_is_refused_everywhere(client, populated):
    client.force_login(UserFactory(username="mallory"))
    for model in registered_models():
        for url in (admin_url(model, "changelist"), admin_url(model, "change", model.objects.first().pk)):
            response = client.get(url)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_token_pages_never_show_the_secret(client, staff, user):
    issued = token_create(user=user)
    client.force_login(staff)
    for url in (admin_url(ApiToken, "changelist"), admin_url(ApiToken, "change", issued.token.pk)):
        body = client.get(url).content.decode()
        assert issued.token.prefix in body
        assert issued.plaintext not in body and issued.token.secret_hash not in body


def test_revoke_action_revokes_tokens(client, staff, user):
    issued = token_create(user=user)
    client.force_login(staff)
    client.post(admin_url(ApiToken, "changelist"), {"action": "revoke_selected", "_selected_action": [issued.token.pk]})
    assert ApiToken.objects.get(pk=issued.token.pk).revoked


def test_resolve_action_resolves_advisories(client, staff, populated):
    client.force_login(staff)
    client.post(admin_url(Advisory, "changelist"), {"action": "resolve_selected", "_selected_action": [populated.pk]})
    populated.refresh_from_db()
    assert populated.resolved and populated.resolved_at is not None


def test_staff_answer_on_the_feedback_page_records_who_answered(client, staff):
    feedback = FeedbackFactory()
    client.force_login(staff)
    response = client.post(
        admin_url(type(feedback), "change", feedback.pk),
        {
            "responses-TOTAL_FORMS": "1",
            "responses-INITIAL_FORMS": "0",
            "responses-MIN_NUM_FORMS": "0",
            "responses-MAX_NUM_FORMS": "1000",
            "responses-0-body": "Fixed in the next version.",
            "_save": "Save",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    answer = feedback.responses.get()
    assert answer.staff_author == staff and answer.body == "Fixed in the next version." and answer.read_at is None


def test_records_and_audit_are_read_only_in_admin(client, staff, populated):
    client.force_login(staff)
    storage = Storage.objects.first()
    assert client.get(admin_url(Storage, "delete", storage.pk)).status_code == 403
    event = AuditEvent.objects.first()
    assert client.post(admin_url(AuditEvent, "delete", event.pk), {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()
