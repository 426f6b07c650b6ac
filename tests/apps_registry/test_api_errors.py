"""The REST API's one translator: domain errors keep their kind; anything else is a generic 500."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from apps_registry.services.tokens import token_create
from tests.factories import make_app

pytestmark = pytest.mark.django_db


def test_an_unexpected_error_in_a_view_is_a_generic_500_and_a_full_log_line(user, monkeypatch, caplog):
    app = make_app(owner=user)

    def broken(**kwargs):
        raise RuntimeError("connection to postgres://charming:hunter2@db failed")

    monkeypatch.setattr("apps_registry.api.runs.route_run", broken)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user).plaintext}")

    with caplog.at_level(logging.ERROR, logger="apps_registry.api.errors"):
        response = client.post(f"/api/apps/{app.id}/run/anything/", {}, format="json")

    assert response.status_code == 500
    assert response.json() == {
        "ok": False,
        "error": {"kind": "internal_error", "message": "Internal error; it has been logged."},
    }
    assert "hunter2" not in response.content.decode()
    (record,) = [r for r in caplog.records if r.name == "apps_registry.api.errors"]
    assert record.getMessage().startswith("Unexpected error in ")
    assert record.exc_info is not None and "hunter2" in str(record.exc_info[1])
