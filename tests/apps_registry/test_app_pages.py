"""The app page through Django's test client: views, generated forms, errors at fields, access, export, delete."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from apps_registry.access import membership_set
from apps_registry.models import App, AuditEvent, Feedback, FeedbackResponse, Record, Storage
from apps_registry.services.definitions import app_definition_save, definition_save
from tests.apps_registry.route_helpers import example, run
from tests.factories import AdvisoryFactory, UserFactory

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def unmasked(response) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())


def card(html: str, place: str) -> str:
    """One card of the app page (a view's or an action's article), by its anchor."""
    found = re.search(rf'<article class="card [a-z ]+" id="{place}".*?</article>', html, re.DOTALL)
    assert found is not None, place
    return found.group(0)


@pytest.fixture
def budget(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 500})
    return app


@pytest.fixture
def owner_client(client, user):
    client.force_login(user)
    return client


def page_url(app) -> str:
    return reverse("app_page", args=[app.id])


def submit_url(app, op: str) -> str:
    return reverse("app_route_submit", args=[app.id, op])


def test_app_page_shows_queries_as_views_and_mutations_as_forms(owner_client, user, budget):
    run(user, budget, "add_expense", {"amount": 12.5, "category": "food"})
    response = owner_client.get(page_url(budget))
    assert response.status_code == 200
    body = text(response)
    assert "<h1>Budget" in body
    # summary: an object as labelled fields, numbers right-aligned
    assert re.search(r"<dt>Remaining</dt><dd class=\"num\">487.50</dd>", body)
    # list_expenses needs a category: a filter form, not yet run
    assert 'name="list_expenses.category"' in body
    assert "Fill in the filter" in body
    # add_expense: a generated form with the amount as a number input and the note as a text area
    assert re.search(r'<input type="number" id="m-add_expense-amount" name="amount" value="" required step="any"', body)
    assert 'id="m-add_expense-note" name="note" rows="3" maxlength="500"' in body
    assert "(optional)" in body
    assert 'name="csrfmiddlewaretoken"' in body


def test_query_filter_runs_the_query_and_shows_a_table_with_dates(owner_client, user, budget):
    run(user, budget, "add_expense", {"amount": 7, "category": "food", "note": "lunch"})
    run(user, budget, "add_expense", {"amount": 3, "category": "travel"})
    body = card(text(owner_client.get(page_url(budget), {"list_expenses.category": "food"})), "view-list_expenses")
    header = re.search(r'<div class="table-wrap"[^>]*aria-label="List expenses">.*?</thead>', body).group(0)
    assert re.findall(r"<th scope=\"col\"[^>]*>([^<]+)</th>", header) == [  # ids are left out
        "Amount",
        "Category",
        "Note",
        "At",
    ]
    assert (
        '<td data-label="Amount" class="num">7</td><td data-label="Category">food</td>'
        '<td data-label="Note">lunch</td><td data-label="At"><time datetime="'
    ) in body
    assert "travel</td>" not in body


def test_query_filter_errors_are_shown_at_the_filter_field(owner_client, budget):
    body = text(owner_client.get(page_url(budget), {"list_expenses.category": "food", "list_expenses.limit": "500"}))
    assert 'id="q-list_expenses-limit-errors"' in body
    assert 'aria-describedby="q-list_expenses-limit-errors"' in body


def test_mutation_redirects_back_and_the_views_refresh(owner_client, budget):
    response = owner_client.post(submit_url(budget, "add_expense"), {"amount": "20", "category": "food", "note": ""})
    assert response.status_code == 302
    assert response["Location"] == page_url(budget) + "#action-add_expense"
    body = text(owner_client.get(response["Location"]))
    assert "Add expense: done." in card(body, "action-add_expense")
    assert re.search(r"<dt>Spent</dt><dd class=\"num\">20</dd>", body)
    assert Record.objects.filter(collection="expenses", storage__app=budget).count() == 1


def test_mutation_keeps_the_page_filters_when_it_redirects(owner_client, budget):
    response = owner_client.post(
        submit_url(budget, "add_expense"), {"amount": "2", "category": "food", "_back": "list_expenses.category=food"}
    )
    assert response["Location"] == page_url(budget) + "?list_expenses.category=food#action-add_expense"


def test_invalid_input_is_shown_at_the_field_its_path_names(owner_client, budget):
    response = owner_client.post(submit_url(budget, "add_expense"), {"amount": "5", "category": "x" * 51})
    assert response.status_code == 400
    body = text(response)
    assert re.search(
        r'id="m-add_expense-category"[^>]*aria-describedby="m-add_expense-category-errors" aria-invalid="true"', body
    )
    assert (
        '<ul class="field-errors" id="m-add_expense-category-errors"><li>Must be at most 50 characters long.</li>'
        in body
    )
    assert 'value="5"' in body  # what was typed is kept


def test_missing_required_value_is_shown_at_that_field(owner_client, budget):
    body = text(owner_client.post(submit_url(budget, "add_expense"), {"amount": "5", "category": ""}))
    assert '<ul class="field-errors" id="m-add_expense-category-errors"><li>This field is required.</li>' in body


def test_text_that_is_not_a_number_is_refused_at_the_field(owner_client, budget):
    response = owner_client.post(submit_url(budget, "add_expense"), {"amount": "abc", "category": "food"})
    assert response.status_code == 400
    assert "Enter a number, not “abc”." in text(response)
    assert not Record.objects.filter(collection="expenses").exists()


def test_handler_error_is_shown_with_its_message_at_the_field_its_details_name(owner_client, budget):
    response = owner_client.post(submit_url(budget, "add_expense"), {"amount": "-5", "category": "food"})
    assert response.status_code == 422
    assert '<ul class="field-errors" id="m-add_expense-amount-errors"><li>amount must be positive</li>' in text(
        response
    )


def test_handler_error_without_a_field_is_shown_above_the_form(owner_client, user):
    app = app_definition_save(actor=user, definition=example("budget"))
    body = text(owner_client.post(submit_url(app, "add_expense"), {"amount": "5", "category": "food"}))
    # the route's name in the author's message is given as the title the page shows
    assert '<div class="errors" role="alert"><p>No budget is set yet: call “Set budget” first.</p></div>' in body


def test_htmx_post_with_errors_answers_200_for_the_swap(owner_client, budget):
    response = owner_client.post(
        submit_url(budget, "add_expense"), {"amount": "-5", "category": "food"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    assert "amount must be positive" in text(response)


def test_another_users_app_is_a_404_identical_to_a_missing_one(client, other_user, budget):
    client.force_login(other_user)
    hidden = client.get(page_url(budget))
    missing = client.get(reverse("app_page", args=["00000000-0000-0000-0000-000000000000"]))
    assert hidden.status_code == missing.status_code == 404
    # the same styled page, byte for byte but for the (randomly masked) CSRF token of the log-out button
    assert unmasked(hidden) == unmasked(missing)
    assert "Page not found" in text(hidden)
    for name in ("app_export_json", "app_export_csv", "app_delete", "app_feedback"):
        assert client.get(reverse(name, args=[budget.id])).status_code in (404, 405)
    assert client.post(submit_url(budget, "add_expense"), {"amount": "1", "category": "x"}).status_code == 404
    assert client.get(reverse("app_records", args=[budget.id, "expenses"])).status_code == 404


def test_signed_out_visitor_is_sent_to_log_in(client, budget):
    response = client.get(page_url(budget))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_viewer_sees_views_but_no_forms_and_a_forged_post_is_refused(client, user, budget):
    viewer = UserFactory(username="vera")
    membership_set(actor=user, app=budget, user=viewer, role="viewer")
    client.force_login(viewer)
    body = text(client.get(page_url(budget)))
    assert "<dt>Limit</dt>" in body
    assert "m-add_expense-amount" not in body
    assert 'action="/apps/' not in body.replace(f'action="{page_url(budget)}', "").replace(
        f'action="{reverse("app_feedback", args=[budget.id])}', ""
    ).replace(f'action="{reverse("logout")}', "")
    assert "you can see its data but not change it" in body
    response = client.post(submit_url(budget, "add_expense"), {"amount": "5", "category": "food"})
    assert response.status_code == 403
    assert "You are a viewer of app &#x27;Budget&#x27;; viewers may only query and read it." in text(response)
    assert not Record.objects.filter(collection="expenses").exists()
    assert client.get(reverse("app_delete", args=[budget.id])).status_code == 403


def test_editor_may_mutate_but_not_delete(client, user, budget):
    editor = UserFactory(username="ed")
    membership_set(actor=user, app=budget, user=editor, role="editor")
    client.force_login(editor)
    assert "m-add_expense-amount" in text(client.get(page_url(budget)))
    assert "Delete this app" not in text(client.get(page_url(budget)))
    assert client.post(submit_url(budget, "add_expense"), {"amount": "5", "category": "food"}).status_code == 302
    assert client.post(reverse("app_delete", args=[budget.id])).status_code == 403
    assert App.objects.filter(pk=budget.pk).exists()


def test_posting_to_a_query_or_an_unknown_route_is_refused(owner_client, budget):
    assert owner_client.post(submit_url(budget, "nope"), {}).status_code == 404
    assert owner_client.post(submit_url(budget, "summary"), {}).status_code == 404


def test_mutation_post_without_csrf_is_refused(user, budget):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(submit_url(budget, "add_expense"), {"amount": "5", "category": "food"}).status_code == 403


def test_advisories_with_a_user_summary_and_feedback_answers_are_shown(owner_client, user, budget, staff):
    AdvisoryFactory(app=budget, user_summary="This app will move to a new format soon.")
    AdvisoryFactory(app=budget, user_summary="", summary="agent only")
    feedback = Feedback.objects.create(app=budget, author=user, body="Please add charts")
    FeedbackResponse.objects.create(feedback=feedback, staff_author=staff, body="Charts are planned.")
    body = text(owner_client.get(page_url(budget)))
    assert "This app will move to a new format soon." in body
    assert "agent only" not in body
    assert "Please add charts" in body
    assert "Charts are planned." in body


def test_feedback_form_sends_feedback_and_shows_errors_at_the_field(owner_client, user, budget):
    response = owner_client.post(reverse("app_feedback", args=[budget.id]), {"body": "   "})
    assert response.status_code == 400
    assert 'aria-describedby="feedback-body-errors"' in text(response)
    response = owner_client.post(reverse("app_feedback", args=[budget.id]), {"body": "Lovely app"})
    assert response.status_code == 302
    assert Feedback.objects.get(app=budget).body == "Lovely app"


def test_records_browser_paginates_and_searches_by_id(owner_client, user, budget):
    for i in range(30):
        run(user, budget, "add_expense", {"amount": i + 1, "category": "c"})
    page1 = text(owner_client.get(reverse("app_records", args=[budget.id, "expenses"])))
    assert "Page 1 of 2" in page1
    assert page1.count('<tr><td data-label="Id"><code>') == 25
    some_id = Record.objects.filter(collection="expenses").order_by("record_id").last().record_id
    found = text(owner_client.get(reverse("app_records", args=[budget.id, "expenses"]), {"q": some_id}))
    assert found.count('<tr><td data-label="Id"><code>') == 1
    assert owner_client.get(reverse("app_records", args=[budget.id, "nope"])).status_code == 404


def test_export_json_and_csv_hold_every_record(owner_client, user, budget):
    run(user, budget, "add_expense", {"amount": 5, "category": "=cmd|' /C calc'!A0"})
    response = owner_client.get(reverse("app_export_json", args=[budget.id]))
    assert response["Content-Disposition"] == 'attachment; filename="budget-records.json"'
    document = json.loads(response.content)
    assert [e["amount"] for e in document["collections"]["expenses"]] == [5.0]
    assert document["collections"]["budgets"][0]["id"] == "current"
    response = owner_client.get(reverse("app_export_csv", args=[budget.id]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    expense = next(r for r in rows if r["collection"] == "expenses")
    assert expense["amount"] == "5.0"
    assert expense["category"].startswith("'=")  # a spreadsheet keeps it as text


def test_csv_export_neutralises_formula_like_field_names_in_its_header(owner_client, budget):
    storage = Storage.objects.get(app=budget)
    Record.objects.create(storage=storage, collection="notes", record_id="n1", data={'=HYPERLINK("x")': 1, "@x": 2})
    response = owner_client.get(reverse("app_export_csv", args=[budget.id]))
    header = next(csv.reader(io.StringIO(response.content.decode())))
    assert '\'=HYPERLINK("x")' in header and "'@x" in header
    assert not any(cell.startswith(("=", "@", "+", "-")) for cell in header)


def test_viewer_may_export(client, user, budget):
    viewer = UserFactory(username="vera")
    membership_set(actor=user, app=budget, user=viewer, role="viewer")
    client.force_login(viewer)
    assert client.get(reverse("app_export_json", args=[budget.id])).status_code == 200


def test_delete_confirmation_names_the_app_and_the_retention(owner_client, user, budget, settings):
    settings.CHARMING_STORAGE_RETENTION_DAYS = 30
    body = text(owner_client.get(reverse("app_delete", args=[budget.id])))
    assert "Delete “Budget”?" in body
    assert "kept for <strong>30 days</strong>" in body
    response = owner_client.post(reverse("app_delete", args=[budget.id]), {"confirm": "yes"})
    assert response.status_code == 302
    assert not App.objects.filter(pk=budget.pk).exists()
    assert Storage.objects.get(app_uuid=budget.id).detached_at is not None
    event = AuditEvent.objects.get(action="app.delete", app_id=budget.id)
    assert event.details["confirmed_via"] == "web"
    assert "kept for 30 days" in text(owner_client.get(reverse("home")))


def test_delete_with_purge_erases_the_records(owner_client, budget):
    owner_client.post(reverse("app_delete", args=[budget.id]), {"confirm": "yes", "purge_storage": "on"})
    assert not Storage.objects.filter(app_uuid=budget.id).exists()


def test_home_links_each_app_to_its_page(owner_client, budget):
    assert f'href="{page_url(budget)}"' in text(owner_client.get(reverse("home")))


def test_a_filter_form_keeps_the_other_views_filters(owner_client, budget):
    body = text(owner_client.get(page_url(budget), {"list_expenses.category": "food", "summary.category": "x"}))
    summary_form = re.search(r'<article class="card view" id="view-summary".*?</form>', body).group(0)
    assert '<input type="hidden" name="list_expenses.category" value="food">' in summary_form
    assert 'type="hidden" name="summary.category"' not in summary_form


def test_the_first_field_in_error_takes_the_focus(owner_client, budget):
    body = text(owner_client.post(submit_url(budget, "add_expense"), {"amount": "-5", "category": "food"}))
    assert re.search(r'id="m-add_expense-amount"[^>]*aria-invalid="true" autofocus>', body)


def test_home_shows_each_apps_last_change_and_its_notes(owner_client, budget):
    AdvisoryFactory(app=budget, user_summary="A note for you.")
    AdvisoryFactory(app=budget, user_summary="")
    body = text(owner_client.get(reverse("home")))
    assert re.search(r"Changed <time datetime=\"[^\"]+\">[^<]+</time> · <span class=\"notes\">1 note</span>", body)


def test_the_owner_sees_the_definition_history_and_members_do_not(client, user, budget):
    edited = example("budget")
    edited["description"] = "Monthly spending, by category"
    definition_save(actor=user, definition=edited, app_id=budget.id, expected_version=1)
    client.force_login(user)
    history = re.search(r'<section class="card" id="history".*?</section>', text(client.get(page_url(budget))))
    assert history is not None
    rows = re.findall(r'<td data-label="Version" class="num">(\d+)</td>', history.group(0))
    assert rows == ["2", "1"]
    assert user.get_username() in history.group(0)
    viewer = UserFactory(username="vic")
    membership_set(actor=user, app=budget, user=viewer, role="viewer")
    client.force_login(viewer)
    assert 'id="history"' not in text(client.get(page_url(budget)))


PAGED = {
    "kind": "query",
    "title": "Expenses",
    "input": {
        "type": "object",
        "properties": {"cursor": {"type": ["string", "null"]}, "size": {"type": "integer", "minimum": 1}},
        "additionalProperties": False,
    },
    "output": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"what": {"type": "string"}}}},
            "next_cursor": {"type": ["string", "null"]},
            "truncated": {"type": "boolean"},
        },
        "required": ["items", "next_cursor"],
    },
    "steps": [
        {
            "find": {
                "collection": "expenses",
                "order_by": "what",
                "limit": "has(params.size) ? params.size : 2",
                "cursor": "has(params.cursor) ? params.cursor : null",
            },
            "as": "page",
        },
        {"return": "page"},
    ],
}


@pytest.fixture
def paged(user):
    add = {
        "kind": "mutation",
        "input": {"type": "object"},
        "steps": [{"insert": {"collection": "expenses", "value": "params"}}],
    }
    app = app_definition_save(
        actor=user,
        definition={"name": "Paged", "collections": {"expenses": {}}, "routes": {"list": PAGED, "add": add}},
    )
    for what in ("apples", "bread", "cheese", "dates", "eggs"):
        run(user, app, "add", {"what": what})
    return app


def _links(html: str) -> dict[str, str]:
    return {
        label: href.replace("&amp;", "&")
        for href, label in re.findall(r'<a href="([^"]+)"[^>]*>(Next page|First page)</a>', html)
    }


def test_a_paged_view_shows_a_page_as_a_table_with_a_next_page_link_not_a_cursor_box(owner_client, paged):
    first = card(text(owner_client.get(page_url(paged))), "view-list")

    assert 'name="list.cursor"' not in first
    assert "apples" in first and "bread" in first and "cheese" not in first
    links = _links(owner_client.get(page_url(paged)).content.decode())
    assert set(links) == {"Next page"}

    second = card(owner_client.get(links["Next page"]).content.decode(), "view-list")
    assert "cheese" in second and "dates" in second and "apples" not in second
    assert set(_links(second)) == {"Next page", "First page"}

    last = card(owner_client.get(_links(second)["Next page"]).content.decode(), "view-list")
    assert "eggs" in last and "dates" not in last
    assert set(_links(last)) == {"First page"}
    assert "apples" in owner_client.get(_links(last)["First page"]).content.decode()


def test_a_paged_view_keeps_its_filter_and_refuses_an_altered_cursor_in_words(owner_client, paged):
    page = card(owner_client.get(page_url(paged), {"list.size": "4"}).content.decode(), "view-list")
    assert "dates" in page and "eggs" not in page
    assert "list.size=4" in _links(page)["Next page"]

    refused = text(owner_client.get(page_url(paged), {"list.cursor": "not-a-cursor"}))

    # the agents' words ("... not valid for this query ... Start again without a cursor") are not a person's
    assert "This page link no longer works: start again from the first page." in refused
    assert "First page" in _links(refused)


def test_collections_named_like_dict_methods_are_listed_not_a_500(owner_client, user):
    # A template's `collections.items` found the collection named "items" (its count) instead of the dict's method.
    names = ["items", "keys", "values"]
    definition = {
        "name": "Lists",
        "collections": {name: {} for name in names},
        "routes": {
            "add": {
                "kind": "mutation",
                "input": {"type": "object", "properties": {"to": {"type": "string"}}},
                "steps": [{"insert": {"collection": "items", "value": "{'n': 1}"}}, {"return": "1"}],
            }
        },
    }
    app = app_definition_save(actor=user, definition=definition)
    run(user, app, "add", {"to": "items"})
    response = owner_client.get(page_url(app))
    assert response.status_code == 200
    for name in names:
        assert f'href="{reverse("app_records", args=[app.id, name])}"' in response.content.decode()
        records = owner_client.get(reverse("app_records", args=[app.id, name]))
        assert records.status_code == 200, name
    assert "1 record" in text(owner_client.get(page_url(app)))
    # A refused invitation renders the app page again, with its error and the collections.
    invite = owner_client.post(reverse("app_member_invite", args=[app.id]), {"user": "nobody-here", "role": "viewer"})
    assert invite.status_code == 400
    assert f'href="{reverse("app_records", args=[app.id, "keys"])}"' in invite.content.decode()
