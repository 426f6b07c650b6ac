"""App versions: +1 per save, each kept whole with who, when and what changed; stale saves refused; restore."""

from __future__ import annotations

import copy

import pytest

from apps_registry.exceptions import InvalidInput, NotFound, VersionConflict
from apps_registry.models import App, AppVersion, Record
from apps_registry.services import definitions
from apps_registry.services.definitions import app_source_get, app_version_restore, definition_save
from tests.apps_registry.route_helpers import example, one_route_app, run

pytestmark = pytest.mark.django_db


def test_every_save_keeps_the_whole_definition_as_a_version(user):
    todo = example("todo")
    first = definition_save(actor=user, definition=todo)
    assert (first.version, first.created, first.summary) == (
        1,
        True,
        f"Added routes {', '.join(sorted(todo['routes']))}.",
    )
    edited = copy.deepcopy(todo)
    edited["routes"]["add_todo"]["description"] = "Add an item."
    del edited["routes"]["progress"]
    edited["tests"] = [t for t in edited["tests"] if t["route"] != "progress"]
    second = definition_save(actor=user, definition=edited, app_id=first.app.id, expected_version=1)
    assert second.version == 2
    assert second.summary == "Changed route add_todo; removed route progress; changed tests."
    rows = list(AppVersion.objects.filter(app=first.app).order_by("number"))
    assert [(v.number, v.author, v.author_repr, v.definition) for v in rows] == [
        (1, user, "alice", todo),
        (2, user, "alice", edited),
    ]
    assert rows[1].changes == {
        "added": [],
        "changed": ["add_todo"],
        "removed": ["progress"],
        "unchanged": ["complete_todo", "delete_todo", "open_todos", "rename_todo"],
        "other": ["tests"],
    }


def test_a_save_without_expected_version_still_counts_a_version(user):
    app = definition_save(actor=user, definition=example("todo")).app
    definition_save(actor=user, definition=example("todo"), app_id=app.id)
    app.refresh_from_db()
    assert app.version == 2
    assert AppVersion.objects.get(app=app, number=2).summary == "No change."


def test_the_database_refuses_a_stale_version_even_past_the_early_check(user, monkeypatch):
    app = definition_save(actor=user, definition=example("todo")).app
    stale = App.objects.get(pk=app.pk)
    definition_save(actor=user, definition=example("todo"), app_id=app.id, expected_version=1)
    # As if this save read the app before the other one committed: the early check passes, the UPDATE must not.
    monkeypatch.setattr(definitions, "_existing_app", lambda **kwargs: (stale, "owner"))
    with pytest.raises(VersionConflict) as exc:
        definition_save(actor=user, definition=example("todo"), app_id=app.id, expected_version=1)
    assert exc.value.details == {"expected_version": 1, "current_version": 2}
    assert (exc.value.kind, exc.value.message) == (
        "conflict",
        "expected_version 1 is stale: app 'To-do' is at version 2 (saved since you read it); nothing was saved. "
        "Read the app's definition again and apply your change to version 2, then save it with expected_version 2.",
    )
    assert AppVersion.objects.filter(app=app).count() == 2


def test_restoring_saves_an_old_definition_as_a_new_version_and_leaves_records_alone(user):
    app = one_route_app(user, [{"insert": {"collection": "items", "value": "{'n': 1}"}, "as": "r"}, {"return": "r.id"}])
    run(user, app)
    original = app_source_get(actor=user, app_id=app.id).definition
    changed = copy.deepcopy(original)
    changed["routes"]["r"]["steps"][0]["insert"]["value"] = "{'n': 2}"
    definition_save(actor=user, definition=changed, app_id=app.id, expected_version=1)
    restored = app_version_restore(actor=user, app_id=app.id, version=1, expected_version=2)
    assert (restored.version, restored.summary) == (3, "Restored version 1: Changed route r.")
    assert app_source_get(actor=user, app_id=app.id).definition == original
    assert app_source_get(actor=user, app_id=app.id, version=2).definition == changed
    assert [r.data for r in Record.objects.filter(storage__app=app)] == [{"n": 1}]
    with pytest.raises(VersionConflict):
        app_version_restore(actor=user, app_id=app.id, version=1, expected_version=2)
    with pytest.raises(NotFound, match="has no version 9; its versions are 1 to 3"):
        app_source_get(actor=user, app_id=app.id, version=9)


def test_a_date_that_is_not_a_date_is_invalid_input(user):
    app = one_route_app(
        user,
        [{"return": "params.day"}],
        kind="query",
        input_schema={"type": "object", "properties": {"day": {"type": "string", "format": "date"}}},
    )
    assert run(user, app, params={"day": "2026-12-01"}, kind="query") == "2026-12-01"
    with pytest.raises(InvalidInput) as exc:
        run(user, app, params={"day": "yesterday"}, kind="query")
    assert exc.value.errors == [{"path": "$.day", "message": '"yesterday" is not a "date"'}]


@pytest.mark.parametrize(
    ("schema_format", "good", "bad"),
    [
        ("date-time", "2026-12-01T10:00:00Z", "2026-12-01"),
        ("time", "10:00:00Z", "10am"),
        ("email", "a@example.org", "not-an-email"),
        ("uri", "https://example.org/x", "no scheme"),
        ("uuid", "123e4567-e89b-42d3-a456-426614174000", "123"),
    ],
)
def test_formats_are_asserted_on_input_and_output(user, schema_format, good, bad):
    field = {"type": "string", "format": schema_format}
    app = one_route_app(
        user,
        [{"return": "params.v"}],
        kind="query",
        input_schema={"type": "object", "properties": {"v": field}},
        output=field,
        out={"kind": "query", "output": field, "steps": [{"return": f"'{bad}'"}]},
    )
    assert run(user, app, params={"v": good}, kind="query") == good
    with pytest.raises(InvalidInput):
        run(user, app, params={"v": bad}, kind="query")
    from apps_registry.exceptions import InvalidOutput

    with pytest.raises(InvalidOutput):
        run(user, app, op="out", kind="query")
