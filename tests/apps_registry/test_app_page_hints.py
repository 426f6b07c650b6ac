"""Presentation hints: checked and stored when an app is saved, and applied by the app page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps_registry.exceptions import InvalidDefinition
from apps_registry.models import Route
from apps_registry.pages.hints import RouteHints, hint_problems, hints_from
from apps_registry.pages.schema_forms import result_view
from apps_registry.services.definitions import app_definition_export, app_definition_save
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
    assert Route.objects.get(app=app, name="add_expense").hints == {}  # the example gives it none
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
