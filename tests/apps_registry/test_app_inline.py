"""The app as open_app shows it (apps_registry/pages/inline.py): the page's own panels as HTML, escaped as on the
page, no forms for viewers, and a view's typed params drawn back into its filter form (the inverse of form_parse)."""

from __future__ import annotations

import pytest

from apps_registry.access import membership_set
from apps_registry.exceptions import NotFound, UnknownOp
from apps_registry.models import Role
from apps_registry.pages.inline import app_inline, params_as_filters
from apps_registry.pages.schema_forms import form_parse, schema_form
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.route_helpers import example, run

pytestmark = pytest.mark.django_db

FILTERS = {
    "type": "object",
    "properties": {
        "category": {"type": "string"},
        "min": {"type": "number"},
        "limit": {"type": "integer"},
        "paid": {"type": "boolean"},
        "size": {"enum": [1, 2, 3]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "when": {"type": "object", "properties": {"from": {"type": "string", "format": "date"}}},
    },
    "additionalProperties": False,
}


@pytest.fixture
def budget(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 300})
    run(user, app, "add_expense", {"amount": 9, "category": "food", "note": "<img src=x onerror=alert(1)>"})
    return app


def test_the_inline_app_is_the_pages_panels_escaped_and_without_scripts(user, budget):
    shown = app_inline(actor=user, app_id=budget.id)

    assert shown.view == "summary" and shown.data["spent"] == 9
    assert 'id="action-add_expense"' in shown.html and 'data-op="add_expense"' in shown.html
    assert 'id="view-list_expenses"' in shown.html and 'id="recent-expenses"' in shown.html
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown.html and "<img" not in shown.html
    assert "<script" not in shown.html


def test_a_viewer_sees_the_views_but_no_forms_or_row_buttons(user, other_user, budget):
    membership_set(actor=user, app=budget, user=other_user, role=Role.VIEWER)

    shown = app_inline(actor=other_user, app_id=budget.id)

    assert shown.role == "viewer" and shown.data["spent"] == 9
    assert "data-op=" not in shown.html and "row-form" not in shown.html
    assert "you can see its data but not change it" in shown.html


def test_another_users_app_is_not_found_and_an_unknown_view_names_the_views(user, other_user, budget):
    with pytest.raises(NotFound):
        app_inline(actor=other_user, app_id=budget.id)
    with pytest.raises(UnknownOp) as refused:
        app_inline(actor=user, app_id=budget.id, view="nope")
    assert refused.value.message == (
        "This app has no view (query route) named 'nope'. Its views: big_expenses, list_expenses, summary."
    )


@pytest.mark.parametrize(
    "params",
    [
        {"category": "food"},
        {"min": 12.5, "limit": 3},
        {"paid": True, "size": 2},
        {"tags": ["a b", "c"], "when": {"from": "2026-12-01"}},
        {},
    ],
)
def test_typed_params_are_drawn_back_into_the_filter_form_as_they_parse(params):
    class FakeRoute:  # params_as_filters reads only the route's name and schemas
        name = "find"
        input_schema_ordered = FILTERS
        output_schema_ordered = {"type": "array"}
        definition: dict = {}

    query = params_as_filters(FakeRoute(), params)  # type: ignore[arg-type]
    form = form_parse(schema_form(FILTERS, id_prefix="q-find", prefix="find."), query)

    assert not form.has_errors
    assert form.params == params
