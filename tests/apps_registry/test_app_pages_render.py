"""Every route of the examples and of a definition using every supported schema type renders; app data is inert."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps_registry.models import Record, Route
from apps_registry.pages.schema_forms import form_parse, schema_form
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, run

pytestmark = pytest.mark.django_db

EVERY_TYPE_INPUT = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "title": "Title", "minLength": 1, "maxLength": 80},
        "body": {"type": "string", "maxLength": 2000, "description": "Long text"},
        "email": {"type": "string", "format": "email"},
        "due": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "count": {"type": "integer", "minimum": 0, "maximum": 10},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "done": {"type": "boolean"},
        "urgent": {"type": "boolean"},
        "color": {"enum": ["red", "green"]},
        "size": {"enum": [1, 2, 3]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "array", "items": {"type": "number"}},
        "flavours": {"type": "array", "items": {"enum": ["sweet", "sour"]}},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["street"],
        },
        "extra": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "pairs": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["title", "done"],
    "additionalProperties": False,
}

EVERY_TYPE = {
    "name": "Everything",
    "description": "Every shape",
    "collections": {"things": {}},
    "routes": {
        "add_thing": {
            "kind": "mutation",
            "input": EVERY_TYPE_INPUT,
            "output": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "steps": [
                {"insert": {"collection": "things", "value": "params"}, "as": "thing"},
                {"return": "{'id': thing.id}"},
            ],
        },
        "things": {
            "kind": "query",
            "input": {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}},
            "output": {"type": "array", "items": {"type": "object"}},
            "steps": [{"find": {"collection": "things", "limit": "10"}, "as": "found"}, {"return": "found"}],
        },
        "how_many": {
            "kind": "query",
            "output": {"type": "integer"},
            "steps": [{"count": {"collection": "things"}, "as": "n"}, {"return": "n"}],
        },
    },
}


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.mark.parametrize(
    "definition", [example("budget"), example("todo"), EVERY_TYPE], ids=["budget", "todo", "every"]
)
def test_every_route_of_the_definition_renders(client, user, definition):
    app = app_definition_save(actor=user, definition=definition)
    client.force_login(user)
    response = client.get(reverse("app_page", args=[app.id]))
    assert response.status_code == 200
    body = text(response)
    for route in Route.objects.filter(app=app):
        marker = f'id="view-{route.name}"' if route.kind == "query" else f'id="action-{route.name}"'
        assert marker in body, route.name


def test_every_schema_type_becomes_its_input(client, user):
    app = app_definition_save(actor=user, definition=EVERY_TYPE)
    client.force_login(user)
    body = text(client.get(reverse("app_page", args=[app.id])))
    expect = [
        r'<input type="text" id="m-add_thing-title" name="title" value="" required maxlength="80" minlength="1"',
        r'<textarea id="m-add_thing-body" name="body" rows="3" maxlength="2000" '
        r'aria-describedby="m-add_thing-body-help"',
        r'<input type="email" id="m-add_thing-email"',
        r'<input type="date" id="m-add_thing-due"',
        r'<input type="datetime-local" id="m-add_thing-at"',
        r'<input type="number" id="m-add_thing-count" name="count" value="" step="1" min="0" max="10"',
        r'<input type="number" id="m-add_thing-price" name="price" value="" step="any" inputmode="decimal" '
        r'aria-describedby="m-add_thing-price-help"',
        r'<input type="checkbox" id="m-add_thing-done" name="done">',
        r'<select id="m-add_thing-urgent" name="urgent"',
        r'<option value="red">red</option>',
        r'<option value="2">2</option>',
        r'<textarea id="m-add_thing-tags" name="tags" rows="4"',
        r'<input type="text" id="m-add_thing-scores" name="scores"',
        r'<select id="m-add_thing-flavours" name="flavours" multiple',
        r'<fieldset class="fieldset"> ?<legend>Address <span class="optional">\(optional\)</span></legend>',
        r'<input type="text" id="m-add_thing-address-street" name="address.street" value="">',
        r'<textarea id="m-add_thing-extra" name="extra" rows="4" class="mono"',
        r'<textarea id="m-add_thing-pairs" name="pairs" rows="4" class="mono"',
    ]
    for pattern in expect:
        assert re.search(pattern, body), pattern


def test_every_schema_type_is_parsed_into_params_and_runs(client, user):
    app = app_definition_save(actor=user, definition=EVERY_TYPE)
    client.force_login(user)
    data = {
        "title": "T",
        "body": "long",
        "email": "a@example.com",
        "due": "2026-12-01",
        "at": "2026-12-01T10:30",
        "count": "3",
        "price": "2.5",
        "done": "on",
        "urgent": "false",
        "color": "green",
        "size": "2",
        "tags": "a\nb\n",
        "scores": "1, 2.5",
        "flavours": ["sweet", "sour"],
        "address.street": "Main St",
        "address.zip": "",
        "extra": "7",
        "pairs": '[{"k": 1}]',
    }
    response = client.post(reverse("app_route_submit", args=[app.id, "add_thing"]), data)
    assert response.status_code == 302, text(response)
    stored = Record.objects.get(collection="things").data
    assert stored == {
        "title": "T",
        "body": "long",
        "email": "a@example.com",
        "due": "2026-12-01",
        "at": "2026-12-01T10:30:00Z",
        "count": 3,
        "price": 2.5,
        "done": True,
        "urgent": False,
        "color": "green",
        "size": 2,
        "tags": ["a", "b"],
        "scores": [1.0, 2.5],
        "flavours": ["sweet", "sour"],
        "address": {"street": "Main St"},
        "extra": 7,
        "pairs": [{"k": 1}],
    }
    page = text(client.get(reverse("app_page", args=[app.id])))
    assert '<p class="figure">1</p>' in page  # how_many: a number as a figure


def test_nested_required_error_lands_on_the_nested_field(client, user):
    app = app_definition_save(actor=user, definition=EVERY_TYPE)
    client.force_login(user)
    response = client.post(
        reverse("app_route_submit", args=[app.id, "add_thing"]), {"title": "T", "done": "on", "address.zip": "1"}
    )
    assert response.status_code == 400
    assert 'id="m-add_thing-address-street-errors"><li>This field is required.</li>' in text(response)


def test_a_top_level_shape_a_form_cannot_draw_is_one_json_text_area():
    form = schema_form({"oneOf": [{"type": "object"}, {"type": "array"}]})
    assert form.json_only and form.fields[0].widget == "json"
    from django.http import QueryDict

    parsed = form_parse(form, QueryDict("__json__=%7B%22a%22%3A1%7D"))
    assert parsed.params == {"a": 1}


PAYLOADS = ["<script>alert(1)</script>", '"onmouseover="alert(1)', "<img src=x onerror=alert(1)>"]


def test_app_data_names_and_descriptions_are_inert(client, user):
    definition = example("todo")
    definition["name"] = PAYLOADS[0] + PAYLOADS[1]
    definition["description"] = PAYLOADS[2] + PAYLOADS[1]
    definition["routes"]["add_todo"]["description"] = PAYLOADS[0]
    app = app_definition_save(actor=user, definition=definition)
    for payload in PAYLOADS:
        run(user, app, "add_todo", {"title": payload})
    client.force_login(user)
    pages = [
        client.get(reverse("home")),
        client.get(reverse("app_page", args=[app.id])),
        client.get(reverse("app_records", args=[app.id, "todos"])),
        client.get(reverse("app_delete", args=[app.id])),
        client.post(reverse("app_route_submit", args=[app.id, "add_todo"]), {"title": PAYLOADS[0], "priority": "9"}),
    ]
    for response in pages:
        body = response.content.decode()
        assert "<script>alert" not in body
        assert "<img src=x" not in body
        assert '"onmouseover="' not in body
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "default-src 'self'" in policy
        assert "'unsafe-inline'" not in policy
    # No script element on the page but the static htmx and the live updates' poller.
    scripts = re.findall(r"<script[^>]*>", pages[1].content.decode())
    assert scripts == [
        '<script src="/static/charming/htmx.min.js" defer>',
        '<script src="/static/charming/live.js" defer>',
    ]


def test_the_policy_is_the_strict_one(client):
    policy = client.get(reverse("home"))["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives == {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "frame-ancestors": "'none'",
        "form-action": "'self'",
    }


def test_no_template_has_inline_script_or_style():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "templates"
    for path in root.rglob("*.html"):
        source = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", source), path
        assert "style=" not in source and "<style" not in source, path
        assert not re.search(r"\son[a-z]+=", source), path
