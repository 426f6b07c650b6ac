"""Presentation hints: checked and stored when an app is saved, and applied by the app page."""

from __future__ import annotations

import copy
import re

import pytest
from django.urls import reverse

from apps_registry.exceptions import InvalidDefinition
from apps_registry.models import Route
from apps_registry.pages.hints import RouteHints, hint_problems, hints_from
from apps_registry.pages.schema_forms import result_view
from apps_registry.services.definitions import app_definition_export, app_definition_save
from tests.apps_registry.page_apps import SPENDING
from tests.apps_registry.route_helpers import example, run


def with_hints(**routes):
    definition = example("budget")
    for name, hints in routes.items():
        definition["routes"][name].update(hints)
    return definition


def test_good_hints_have_no_problems():
    definition = with_hints(
        summary={"title": "This month", "view": "fields", "start": True},
        list_expenses={"columns": ["at", {"key": "amount", "label": "€"}, "category"]},
        delete_expense={"form": False},
    )
    assert hint_problems(definition) == []
    assert hint_problems(example("budget")) == []


@pytest.mark.parametrize(
    ("hints", "path", "message"),
    [
        ({"summary": {"title": ""}}, "$.routes.summary.title", "must be text of 1 to 100 characters"),
        (
            {"summary": {"view": "pie"}},
            "$.routes.summary.view",
            "must be one of table, fields, figure, chart, got 'pie'",
        ),
        ({"add_expense": {"view": "table"}}, "$.routes.add_expense.view", "is a hint for query routes only"),
        ({"summary": {"form": False}}, "$.routes.summary.form", "is a hint for mutation routes only"),
        ({"list_expenses": {"columns": []}}, "$.routes.list_expenses.columns", "must be an array of 1 to 50 columns"),
        (
            {"list_expenses": {"columns": ["id", "id"]}},
            "$.routes.list_expenses.columns[1]",
            "column 'id' is listed twice",
        ),
        (
            {"list_expenses": {"columns": [{"key": "id", "x": 1}]}},
            "$.routes.list_expenses.columns[0]",
            "unknown key(s) x",
        ),
        (
            {"summary": {"start": True}, "list_expenses": {"start": True}},
            "$.routes.summary.start",
            "only one start view per app; list_expenses is one",
        ),
    ],
)
def test_bad_hints_are_reported_at_their_path(hints, path, message):
    assert {"path": path, "message": message} in hint_problems(with_hints(**hints))


def test_hints_from_reads_a_route():
    hints = hints_from(
        {"title": " Spend ", "view": "figure", "columns": ["a", {"key": "b", "label": "B"}], "form": False}
    )
    assert hints == RouteHints(title="Spend", view="figure", columns=(("a", ""), ("b", "B")), start=False, form=False)


def test_columns_hint_chooses_order_and_labels():
    view = result_view(
        [{"id": "1", "amount": 2.0, "category": "food"}],
        {"type": "array", "items": {"type": "object", "properties": {"id": {}, "amount": {"type": "number"}}}},
        columns=(("category", ""), ("amount", "€")),
    )
    assert [(c.key, c.label, c.numeric) for c in view.columns] == [
        ("category", "Category", False),
        ("amount", "€", True),
    ]
    assert [c.text for c in view.rows[0].cells] == ["food", "2"]


def test_view_hints_table_of_an_object_and_figure_of_a_single_value():
    assert result_view({"a": 1, "b": 2}, None, view="table").shape == "table"
    figure = result_view({"total": 5}, None, view="figure")
    assert figure.shape == "figure" and figure.figure.text == "5" and figure.figure.label == "Total"
    assert result_view([1, 2], None, view="figure").shape == "list"  # a hint that does not fit is ignored


@pytest.mark.django_db
def test_saved_hints_are_stored_with_the_route_and_exported(user):
    columns = ["at", {"key": "amount", "label": "€"}, "category"]
    definition = with_hints(summary={"title": "This month", "start": True}, list_expenses={"columns": columns})
    app = app_definition_save(actor=user, definition=definition)
    assert Route.objects.get(app=app, name="summary").hints == {
        "title": "This month",
        "help": "Your budget, what you spent and what is left.",
        "start": True,
    }
    assert Route.objects.get(app=app, name="list_expenses").hints["columns"] == columns
    assert Route.objects.get(app=app, name="add_expense").hints == {
        "help": "What you spent, on what, and a note if you like."
    }
    exported = app_definition_export(actor=user, app_id=app.id)
    assert exported["routes"]["summary"]["title"] == "This month"
    assert exported["routes"]["list_expenses"]["columns"] == columns


@pytest.mark.django_db
def test_bad_hints_refuse_the_save_at_their_path(user):
    definition = with_hints(summary={"view": "pie", "start": False}, add_expense={"start": True})
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    assert exc.value.kind == "invalid_definition"
    assert exc.value.errors == [
        {"path": "routes.add_expense.start", "message": "is a hint for query routes only"},
        {"path": "routes.summary.view", "message": "must be one of table, fields, figure, chart, got 'pie'"},
    ]


@pytest.mark.django_db
def test_page_applies_titles_start_view_and_hidden_forms(client, user):
    definition = with_hints(
        summary={"title": "This month", "start": True, "view": "figure"},
        delete_expense={"form": False},
    )
    app = app_definition_save(actor=user, definition=definition)
    run(user, app, "set_budget", {"limit": 10})
    client.force_login(user)
    body = re.sub(r"\s+", " ", client.get(reverse("app_page", args=[app.id])).content.decode())
    views = re.findall(r'<article class="card view" id="view-(\w+)"', body)
    assert views[0] == "summary"
    assert '<h3 id="view-summary-title">This month</h3>' in body
    assert 'id="action-delete_expense"' not in body
    assert 'id="action-add_expense"' in body


def spending(**routes):
    definition = copy.deepcopy(SPENDING)
    for name, hints in routes.items():
        definition["routes"][name].update(hints)
    return definition


def test_the_new_hints_of_the_examples_and_of_a_reporting_app_have_no_problems():
    assert hint_problems(example("todo")) == []
    assert hint_problems(SPENDING) == []


@pytest.mark.parametrize(
    ("hints", "path", "message"),
    [
        (
            {"by_month": {"help": ""}},
            "$.routes.by_month.help",
            "must be text of 1 to 500 characters, written for the people using the page",
        ),
        (
            {"by_month": {"chart": None}},
            "$.routes.by_month.chart",
            'must be an object: {"type": "bar" or "line", "x": key, "y": key or [keys]}',
        ),
        (
            {"by_month": {"view": "table"}},
            "$.routes.by_month.view",
            'must be "chart" for the route\'s chart to be drawn',
        ),
        (
            {"month_report": {"view": "chart"}},
            "$.routes.month_report.chart",
            'is required with "view": "chart": {"type": "bar" or "line", "x": key, "y": key or [keys]}',
        ),
        (
            {"by_month": {"chart": {"type": "pie", "x": "month", "y": "total"}}},
            "$.routes.by_month.chart.type",
            "must be bar or line, got 'pie'",
        ),
        (
            {"by_month": {"chart": {"type": "bar", "x": "mnth", "y": "total"}}},
            "$.routes.by_month.chart.x",
            "'mnth' is not a key of the rows (they have: month, total, n)",
        ),
        (
            {"by_month": {"chart": {"type": "bar", "x": "month", "y": ["total", "month"]}}},
            "$.routes.by_month.chart.y",
            "'month' must hold numbers to be drawn, got 'string'",
        ),
        (
            {"by_month": {"chart": {"type": "bar", "x": "month", "y": []}}},
            "$.routes.by_month.chart.y",
            "must be a key of the rows, or an array of 1 to 6 keys",
        ),
        (
            {"by_month": {"chart": {"type": "bar", "x": "month", "y": "total", "z": 1}}},
            "$.routes.by_month.chart",
            "unknown key(s) z; a chart takes: type, x, y",
        ),
        (
            {"add_expense": {"chart": {"type": "bar", "x": "a", "y": "b"}}},
            "$.routes.add_expense.chart",
            "is a hint for query routes only",
        ),
        (
            {"by_month": {"row_actions": ["nope"]}},
            "$.routes.by_month.row_actions[0]",
            "'nope' is not a mutation of this app (its mutations: add_expense, forget_expense)",
        ),
        (
            {"by_month": {"row_actions": ["by_day"]}},
            "$.routes.by_month.row_actions[0]",
            "'by_day' is not a mutation of this app (its mutations: add_expense, forget_expense)",
        ),
        (
            {"by_month": {"row_actions": ["forget_expense"]}},
            "$.routes.by_month.row_actions[0]",
            (
                "'forget_expense' takes no param 'id' for the row's id (its params: expense); "
                'name one with {"route": ..., "param": ...}'
            ),
        ),
        (
            {
                "by_month": {
                    "row_actions": [
                        {"route": "forget_expense", "param": "expense"},
                        {"route": "forget_expense", "param": "expense"},
                    ]
                }
            },
            "$.routes.by_month.row_actions[1]",
            "'forget_expense' is listed twice",
        ),
        (
            {"by_month": {"row_actions": [{"route": "forget_expense", "as": "x"}]}},
            "$.routes.by_month.row_actions[0]",
            "unknown key(s) as; a row action takes: route, param",
        ),
        (
            {"by_month": {"row_actions": []}},
            "$.routes.by_month.row_actions",
            "must be an array of 1 to 6 mutation names",
        ),
        (
            {"add_expense": {"row_actions": ["forget_expense"]}},
            "$.routes.add_expense.row_actions",
            "is a hint for query routes only",
        ),
    ],
)
def test_bad_chart_row_action_and_help_hints_are_reported_at_their_path(hints, path, message):
    assert {"path": path, "message": message} in hint_problems(spending(**hints))


@pytest.mark.parametrize(
    ("where", "annotation", "path", "message"),
    [
        (
            "input",
            {"x-charming-record": "books"},
            "$.routes.forget_expense.input.properties.expense.x-charming-record",
            "must name a collection of this app (its collections: expense_tags, expenses), got 'books'",
        ),
        (
            "input",
            {"type": "integer"},
            "$.routes.forget_expense.input.properties.expense.x-charming-record",
            "a record's id is a string; the type is 'integer'",
        ),
        (
            "input",
            {"x-charming-label": "a b"},
            "$.routes.forget_expense.input.properties.expense.x-charming-label",
            "must be the name of a field of the records, like 'title'",
        ),
        (
            "input",
            {"x-charming-unit": ""},
            "$.routes.forget_expense.input.properties.expense.x-charming-unit",
            "must be a currency code such as EUR or a short unit such as kg (1 to 12 characters)",
        ),
    ],
)
def test_bad_schema_annotations_are_reported_at_their_path(where, annotation, path, message):
    definition = spending()
    definition["routes"]["forget_expense"][where]["properties"]["expense"].update(annotation)
    assert {"path": path, "message": message} in hint_problems(definition)


def test_a_record_annotation_on_an_output_or_a_label_alone_is_refused():
    definition = spending()
    definition["routes"]["add_expense"]["output"]["properties"]["id"]["x-charming-record"] = "expenses"
    definition["routes"]["add_expense"]["input"]["properties"]["category"]["x-charming-label"] = "title"
    problems = hint_problems(definition)
    assert {
        "path": "$.routes.add_expense.output.properties.id.x-charming-record",
        "message": "is read on input schemas only",
    } in problems
    assert {
        "path": "$.routes.add_expense.input.properties.category.x-charming-label",
        "message": "is read only beside x-charming-record",
    } in problems


@pytest.mark.django_db
def test_a_hidden_collection_is_checked_when_saved(user):
    definition = spending()
    definition["collections"]["expense_tags"] = {"hidden": "yes"}
    with pytest.raises(InvalidDefinition) as exc:
        app_definition_save(actor=user, definition=definition)
    assert exc.value.errors == [
        {"path": "collections.expense_tags.hidden", "message": "must be true or false, got 'yes'"}
    ]
    app = app_definition_save(actor=user, definition=spending())
    assert app.collections["expense_tags"] == {"hidden": True}
