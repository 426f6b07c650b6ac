"""mutate_app's idempotency key (_meta "io.charming/idempotency-key"): a retry returns the first result, writes
nothing again, and is refused when the params changed."""

from __future__ import annotations

import pytest

from apps_registry.models import IdempotentResult, Record
from apps_registry.services.definitions import app_definition_save
from tests.mcp_tools.conftest import MODES, mcp_client, run, text_of
from tests.mcp_tools.test_mutate_app import DEFINITION, assert_envelope, mutate

KEY = "io.charming/idempotency-key"


@pytest.fixture
def budget(alice):
    return app_definition_save(actor=alice.user, definition=DEFINITION)


def call_with_key(live, agent, mode, args, key, tool="mutate_app"):
    async def go():
        async with mcp_client(live, agent.token, mode) as c:
            return await c.call_tool(tool, args, meta={KEY: key} if key is not None else None)

    return run(go())


def expense(budget, amount=3, category="tea"):
    return mutate(budget, "add_expense", {"amount": amount, "category": category})


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_with_the_same_key_returns_the_first_result_and_writes_nothing(live, alice, budget, mode):
    first = call_with_key(live, alice, mode, expense(budget), "k-1")
    retry = call_with_key(live, alice, mode, expense(budget), "k-1")

    record = Record.objects.get(storage__app=budget)
    assert assert_envelope(first) == assert_envelope(retry) == {"ok": True, "value": {"id": record.record_id}}
    assert "already ran with this idempotency key; nothing was written again" in text_of(retry)
    assert IdempotentResult.objects.count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_without_a_key_or_with_another_key_each_call_writes(live, alice, budget, mode):
    call_with_key(live, alice, mode, expense(budget), None)
    call_with_key(live, alice, mode, expense(budget), None)
    call_with_key(live, alice, mode, expense(budget), "a")
    call_with_key(live, alice, mode, expense(budget), "b")

    assert Record.objects.filter(storage__app=budget).count() == 4


@pytest.mark.parametrize("mode", MODES)
def test_the_same_key_with_other_params_is_refused(live, alice, budget, mode):
    call_with_key(live, alice, mode, expense(budget, amount=3), "k-2")

    refused = call_with_key(live, alice, mode, expense(budget, amount=4), "k-2")

    error = assert_envelope(refused)["error"]
    assert refused.is_error is True
    assert error["kind"] == "invalid_input"
    assert error["message"] == (
        f"The idempotency key (_meta.{KEY}) was already used for a call of 'add_expense' with other params; a retry "
        "must send the same params. Use a new key for a different change."
    )
    assert error["errors"] == [{"path": f"_meta.{KEY}", "message": "already used with other params"}]
    assert Record.objects.filter(storage__app=budget).count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_key_is_scoped_to_the_user(live, alice, bob, budget, mode):
    from apps_registry.access import membership_set

    membership_set(actor=alice.user, app=budget, user=bob.user, role="editor")
    call_with_key(live, alice, mode, expense(budget), "shared")
    call_with_key(live, bob, mode, expense(budget), "shared")

    assert Record.objects.filter(storage__app=budget).count() == 2


def test_a_failed_call_is_not_remembered_and_its_retry_runs(live, alice, budget):
    failed = call_with_key(live, alice, MODES[1].values[0], expense(budget, amount=-1), "k-3")
    assert assert_envelope(failed)["error"]["kind"] == "handler_error"

    again = call_with_key(live, alice, MODES[1].values[0], expense(budget, amount=-1), "k-3")

    assert assert_envelope(again)["error"]["kind"] == "handler_error"  # ran again, did not replay a success
    assert IdempotentResult.objects.count() == 0


def test_a_key_is_forgotten_after_the_window(live, alice, budget, settings):
    call_with_key(live, alice, MODES[0].values[0], expense(budget), "k-4")
    settings.CHARMING_IDEMPOTENCY_WINDOW_HOURS = 0

    call_with_key(live, alice, MODES[0].values[0], expense(budget), "k-4")

    assert Record.objects.filter(storage__app=budget).count() == 2
    assert IdempotentResult.objects.count() == 1  # the expired one was replaced


@pytest.mark.parametrize("bad", ["", "x" * 201, "a\x00b", 7])
def test_a_malformed_key_is_invalid_input(live, alice, budget, bad):
    refused = call_with_key(live, alice, MODES[1].values[0], expense(budget), bad)

    error = assert_envelope(refused)["error"]
    assert error["kind"] == "invalid_input"
    assert error["message"].startswith(f"The idempotency key (_meta.{KEY}) must be")
    assert Record.objects.count() == 0
