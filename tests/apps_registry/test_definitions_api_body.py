"""The REST API bounds the JSON body it parses (DRF's parser bypasses Django's own upload limit)."""

from __future__ import annotations

import json

import pytest

from apps_registry.models import App
from tests.apps_registry.route_helpers import example
from tests.apps_registry.test_definitions_api import client_for

pytestmark = pytest.mark.django_db


def test_a_body_over_the_upload_limit_is_refused_with_413_before_parsing(user, settings):
    body = json.dumps(example("todo"))
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body)
    assert client_for(user).post("/api/apps/definitions/", body, content_type="application/json").status_code == 201
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(body) - 1
    response = client_for(user).post("/api/apps/definitions/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "ok": False,
        "error": {
            "kind": "request_too_large",
            "message": f"The request body is larger than {len(body) - 1} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); "
            "send less data.",
        },
    }
    assert App.objects.count() == 1


def test_a_json_body_nested_too_deeply_is_a_parse_error_not_a_500(user):
    body = "[" * 100_000 + "]" * 100_000
    response = client_for(user).post("/api/apps/definitions/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "JSON parse error - the document is nested too deeply."
