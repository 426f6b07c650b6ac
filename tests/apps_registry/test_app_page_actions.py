"""The app page through Django's test client: row actions and their results in place, pickers, errors that
keep the filters, recently added records, long tables paged, words for people and the styled error pages."""

from __future__ import annotations

import re

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse
from django.views.defaults import permission_denied, server_error

from apps_registry.models import Record
from apps_registry.pages import app_views
from apps_registry.services.definitions import app_definition_save
from tests.apps_registry.page_apps import SPENDING, SPENDING_EXPENSES
from tests.apps_registry.route_helpers import example, run
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def card(html: str, place: str) -> str:
    found = re.search(rf'<(article|section) class="[a-z -]+" id="{place}".*?</\1>', html, re.DOTALL)
    assert found is not None, place
    return found.group(0)


@pytest.fixture
def todo(user):
    app = app_definition_save(actor=user, definition=example("todo"))
    for title in ("Buy milk", "Call mum"):
        run(user, app, "add_todo", {"title": title})
    return app


@pytest.fixture
def budget(user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 100})
    for amount, category in ((5, "food"), (7, "travel")):
        run(user, app, "add_expense", {"amount": amount, "category": category})
    return app


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def todo_id(title: str) -> str:
    return Record.objects.get(collection="todos", data__title=title).record_id


def test_each_row_of_a_view_gets_its_actions_with_the_rows_id(signed_in, todo):
    body = card(text(signed_in.get(reverse("app_page", args=[todo.id]))), "view-open_todos")
    milk = re.search(r'<tr data-row-id="([^"]+)">.*?</tr>', body).group(0)
    assert f'<input type="hidden" name="id" value="{todo_id("Buy milk")}">' in milk
    assert '<input type="hidden" name="_place" value="view-open_todos">' in milk
    assert 'Tick off<span class="visually-hidden"> “Buy milk”</span></button>' in milk
    # rename asks for its other param on the row; delete asks to confirm
    assert re.search(r'<summary class="button small secondary">Rename<span class="visually-hidden"> “Buy milk”', milk)
    assert re.search(r'name="title" value="Buy milk"', milk)  # a rename starts from the row's title
    assert "Delete “Buy milk”? This cannot be undone." in milk
    assert milk.index("Rename") < milk.index("Delete")  # the ones that delete come last
    assert '<th scope="col">Id</th>' not in body


def test_a_row_action_comes_back_to_its_view_with_its_result(signed_in, todo):
    response = signed_in.post(
        reverse("app_route_submit", args=[todo.id, "complete_todo"]),
        {"id": todo_id("Buy milk"), "_place": "view-open_todos", "_row": "Buy milk", "_back": "open_todos.limit=5"},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("app_page", args=[todo.id]) + "?open_todos.limit=5#view-open_todos"
    view = card(text(signed_in.get(response["Location"])), "view-open_todos")
    assert 'id="view-open_todos-notice" role="status" tabindex="-1" autofocus' in view
    assert "Tick off: done (“Buy milk”)." in view
    assert "Buy milk</td>" not in view and "Call mum</td>" in view
    # shown once
    assert "Tick off: done" not in text(signed_in.get(response["Location"]))


def test_a_row_actions_error_is_shown_in_its_view_with_the_filters_kept(signed_in, todo):
    response = signed_in.post(
        reverse("app_route_submit", args=[todo.id, "rename_todo"]),
        {
            "id": todo_id("Call mum"),
            "title": "x" * 201,
            "_place": "view-open_todos",
            "_row": "Call mum",
            "_back": "open_todos.limit=5",
        },
    )
    assert response.status_code == 400
    view = card(text(response), "view-open_todos")
    assert 'class="notice notice-error" id="view-open_todos-notice" role="alert"' in view
    assert "Rename (“Call mum”) did not go through." in view
    assert "Title: Must be at most 200 characters long." in view
    assert 'value="5"' in view  # the view's filter, as it was
    assert Record.objects.get(record_id=todo_id("Call mum")).data["title"] == "Call mum"


def test_an_action_forms_error_keeps_the_views_filters(signed_in, budget):
    response = signed_in.post(
        reverse("app_route_submit", args=[budget.id, "add_expense"]),
        {"amount": "-5", "category": "food", "_back": "list_expenses.category=food", "_place": "action-add_expense"},
    )
    assert response.status_code == 422
    body = text(response)
    view = card(body, "view-list_expenses")
    assert 'name="list_expenses.category" value="food"' in view
    assert "<tbody>" in view and "food</td>" in view  # the view ran with its filter
    assert '<input type="hidden" name="_back" value="list_expenses.category=food">' in card(body, "action-add_expense")


def test_an_unknown_place_falls_back_to_the_action(signed_in, budget):
    response = signed_in.post(
        reverse("app_route_submit", args=[budget.id, "add_expense"]),
        {"amount": "1", "category": "x", "_place": "javascript:alert(1)"},
    )
    assert response["Location"].endswith("#action-add_expense")


def test_record_params_are_pickers_of_the_records_by_their_label(signed_in, todo):
    body = text(signed_in.get(reverse("app_page", args=[todo.id])))
    action = card(body, "action-complete_todo")
    assert '<label for="m-complete_todo-id">Todo</label>' in action
    assert re.search(
        r'<select id="m-complete_todo-id" name="id" class="picker" data-collection="todos" required', action
    )
    assert f'<option value="{todo_id("Buy milk")}">Buy milk</option>' in action
    assert 'type="text" id="m-complete_todo-id"' not in body


def test_a_picker_of_many_records_gets_a_search_box(signed_in, todo, monkeypatch):
    monkeypatch.setattr(app_views, "PICKER_CHOICES", 1)
    action = card(text(signed_in.get(reverse("app_page", args=[todo.id]))), "action-complete_todo")
    assert 'type="search" class="picker-search"' in action
    assert "2 to choose from: type part of a name to narrow the list." in action
    url = re.search(r'hx-get="([^"]+)"', action).group(1).replace("&amp;", "&")
    assert url.startswith(reverse("app_picker", args=[todo.id, "todos"]))
    found = text(signed_in.get(url + "&_pick_q=mum"))  # htmx adds what was typed to the URL's own query
    assert "Call mum</option>" in found and "Buy milk" not in found
    assert "Nothing matches" in text(signed_in.get(url + "&_pick_q=zzz"))
    assert signed_in.get(reverse("app_picker", args=[todo.id, "nope"])).status_code == 404


def test_another_users_picker_is_a_404(client, todo):
    client.force_login(UserFactory(username="mallory"))
    assert client.get(reverse("app_picker", args=[todo.id, "todos"])).status_code == 404


def test_the_start_shows_the_newest_records_no_view_lists(signed_in, budget, user):
    run(user, budget, "add_expense", {"amount": 9, "category": "books"})
    body = text(signed_in.get(reverse("app_page", args=[budget.id])))
    recent = card(body, "recent-expenses")
    rows = re.findall(r'<td data-label="Category">(\w+)</td>', recent)
    assert rows == ["books", "travel", "food"]
    assert 'id="recent-budgets"' not in body  # the start view ("This month") already shows the budget
    assert re.search(r"Delete<span class=\"visually-hidden\"> “books”", recent)  # the actions that take one


def test_hidden_collections_are_left_off_the_page(signed_in, user):
    app = app_definition_save(actor=user, definition=SPENDING)
    for expense in SPENDING_EXPENSES[:2]:
        run(user, app, "add_expense", expense)
    body = text(signed_in.get(reverse("app_page", args=[app.id])))
    assert "expense_tags" not in body and "Expense tags" not in body
    assert f'href="{reverse("app_records", args=[app.id, "expenses"])}"' in body


def test_a_long_table_is_paged_with_links_that_keep_the_filters(signed_in, user):
    app = app_definition_save(actor=user, definition=example("todo"))
    for i in range(30):
        run(user, app, "add_todo", {"title": f"item {i:02d}"})
    page_url = reverse("app_page", args=[app.id])
    first = card(text(signed_in.get(page_url, {"progress.x": "1"})), "view-open_todos")
    assert first.count("<tr data-row-id") == 25 and "Page 1 of 2" in first
    following = re.search(r'<a href="([^"]+)" rel="next">Next</a>', first).group(1).replace("&amp;", "&")
    assert "open_todos%3Arows=2" in following and "progress.x=1" in following
    second = card(text(signed_in.get(following)), "view-open_todos")
    assert second.count("<tr data-row-id") == 5 and "item 29" in second and "Page 2 of 2" in second


def test_help_is_shown_and_a_description_without_it_loses_the_agents_words(signed_in, user):
    definition = example("budget")
    definition["routes"]["big_expenses"].pop("help")
    app = app_definition_save(actor=user, definition=definition)
    body = text(signed_in.get(reverse("app_page", args=[app.id])))
    assert "Your budget, what you spent and what is left." in card(body, "view-summary")
    assert "The budget, what was spent" not in body  # summary's description is for agents
    assert '<p class="aside">Expenses of at least min, largest first.</p>' in card(body, "view-big_expenses")


def test_unknown_urls_and_refusals_get_styled_pages_in_the_sites_layout(client, user, rf: RequestFactory):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    body = text(response)
    assert '<header class="site-header">' in body and "<h1>Page not found</h1>" in body
    assert "Resolver404" not in body and "Not Found</h1>" not in body
    request = rf.get("/x/")
    request.user = user
    forbidden = permission_denied(request, exception=PermissionError("internal detail"))
    assert forbidden.status_code == 403 and "<h1>Not allowed</h1>" in forbidden.content.decode()
    assert "internal detail" not in forbidden.content.decode()
    broken = server_error(rf.get("/x/"))
    assert broken.status_code == 500
    assert "Something went wrong on our side" in broken.content.decode()
    assert 'href="/static/charming/site.css"' in broken.content.decode()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    refused = strict.post(reverse("app_feedback", args=["00000000-0000-0000-0000-000000000000"]), {"body": "x"})
    assert refused.status_code == 403 and "This form has expired" in text(refused)


def test_a_viewer_gets_no_row_actions(client, user, todo):
    from apps_registry.access import membership_set

    viewer = UserFactory(username="vera")
    membership_set(actor=user, app=todo, user=viewer, role="viewer")
    client.force_login(viewer)
    body = text(client.get(reverse("app_page", args=[todo.id])))
    assert "Buy milk</td>" in body
    assert "row-actions" not in body and "Tick off" not in body


def test_deleting_the_last_record_from_recently_added_still_shows_the_result_there(signed_in, user):
    app = app_definition_save(actor=user, definition=example("budget"))
    run(user, app, "set_budget", {"limit": 100})
    expense = run(user, app, "add_expense", {"amount": 5, "category": "food"})
    response = signed_in.post(
        reverse("app_route_submit", args=[app.id, "delete_expense"]),
        {"id": expense["id"], "_place": "recent-expenses", "_row": "food"},
    )
    assert response["Location"].endswith("#recent-expenses")
    recent = card(text(signed_in.get(response["Location"])), "recent-expenses")
    assert "Delete: done (“food”)." in recent and "Nothing to show yet." in recent
