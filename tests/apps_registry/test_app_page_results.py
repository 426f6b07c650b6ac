"""The app page's renderers: every result shape drawn for a reader (tables, nested tables and fields, money,
dates, ticks, ids left out, paging), charts as SVG, people's words, and what the page reads from steps."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from apps_registry.models import Route
from apps_registry.pages.actions import field_order, is_destructive, record_params, shown_collections
from apps_registry.pages.charts import chart_view, nice_step
from apps_registry.pages.results import ROWS_PER_PAGE, cell, number_text, result_view, row_label
from apps_registry.pages.schema_forms import schema_form
from apps_registry.pages.words import friendly_error, people_text
from tests.apps_registry.page_apps import EUR, SPENDING
from tests.apps_registry.route_helpers import example

REPORT = {
    "month": "2026-11",
    "total": 824.7,
    "categories": [{"category": "rent", "total": 700, "n": 1}, {"category": "food", "total": 60.7, "n": 2}],
    "expenses": [
        {
            "id": "4f0c2b1e-8a7d-4c55-9b7e-0d2f3e4a5b6c",
            "day": "2026-11-03",
            "amount": 42.5,
            "paid": True,
            "tags": ["market", "weekly"],
            "split": [{"who": "me", "share": 0.5}, {"who": "sam", "share": 0.5}],
            "place": {"city": "Lyon", "country": "FR"},
        }
    ],
}
REPORT_SCHEMA = SPENDING["routes"]["month_report"]["output"]


def test_numbers_money_and_units_are_formatted_for_a_reader():
    assert number_text(1234.5) == ("number", "1,234.50")
    assert number_text(1234) == ("number", "1,234")
    assert number_text(12.0) == ("number", "12")
    assert number_text(-5.25, EUR) == ("money", "−€5.25")
    assert number_text(700, EUR) == ("money", "€700.00")
    assert number_text(1500, {"x-charming-unit": "JPY"}) == ("money", "¥1,500")
    assert number_text(12.5, {"x-charming-unit": "SEK"}) == ("money", "12.50 SEK")
    assert number_text(3.5, {"x-charming-unit": "kg"}) == ("number", "3.50 kg")
    assert number_text(50, {"x-charming-unit": "%"}) == ("number", "50%")
    assert number_text(25_000, EUR, compact=True) == ("money", "€25k")
    assert number_text(500.0, EUR, compact=True) == ("money", "€500")


def test_dates_times_months_booleans_and_ids_read_as_such():
    assert cell("2026-11-03").text == "3 Nov 2026"
    assert cell("2026-11-03T08:30:00Z").text == "3 Nov 2026, 08:30"
    assert cell("2026-11-03", {"format": "date"}).iso == "2026-11-03"
    assert cell("2026-11").text == "Nov 2026" and cell("2026-11").kind == "month"
    assert cell("2026-13").kind == "text"
    assert (cell(True).kind, cell(True).text) == ("bool", "Yes")
    uuid_cell = cell("4f0c2b1e-8a7d-4c55-9b7e-0d2f3e4a5b6c")
    assert (uuid_cell.kind, uuid_cell.text, uuid_cell.iso) == (
        "id",
        "4f0c2b1e…",
        "4f0c2b1e-8a7d-4c55-9b7e-0d2f3e4a5b6c",
    )
    assert cell(["a", "b"]).text == "a, b"
    assert cell([]).text == "none"


def test_a_report_is_fields_with_its_lists_as_tables_and_nested_values_inside_rows():
    view = result_view(REPORT, REPORT_SCHEMA)
    assert view.shape == "fields"
    labels = [label for label, _cell in view.items]
    assert labels == ["Month", "Total", "Categories", "Expenses"]
    total = dict(view.items)["Total"]
    assert (total.kind, total.text) == ("money", "€824.70")
    categories = dict(view.items)["Categories"].nested
    assert categories.shape == "table"
    assert [c.text for c in categories.rows[0].cells] == ["rent", "€700.00", "1"]
    expenses = dict(view.items)["Expenses"].nested
    assert [c.key for c in expenses.columns] == ["day", "category", "amount", "paid", "tags", "split"]  # no id
    row = expenses.rows[0]
    assert row.id == "4f0c2b1e-8a7d-4c55-9b7e-0d2f3e4a5b6c"
    by_key = {c.label: c for c in row.cells}
    assert by_key["Tags"].text == "market, weekly"
    assert by_key["Paid"].kind == "bool"
    split = by_key["Split"]
    assert split.kind == "nested" and split.text == "2 items" and split.nested.shape == "table"
    assert [c.text for c in split.nested.rows[1].cells] == ["sam", "0.50"]
    assert '"categories"' in view.json  # the JSON, for "Show JSON" only


def test_an_undeclared_nested_object_is_labelled_fields_and_deep_values_are_summarized():
    view = result_view([{"name": "x", "place": {"city": "Lyon"}, "deep": {"a": {"b": {"c": {"d": [1]}}}}}], None)
    place = next(c for c in view.rows[0].cells if c.label == "Place")
    assert place.kind == "nested" and place.nested.items[0][0] == "City"
    deep = next(c for c in view.rows[0].cells if c.label == "Deep")
    text = render_to_string("apps/_cell.html", {"cell": deep, "wide": False})
    assert "see Show JSON" in text and "{" not in re.sub(r"<[^>]+>", "", text)


def test_no_template_prints_json_for_any_shape():
    shapes = [REPORT, [REPORT, REPORT], [[1, 2], [3]], {"a": [{"b": [{"c": 1}]}]}, [{"x": {"y": [1, {"z": 2}]}}], 5]
    for value in shapes:
        html = render_to_string("apps/_view.html", {"view": result_view(value, None), "caption": "v", "place": "p"})
        shown = re.sub(r"<[^>]+>", " ", html)
        assert not re.search(r'"\w+"\s*:|\{\s*"', shown), (value, shown)


def test_tables_leave_ids_out_unless_the_columns_name_them():
    rows = [{"id": "t1", "todo_id": "t0", "title": "Milk"}]
    assert [c.key for c in result_view(rows, None).columns] == ["title"]
    assert [c.key for c in result_view(rows, None, columns=(("id", ""), ("title", ""))).columns] == ["id", "title"]
    assert [c.key for c in result_view([{"id": "only"}], None).columns] == ["id"]  # nothing else to show
    assert [label for label, _c in result_view({"id": "x", "remaining": 5}, None).items] == ["Remaining"]


def test_a_long_table_is_paged_and_a_nested_one_cut():
    rows = [{"n": i} for i in range(60)]
    first = result_view(rows, None, page=1)
    assert (len(first.rows), first.page, first.pages, first.total) == (ROWS_PER_PAGE, 1, 3, 60)
    last = result_view(rows, None, page=9)
    assert last.page == 3 and [r.cells[0].text for r in last.rows] == [str(i) for i in range(50, 60)]
    nested = cell(rows)
    assert nested.nested.more == 10 and len(nested.nested.rows) == 50


def test_row_label_names_a_row_by_its_title_or_first_text():
    assert row_label({"id": "1", "title": "Buy milk"}) == "Buy milk"
    assert row_label({"id": "1", "amount": 3, "category": "food"}) == "food"
    assert row_label({"id": "4f0c2b1e-8a7d-4c55-9b7e-0d2f3e4a5b6c", "n": 2}) == ""


def test_a_bar_chart_has_its_bars_axes_and_table():
    rows = [
        {"month": "2026-09", "total": 712},
        {"month": "2026-10", "total": 755.75},
        {"month": "2026-11", "total": -20},
    ]
    schema = SPENDING["routes"]["by_month"]["output"]
    view = chart_view(rows, schema, {"type": "bar", "x": "month", "y": "total"})
    assert view is not None and view.shape == "chart"
    chart = view.chart
    assert chart.caption == "Total by month (bar chart)"
    assert [t.text for t in chart.x_ticks] == ["Sep 26", "Oct 26", "Nov 26"]
    assert chart.y_ticks[0].text == "−€200" and chart.y_ticks[-1].text == "€800"
    assert chart.left == 12 + 8 * len("−€200")  # room for the widest figure
    bars = chart.series[0].bars
    assert len(bars) == 3 and bars[0].title == "Sep 2026: €712.00"
    assert bars[2].y == pytest.approx(chart.baseline)  # a negative bar hangs below the zero line
    assert bars[0].y + bars[0].height == pytest.approx(chart.baseline)
    assert [c.text for c in view.table.rows[1].cells] == ["Oct 2026", "€755.75"]


def test_a_line_chart_draws_one_line_per_key_and_ignores_non_numbers():
    rows = [
        {"d": "2026-11-01", "a": 1, "b": 2},
        {"d": "2026-11-02", "a": None, "b": 3},
        {"d": "2026-11-03", "a": 4, "b": 1},
    ]
    view = chart_view(rows, {}, {"type": "line", "x": "d", "y": ["a", "b"]})
    assert [len(s.points) for s in view.chart.series] == [2, 3]
    assert view.chart.series[0].polyline.count(",") == 2
    html = render_to_string("apps/_chart.html", {"chart": view.chart, "table": view.table, "place": "view-x"})
    assert html.count("<polyline") == 2 and 'role="img"' in html and 'aria-labelledby="view-x-chart-caption"' in html
    assert "<script" not in html and "style=" not in html


def test_a_chart_of_a_value_without_rows_falls_back_to_the_usual_view():
    assert chart_view({"total": 5}, {}, {"type": "bar", "x": "a", "y": "b"}) is None
    assert result_view({"total": 5}, None, view="chart", chart={"type": "bar", "x": "a", "y": "b"}).shape == "fields"


def test_many_x_labels_are_thinned_to_fit():
    rows = [{"day": f"2026-11-{d:02d}", "n": d} for d in range(1, 31)]
    chart = chart_view(rows, {}, {"type": "bar", "x": "day", "y": "n"}).chart
    assert 2 <= len(chart.x_ticks) <= 8
    assert nice_step(824.7) == 200 and nice_step(0.9) == 0.2


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("-5.0 is less than or equal to the minimum of 0", "Must be more than 0."),
        ("0 is less than the minimum of 1", "Must be at least 1."),
        ("500 is greater than the maximum of 100", "Must be at most 100."),
        ("5 is greater than or equal to the maximum of 5.5", "Must be less than 5.5."),
        ('"abcd" is longer than 3 characters', "Must be at most 3 characters long."),
        ('"" is shorter than 1 character', "Must not be empty."),
        ('"z" is not one of "x" or "y"', "Choose one of the options."),
        ('"yesterday" is not a "date"', "Enter a date, like 2026-12-01."),
        ('"b" does not match "^a+$"', "Is not in the expected form."),
        ('"x" is not of type "number"', "Enter a number."),
        ('"h" is a required property', "This field is required."),
        ("0.3 is not a multiple of 0.5", "Must be a multiple of 0.5."),
        ("something else", "Something else"),
    ],
)
def test_schema_messages_are_rewritten_for_people(message, words):
    assert friendly_error(message) == words


def test_people_text_drops_backticks_agent_sentences_and_names_routes_by_their_titles():
    titles = {"set_budget": "Set budget", "list_expenses": "Expenses"}
    assert people_text("Expenses of at least `min`, largest first.") == "Expenses of at least min, largest first."
    assert (
        people_text("Expenses, newest first, a page at a time: pass next_cursor back as cursor for the next page.")
        == "Expenses, newest first, a page at a time."
    )
    assert people_text("Call set_budget first.", titles) == "Call “Set budget” first."
    assert people_text("Use `list_expenses` to see them.", titles) == "Use “Expenses” to see them."
    assert people_text("Query it with query_app.") == ""
    assert people_text("Pass cursor back.", agent_only=False) == "Pass cursor back."


def _route(raw: dict, name: str = "r") -> Route:
    body = {"handler": raw["handler"]} if "handler" in raw else {"steps": raw.get("steps", [])}
    return Route(name=name, kind=raw["kind"], definition=body, input_schema=raw.get("input", {}))


def test_the_page_reads_record_params_and_deletes_from_the_steps():
    todo = example("todo")["routes"]
    assert record_params(_route(todo["complete_todo"])) == {"id": "todos"}
    assert record_params(_route(todo["add_todo"])) == {}
    assert is_destructive(_route(todo["delete_todo"])) and not is_destructive(_route(todo["rename_todo"]))
    budget = example("budget")["routes"]
    assert record_params(_route(budget["set_budget"])) == {}  # an upsert (and a get with a default) may create
    assert record_params(_route(budget["delete_expense"])) == {"id": "expenses"}
    legacy = {"kind": "mutation", "handler": {"action": "delete", "collection": "notes"}}
    assert record_params(_route(legacy)) == {"id": "notes"} and is_destructive(_route(legacy))
    looped = {"kind": "mutation", "steps": [{"for_each": {"in": "params.ids", "as": "i", "steps": [
        {"delete": {"collection": "notes", "id": "i"}}]}}]}  # fmt: skip
    assert is_destructive(_route(looped)) and record_params(_route(looped)) == {}
    assert shown_collections(_route(todo["open_todos"])) == {"todos"}
    assert shown_collections(_route(todo["progress"])) == set()
    routes = [_route(todo["add_todo"]), _route(todo["open_todos"])]
    routes[0].schemas_text = ""
    assert field_order(routes)[:2] == ["title", "priority"]


def test_a_record_param_is_a_picker_named_after_its_collection():
    form = schema_form(example("todo")["routes"]["rename_todo"]["input"], records={"id": "todos"})
    picker = form.fields[0]
    assert (picker.widget, picker.collection, picker.label) == ("record", "todos", "Todo")
    annotated = schema_form(SPENDING["routes"]["forget_expense"]["input"])
    field = annotated.fields[0]
    assert (field.widget, field.collection, field.label_field, field.label) == (
        "record",
        "expenses",
        "category",
        "Expense",
    )


def test_a_number_input_with_a_unit_says_it_in_its_label():
    form = schema_form(SPENDING["routes"]["add_expense"]["input"])
    assert form.fields[0].label == "Amount (€)"
    assert (
        schema_form({"type": "object", "properties": {"w": {"type": "number", "x-charming-unit": "kg"}}})
        .fields[0]
        .label
        == "W (kg)"
    )
