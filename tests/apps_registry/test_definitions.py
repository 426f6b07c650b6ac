"""app_definition_save / export / clear: whole-or-nothing saves, versions, advisories, legacy routes."""

from __future__ import annotations

import copy

import pytest

from apps_registry.access import membership_set
from apps_registry.exceptions import Forbidden, InvalidDefinition, NotFound
from apps_registry.models import Advisory, App, Role, Route
from apps_registry.services.definitions import (
    app_definition_clear,
    app_definition_export,
    app_definition_save,
    definition_dry_run,
    definition_save,
)
from tests.apps_registry.route_helpers import example, records, run
from tests.factories import AdvisoryFactory
from tests.messages import app_not_found_match

pytestmark = pytest.mark.django_db


def kinds(app) -> list[str]:
    return sorted(Advisory.objects.filter(app=app).values_list("kind", flat=True))


def test_saving_a_definition_creates_the_app_with_its_routes_and_collections(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    assert app.owner == user and app.name == "Budget"
    assert app.collections == {"expenses": {}, "budgets": {}}
    routes = {r.name: r for r in Route.objects.filter(app=app)}
    assert sorted(routes) == sorted(example("budget")["routes"])
    assert routes["add_expense"].kind == "mutation"
    assert routes["add_expense"].definition == {"steps": example("budget")["routes"]["add_expense"]["steps"]}
    assert kinds(app) == []


def test_a_definition_with_problems_is_refused_whole_listing_every_problem(user):
    definition = example("budget")
    definition["routes"]["add_expense"]["steps"][3]["insert"]["value"] = "{'amount': params.amount +* 2}"
    definition["routes"]["list_expenses"]["kind"] = "read"
    definition["routes"]["summary"]["input"] = {"type": "objekt"}
    definition["routes"]["set_budget"]["steps"].insert(0, {"explode": {}})
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    errors = {e["path"]: e["message"] for e in exc.value.errors}
    assert errors["routes.add_expense.steps[3].insert.value"].startswith(
        "syntax error at column 27: extraneous input '*'"
    )
    assert errors["routes.list_expenses.kind"] == "must be 'query' or 'mutation', got 'read'"
    assert errors["routes.summary.input"].startswith("is not a valid JSON Schema")
    assert "a step has exactly one of get, find" in errors["routes.set_budget.steps[0]"]
    assert len(exc.value.errors) == 4
    assert exc.value.message.startswith("The app definition has 4 problem(s); nothing was saved.")
    assert not App.objects.exists()


@pytest.mark.parametrize(
    ("steps", "path", "message"),
    [
        ([{"return": "budgt.limit"}], "routes.r.steps[0].return", "unknown name(s) budgt; names available here"),
        ([{"let": "1"}], "routes.r.steps[0].as", "a let step needs 'as'"),
        ([{"let": "1", "as": "params"}], "routes.r.steps[0].as", "'params' is reserved"),
        ([{"let": "1", "as": "x"}, {"let": "2", "as": "x"}], "routes.r.steps[1].as", "already bound by steps[0]"),
        ([{"return": "1"}, {"return": "2"}], "routes.r.steps[1]", "unreachable: it follows a return step"),
        ([{"get": {"collection": "items"}}], "routes.r.steps[0].get.id", "required"),
        (
            [{"get": {"collection": "bad name", "id": "'x'"}}],
            "routes.r.steps[0].get.collection",
            "must be a collection",
        ),
        (
            [{"find": {"collection": "items", "where": {"n": {"like": "1"}}}}],
            "routes.r.steps[0].find.where.n.like",
            "unknown comparison",
        ),
        (
            [{"increment": {"collection": "items", "id": "'x'", "field": "a.b"}}],
            "routes.r.steps[0].increment.field",
            "increment works on a top-level field",
        ),
        ([{"fail": {"message": "'x'"}, "as": "y"}], "routes.r.steps[0].as", "a fail step binds nothing"),
        ([], "routes.r.steps", "must be a non-empty array of steps"),
    ],
)
def test_step_problems_are_reported_with_their_path(user, steps, path, message):
    definition = {"name": "T", "collections": {"items": {}}, "routes": {"r": {"kind": "mutation", "steps": steps}}}
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    found = {e["path"]: e["message"] for e in exc.value.errors}
    assert path in found, found
    assert message in found[path]


def test_a_query_route_cannot_contain_a_write_step(user):
    definition = {
        "name": "T",
        "routes": {"r": {"kind": "query", "steps": [{"delete": {"collection": "items", "id": "'x'"}}]}},
    }
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    assert exc.value.errors == [
        {"path": "routes.r.steps[0].delete", "message": "a query route cannot write; make the route a mutation"}
    ]


def test_replacing_bumps_only_changed_routes_and_removes_dropped_ones(user):
    definition = example("todo")
    app = app_definition_save(actor=user, definition=definition)
    versions = dict(Route.objects.filter(app=app).values_list("name", "version"))
    changed = copy.deepcopy(definition)
    changed["routes"]["add_todo"]["description"] = "Edited."
    del changed["routes"]["progress"]
    changed["tests"] = [test for test in changed["tests"] if test["route"] != "progress"]
    app_definition_save(actor=user, definition=changed, app_id=app.id)
    after = dict(Route.objects.filter(app=app).values_list("name", "version"))
    assert after["add_todo"] == versions["add_todo"] + 1
    assert all(after[name] == versions[name] for name in after if name != "add_todo")
    assert "progress" not in after


def test_owner_and_editors_may_replace_viewers_are_refused_and_strangers_see_not_found(user, other_user):
    app = app_definition_save(actor=user, definition=example("todo"))
    with pytest.raises(NotFound, match=app_not_found_match(app.id)):
        app_definition_save(actor=other_user, definition=example("todo"), app_id=app.id)
    membership_set(actor=user, app=app, user=other_user, role=Role.VIEWER)
    with pytest.raises(Forbidden) as exc:
        app_definition_save(actor=other_user, definition=example("todo"), app_id=app.id)
    assert exc.value.message == (
        "Only the app's owner and editors can read or change the definition of app 'To-do'; you are a viewer."
    )
    membership_set(actor=user, app=app, user=other_user, role=Role.EDITOR)
    edited = example("todo")
    edited["description"] = "Edited by an editor."
    assert app_definition_save(actor=other_user, definition=edited, app_id=app.id).description == "Edited by an editor."


def test_saving_with_an_unused_app_id_creates_the_app_with_that_id(user):
    import uuid

    wanted = uuid.uuid4()
    app = app_definition_save(actor=user, definition=example("todo"), app_id=wanted)
    assert app.id == wanted


def test_export_returns_a_definition_that_saves_back_unchanged(user, other_user):
    app = app_definition_save(actor=user, definition=example("budget"))
    exported = app_definition_export(actor=user, app_id=app.id)
    assert exported["routes"]["add_expense"]["steps"] == example("budget")["routes"]["add_expense"]["steps"]
    # jsonb keeps no key order: the export (and the app page) still follow the author's order of properties
    for name, route in example("budget")["routes"].items():
        assert list(exported["routes"][name]["input"].get("properties", {})) == list(
            route["input"].get("properties", {})
        )
        if "output" in route:
            assert list(exported["routes"][name]["output"].get("properties", {})) == list(
                route["output"].get("properties", {})
            )
    versions = dict(Route.objects.filter(app=app).values_list("name", "version"))
    app_definition_save(actor=user, definition=exported, app_id=app.id)
    assert dict(Route.objects.filter(app=app).values_list("name", "version")) == versions
    with pytest.raises(NotFound, match=app_not_found_match(app.id)):
        app_definition_export(actor=other_user, app_id=app.id)


def test_clearing_removes_routes_but_keeps_the_app_and_its_records(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 10})
    app_definition_clear(actor=user, app_id=app.id)
    assert not Route.objects.filter(app=app).exists()
    assert App.objects.filter(pk=app.pk).exists()
    assert records(app, "budgets")["current"]["limit"] == 10.0


# --- advisories -----------------------------------------------------------------------------

SLOPPY = {
    "name": "Sloppy",
    "collections": {"notes": {}},
    "routes": {
        "add_note": {"kind": "mutation", "handler": {"action": "insert", "collection": "notes"}},
        "all_notes": {
            "kind": "query",
            "output": {"type": "array"},
            "steps": [
                {"let": "params", "as": "unused"},
                {"find": {"collection": "notse"}, "as": "found"},
                {"return": "found"},
            ],
        },
    },
}


def test_saving_computes_each_authoring_advisory(user):
    app = app_definition_save(actor=user, definition=SLOPPY)
    advisories = {a.kind: a for a in Advisory.objects.filter(app=app)}
    assert sorted(advisories) == [
        "legacy-bridge",
        "missing-output-schema",
        "unbounded-find",
        "unknown-collection",
        "untested-route",  # SLOPPY has no tests: one per route (test_a_route_no_test_calls_gets_an_info_advisory...)
        "unused-binding",
    ]
    legacy = advisories["legacy-bridge"]
    assert legacy.severity == "warn"
    assert legacy.data == {
        "route": "add_note",
        "steps": [
            {"insert": {"collection": "notes", "value": "params"}, "as": "record"},
            {"return": "record"},
        ],
    }
    assert "legacy 'handler' form" in legacy.summary and legacy.user_summary
    assert "Route 'add_note' has no 'output' schema" in advisories["missing-output-schema"].summary
    assert "without a 'limit'" in advisories["unbounded-find"].summary
    assert "'notse'" in advisories["unknown-collection"].summary
    assert advisories["unused-binding"].data == {"route": "all_notes", "step": 0, "name": "unused"}
    assert advisories["unused-binding"].severity == "info"
    assert all(a.doc_url == "docs/authoring.md#advisories" for a in advisories.values())
    # Every kind speaks to the app's users too, except untested-route: it changes nothing for them.
    assert all(a.user_summary for kind, a in advisories.items() if kind != "untested-route")


UNTESTED = (
    "Route '{route}' has no test: no entry of the definition's 'tests' calls it, so a save cannot tell whether it "
    'still works. Add one to \'tests\': {{"route": "{route}", "params": {{...}}, "expect": {{"value": ...}}}} '
    '(or "expect": {{"error": "<kind>"}}){writes}.'
)


def test_a_route_no_test_calls_gets_an_info_advisory_naming_it_and_how_to_add_one(user):
    definition = copy.deepcopy(SLOPPY)
    definition["routes"]["add_note"] = {"kind": "mutation", "steps": [{"return": "1"}], "output": {"type": "integer"}}
    definition["tests"] = [{"route": "add_note", "expect": {"error": "handler_error"}}]  # fails: still a test of it
    saved = definition_save(actor=user, definition=definition, allow_failing_tests=True)
    untested = list(Advisory.objects.filter(app=saved.app, kind="untested-route"))
    assert [(a.severity, a.data, a.user_summary) for a in untested] == [("info", {"route": "all_notes"}, "")]
    assert untested[0].summary == UNTESTED.format(route="all_notes", writes="")

    checked = definition_dry_run(actor=user, definition=SLOPPY).advisories
    assert [a.summary for a in checked if a.kind == "untested-route"] == [
        UNTESTED.format(route="add_note", writes=" and records_after for the records it writes"),
        UNTESTED.format(route="all_notes", writes=""),
    ]

    definition["tests"].append({"route": "all_notes", "expect": {"value": []}})
    definition_save(actor=user, definition=definition, app_id=saved.app.id, allow_failing_tests=True)
    assert not Advisory.objects.filter(app=saved.app, kind="untested-route").exists()


def test_saving_again_replaces_authoring_advisories_and_keeps_other_kinds(user):
    app = app_definition_save(actor=user, definition=SLOPPY)
    AdvisoryFactory(app=app, kind="feedback-response", summary="Staff answered.")
    app_definition_save(actor=user, definition=example("todo"), app_id=app.id)
    assert kinds(app) == ["feedback-response"]


def test_a_legacy_handler_route_still_runs_bridged_into_steps(user):
    definition = {
        "name": "Legacy",
        "collections": {"notes": {}},
        "routes": {
            "add": {"kind": "mutation", "handler": {"action": "insert", "collection": "notes"}},
            "edit": {"kind": "mutation", "handler": {"action": "update", "collection": "notes"}},
            "remove": {"kind": "mutation", "handler": {"action": "delete", "collection": "notes"}},
        },
    }
    app = app_definition_save(actor=user, definition=definition)
    added = run(user, app, "add", {"id": "n1", "text": "hi"})
    assert added == {"id": "n1", "text": "hi"}
    assert run(user, app, "edit", {"id": "n1", "text": "hello"}) == {"id": "n1", "text": "hello"}
    assert records(app) == {"n1": {"text": "hello"}}
    assert run(user, app, "remove", {"id": "n1"}) == {"id": "n1", "text": "hello"}
    assert records(app) == {}
    assert Route.objects.get(app=app, name="add").definition == {"handler": {"action": "insert", "collection": "notes"}}


def test_a_legacy_handler_must_be_a_mutation_with_a_known_action(user):
    definition = {
        "name": "Legacy",
        "routes": {"x": {"kind": "query", "handler": {"action": "upsert", "collection": "notes"}}},
    }
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    found = {e["path"]: e["message"] for e in exc.value.errors}
    assert found["routes.x.handler.action"] == "must be insert, update or delete, got 'upsert'"
    assert found["routes.x.handler"] == "a legacy handler writes: its route must be a mutation"


RANGE = {
    "name": "Log",
    "collections": {"entries": {}},
    "routes": {
        "between": {
            "kind": "query",
            "input": {
                "type": "object",
                "properties": {"from": {"type": "string"}, "to": {"type": "string"}, "habit": {"type": "string"}},
            },
            "steps": [
                {
                    "find": {
                        "collection": "entries",
                        "where": {
                            "day": {"gte": "params.from", "when": "has(params.from)"},
                            "habit": {"eq": "params.habit", "when": "has(params.habit)"},
                        },
                        "limit": "50",
                    },
                    "as": "found",
                },
                {"return": "found"},
            ],
        }
    },
}


def test_an_input_no_expression_reads_gets_an_info_advisory_naming_it(user):
    """An agent declared `to` and forgot the filter: the save said nothing and every caller's `to` was ignored."""
    checked = definition_dry_run(actor=user, definition=RANGE)
    assert checked.problems == []
    unused = [a for a in checked.advisories if a.kind == "unused-input"]
    assert [(a.severity, a.data, a.user_summary) for a in unused] == [("info", {"route": "between", "param": "to"}, "")]
    assert unused[0].summary == (
        "Route 'between' declares input 'to' but no step reads params.to: a caller's value is accepted and ignored. "
        'Use it (for an optional filter, a condition with "when": "has(params.to)") or remove it from \'input\'.'
    )

    wired = copy.deepcopy(RANGE)
    wired["routes"]["between"]["steps"][1] = {"return": "has(params.to) ? found.filter(e, e.day < params.to) : found"}
    rechecked = definition_dry_run(actor=user, definition=wired)
    assert rechecked.problems == [] and [a for a in rechecked.advisories if a.kind == "unused-input"] == []

    whole = copy.deepcopy(RANGE)  # params read whole: any field may be read, so none is flagged
    whole["routes"]["between"]["steps"][1] = {"return": "{'found': found, 'asked': params}"}
    rechecked = definition_dry_run(actor=user, definition=whole)
    assert rechecked.problems == [] and [a for a in rechecked.advisories if a.kind == "unused-input"] == []
