"""get_app, send_feedback, and advisories (authoring notes, staff answers to feedback) in tool results."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from jsonschema import Draft202012Validator

from apps_registry.access import membership_set
from apps_registry.models import Feedback, FeedbackResponse
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.public_apps import public_app_set
from apps_registry.services.staff import feedback_respond
from mcp_tools.registry import TOOLS
from tests.factories import AdvisoryFactory, FeedbackFactory, make_app
from tests.mcp_tools.conftest import MODERN, MODES, call_tool_error, call_tool_ok, text_of
from tests.mcp_tools.test_mutate_app import DEFINITION
from tests.messages import app_not_found

OUTPUT = {tool.name: Draft202012Validator(tool.contract["outputSchema"]) for tool in TOOLS}


def valid(tool, result):
    assert list(OUTPUT[tool].iter_errors(result.structured_content)) == []
    return result.structured_content


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


@pytest.mark.parametrize("mode", MODES)
def test_get_app_describes_the_app_and_its_routes(live, alice, budget, mode):
    result = call_tool_ok(live, alice, mode, "get_app", {"app_id": str(budget.id)})

    value = valid("get_app", result)["value"]
    assert {k: value[k] for k in ("id", "name", "description", "role")} == {
        "id": str(budget.id),
        "name": "Budget",
        "description": "Monthly spending",
        "role": "owner",
    }
    routes = {route["name"]: route for route in value["routes"]}
    assert list(routes) == ["add_expense", "broken", "count_expenses", "rename_expense"]
    assert routes["add_expense"] == {
        "name": "add_expense",
        "kind": "mutation",
        "description": "Record one expense.",
        "input": DEFINITION["routes"]["add_expense"]["input"],
        "output": DEFINITION["routes"]["add_expense"]["output"],
    }
    assert "count_expenses (query, call with query_app)" in text_of(result)
    assert value["mcp_url"] == f"http://127.0.0.1:8000/mcp/apps/{budget.id}"
    assert f"Its own MCP server, with each route as a tool: {value['mcp_url']}" in text_of(result)
    assert value["page_url"] == f"http://127.0.0.1:8000/apps/{budget.id}/"
    assert f"Its page, for the person to open in a browser: {value['page_url']}" in text_of(result)
    assert "public_url" not in value and "It is public" not in text_of(result)


def test_get_app_gives_a_public_apps_address_and_both_addresses_serve_their_pages(live, alice, budget, client):
    public_app_set(actor=alice.user, app_id=budget.id, handle="our-budget", mutations=[])

    value = valid("get_app", call_tool_ok(live, alice, MODERN, "get_app", {"app_id": str(budget.id)}))["value"]

    assert value["public_url"] == "http://127.0.0.1:8000/p/our-budget/"
    assert client.get(urlsplit(value["public_url"]).path).status_code == 200  # anyone's
    client.force_login(alice.user)
    assert client.get(urlsplit(value["page_url"]).path).status_code == 200


@pytest.mark.parametrize("mode", MODES)
def test_get_app_of_someone_elses_app_is_not_found(live, alice, bob, budget, mode):
    result = call_tool_error(live, bob, mode, "get_app", {"app_id": str(budget.id)})

    error = valid("get_app", result)["error"]
    assert error["kind"] == "not_found"
    assert error["message"].startswith(app_not_found(budget.id))
    assert "Budget" not in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_open_advisories_come_with_results_and_their_summaries_in_the_text(live, alice, budget, mode):
    AdvisoryFactory(app=budget, kind="find-without-limit", severity="warn", summary="Route x has no limit.")
    AdvisoryFactory(app=budget, kind="old-news", summary="Resolved already.", resolved=True)

    result = call_tool_ok(live, alice, mode, "query_app", {"app_id": str(budget.id), "op": "count_expenses"})

    advisories = valid("query_app", result)["advisories"]
    assert [a["kind"] for a in advisories] == ["find-without-limit"]
    assert advisories[0]["severity"] == "warn"
    assert "- [warn] find-without-limit: Route x has no limit." in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_advisories_come_with_error_results_too(live, alice, budget, mode):
    AdvisoryFactory(app=budget, kind="find-without-limit", summary="Route x has no limit.")

    result = call_tool_error(live, alice, mode, "mutate_app", {"app_id": str(budget.id), "op": "nope"})

    content = valid("mutate_app", result)
    assert content["error"]["kind"] == "unknown_op"
    assert content["error"]["message"].startswith(
        "App 'Budget' has no route 'nope'. Its routes: add_expense (mutation)"
    )
    assert [a["kind"] for a in content["advisories"]] == ["find-without-limit"]


@pytest.mark.parametrize("mode", MODES)
def test_a_staff_answer_to_the_callers_feedback_is_delivered_once(live, alice, staff, budget, mode):
    feedback = FeedbackFactory(app=budget, author=alice.user, body="The add button is confusing.")
    response = feedback_respond(staff=staff, feedback=feedback, body="We renamed it to 'Add expense'.")
    args = {"app_id": str(budget.id), "op": "count_expenses"}

    first = call_tool_ok(live, alice, mode, "query_app", args)
    second = call_tool_ok(live, alice, mode, "query_app", args)

    delivered = [a for a in valid("query_app", first)["advisories"] if a["kind"] == "feedback-response"]
    assert len(delivered) == 1
    assert (
        delivered[0]["userSummary"]
        == "Charming staff answered your feedback about 'Budget': We renamed it to 'Add expense'."
    )
    assert "We renamed it to 'Add expense'." in delivered[0]["summary"]
    assert "feedback-response: Charming staff answered" in text_of(first)
    assert "advisories" not in second.structured_content
    response.refresh_from_db()
    assert response.read_at is not None


@pytest.mark.parametrize("mode", MODES)
def test_a_staff_answer_reaches_only_the_author_of_the_feedback(live, alice, bob, staff, budget, mode):
    membership_set(actor=alice.user, app=budget, user=bob.user, role="viewer")
    feedback = FeedbackFactory(app=budget, author=alice.user)
    response = feedback_respond(staff=staff, feedback=feedback, body="Thanks!")

    result = call_tool_ok(live, bob, mode, "get_app", {"app_id": str(budget.id)})

    assert "advisories" not in result.structured_content
    response.refresh_from_db()
    assert response.read_at is None
    # The same call by the author does carry it: bob's result lacked it because it is not his.
    authors = call_tool_ok(live, alice, mode, "get_app", {"app_id": str(budget.id)})
    assert [a["kind"] for a in valid("get_app", authors)["advisories"]] == ["feedback-response"]
    response.refresh_from_db()
    assert response.read_at is not None


@pytest.mark.parametrize("mode", MODES)
def test_send_feedback_records_it_for_staff(live, alice, budget, mode):
    result = call_tool_ok(
        live, alice, mode, "send_feedback", {"app_id": str(budget.id), "body": "  Please add a monthly report. "}
    )

    feedback = Feedback.objects.get()
    assert valid("send_feedback", result) == {
        "ok": True,
        "value": {"feedback_id": str(feedback.pk), "app_id": str(budget.id)},
    }
    assert feedback.author == alice.user and feedback.body == "Please add a monthly report."


@pytest.mark.parametrize("mode", MODES)
def test_send_feedback_refuses_an_empty_body_with_the_services_message(live, alice, budget, mode):
    result = call_tool_error(live, alice, mode, "send_feedback", {"app_id": str(budget.id), "body": "   "})

    error = valid("send_feedback", result)["error"]
    assert error["kind"] == "invalid_input"
    assert error["message"] == "Feedback body is empty: write what you would like the app's staff to know."
    assert not Feedback.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_send_feedback_on_someone_elses_app_is_not_found(live, bob, alice, mode):
    app = make_app(owner=alice.user)

    result = call_tool_error(live, bob, mode, "send_feedback", {"app_id": str(app.id), "body": "hi"})

    error = valid("send_feedback", result)["error"]
    assert error["kind"] == "not_found"
    assert error["message"].startswith(app_not_found(app.id))
    assert not Feedback.objects.exists()


@pytest.mark.parametrize("mode", MODES)
def test_list_apps_result_satisfies_its_output_schema(live, alice, budget, mode):
    valid("list_apps", call_tool_ok(live, alice, mode, "list_apps", {}))


def test_unanswered_feedback_produces_no_advisory(live, alice, staff, budget):
    feedback = FeedbackFactory(app=budget, author=alice.user)

    result = call_tool_ok(live, alice, "2026-07-28", "get_app", {"app_id": str(budget.id)})

    assert "advisories" not in result.structured_content
    # Once answered, the same call carries the answer: it was the missing answer that left it out.
    feedback_respond(staff=staff, feedback=feedback, body="Answered.")
    answered = call_tool_ok(live, alice, "2026-07-28", "get_app", {"app_id": str(budget.id)})
    assert [a["kind"] for a in valid("get_app", answered)["advisories"]] == ["feedback-response"]
    assert FeedbackResponse.objects.get(feedback=feedback).read_at is not None
