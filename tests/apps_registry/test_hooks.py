"""Webhooks in: a signed POST to /hooks/<id>/ runs the hook's route as its creator; a wrong, stale, replayed or
missing signature, an oversized or malformed body and an unknown hook are refused with clear errors and nothing
written; secrets are derived (never stored), rotate with an overlap and never reach the audit trail."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps_registry.access import membership_set
from apps_registry.exceptions import AccessDenied, AuthenticationFailed, InvalidInput, NotFound, OperationFailed
from apps_registry.models import AuditEvent, Change, ChangeVia, Hook, HookDelivery
from apps_registry.services.changes import change_revert
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.hooks import (
    hook_create,
    hook_delete,
    hook_rotate,
    hooks_for,
    signature_make,
    signature_parse,
)
from apps_registry.services.sharing import membership_remove
from tests.apps_registry.route_helpers import records
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BUDGET = {
    "name": "Budget",
    "collections": {"expenses": {}},
    "routes": {
        "add_expense": {
            "kind": "mutation",
            "input": {
                "type": "object",
                "properties": {"amount": {"type": "number", "exclusiveMinimum": 0}, "note": {"type": "string"}},
                "required": ["amount"],
                "additionalProperties": False,
            },
            "steps": [
                {"insert": {"collection": "expenses", "value": "{'amount': params.amount}"}, "as": "row"},
                {"return": "{'id': row.id, 'amount': params.amount}"},
            ],
        },
        "refuse": {
            "kind": "mutation",
            "steps": [{"fail": {"when": "true", "message": "'the bank export is not there yet'"}}, {"return": "1"}],
        },
        "total": {"kind": "query", "steps": [{"return": "1"}]},
    },
}


@pytest.fixture
def owner():
    return UserFactory(username="owner", email="owner@example.com")


@pytest.fixture
def app(owner):
    return app_definition_save(actor=owner, definition=BUDGET)


@pytest.fixture
def made(app, owner):
    return hook_create(actor=owner, app_id=app.id, route="add_expense", description="bank export")


def deliver(made_or_id, body, *, secret=None, t=None, header=None, client=None, address="198.51.100.7"):
    """POST `body` (bytes, or a value sent as JSON) to the hook, signed with `secret` (the hook's own by default)."""
    hook_id = made_or_id if isinstance(made_or_id, str) else made_or_id.view.hook.id
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if header is None:
        header = signature_make(
            secret=secret or made_or_id.secret, timestamp=int(time.time()) if t is None else t, body=raw
        )
    extra = {} if header is False else {"HTTP_CHARMING_SIGNATURE": header}
    return (client or Client()).post(
        f"/hooks/{hook_id}/", data=raw, content_type="application/json", REMOTE_ADDR=address, **extra
    )


def expenses(app):
    return sorted(r["amount"] for r in records(app, "expenses").values())


def test_a_signed_delivery_runs_the_route_as_the_hooks_creator_and_answers_its_envelope(app, made, owner):
    answer = deliver(made, {"amount": 12.5})

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["ok"] is True and body["value"]["amount"] == 12.5
    assert expenses(app) == [12.5]
    change = Change.objects.get(pk=int(answer["Charming-Change-Id"]))
    assert (change.via, change.route, change.actor_id) == (ChangeVia.HOOK, "add_expense", owner.pk)
    (delivery,) = HookDelivery.objects.filter(hook=made.view.hook)
    assert (delivery.outcome, delivery.status, delivery.change_id, delivery.error) == ("ok", 200, change.pk, "")
    _app, (view,) = hooks_for(actor=owner, app_id=app.id)
    assert view.as_dict()["deliveries"][0]["change_id"] == str(change.pk)


def test_what_a_delivery_wrote_can_be_reverted_like_any_change(app, made, owner):
    answer = deliver(made, {"amount": 3})

    change_revert(actor=owner, change_id=answer["Charming-Change-Id"], via=ChangeVia.PAGE)

    assert expenses(app) == []


def test_the_secret_is_shown_once_is_never_stored_and_the_listing_holds_only_a_hint(app, made, owner, settings):
    hook = Hook.objects.get(pk=made.view.hook.id)
    stored = json.dumps([getattr(hook, f.attname) for f in Hook._meta.concrete_fields], default=str)
    listed = json.dumps([view.as_dict() for view in hooks_for(actor=owner, app_id=app.id)[1]], ensure_ascii=False)
    audit = json.dumps(list(AuditEvent.objects.values_list("details", flat=True)))

    assert made.secret.startswith("whsec_") and len(made.secret) > 40
    assert made.as_dict()["secret"] == made.secret
    for seen in (stored, listed, audit):
        assert made.secret not in seen and made.secret[10:30] not in seen
    hint = made.view.as_dict()["secret_hint"]
    assert hint == made.secret[:10] + "…" and hint in listed
    assert made.view.as_dict()["url"] == f"{settings.CHARMING_PUBLIC_URL}/hooks/{hook.id}/"


def test_a_secret_depends_on_the_servers_key_and_survives_a_key_rotation_done_djangos_way(app, made, settings):
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY = "a-new-secret-key-for-this-deployment-0123456789"

    assert deliver(made, {"amount": 1}).status_code == 401  # the secret was derived from the old key

    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert deliver(made, {"amount": 2}).status_code == 200
    assert expenses(app) == [2]


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (False, "no Charming-Signature header"),
        ("", "no Charming-Signature header"),
        ("v1=" + "0" * 64, "has no t"),
        ("t=1700000000", "has no v1"),
        ("t=soon,v1=" + "0" * 64, "t must be unix seconds"),
        ("t=1700000000,v1=xyz", "must be 64 hex digits"),
        ("t=17²,v1=" + "0" * 64, "t must be unix seconds"),
        ("t=1,t=2,v1=" + "0" * 64, "more than one t"),
    ],
)
def test_a_missing_or_malformed_signature_is_refused_saying_how_to_sign(app, made, header, says):
    answer = deliver(made, {"amount": 1}, header=header)

    assert answer.status_code == 401
    error = answer.json()["error"]
    assert error["kind"] == "unauthenticated" and says in error["message"]
    assert expenses(app) == [] and not HookDelivery.objects.exists()


def test_a_signature_made_with_another_secret_or_over_another_body_is_refused(app, made, owner):
    other = hook_create(actor=owner, app_id=app.id, route="add_expense")
    wrong_secret = deliver(made, {"amount": 1}, secret=other.secret)
    now = int(time.time())
    tampered = deliver(
        made, {"amount": 1000}, header=signature_make(secret=made.secret, timestamp=now, body=b'{"amount": 1}')
    )

    for answer in (wrong_secret, tampered):
        assert answer.status_code == 401
        assert "does not match this body for this webhook's secret" in answer.json()["error"]["message"]
    assert expenses(app) == [] and not HookDelivery.objects.exists()


@pytest.mark.parametrize(("offset", "says"), [(-301, "old"), (400, "in the future")])
def test_a_stale_or_future_signature_is_refused(app, made, offset, says):
    answer = deliver(made, {"amount": 1}, t=int(time.time()) + offset)

    assert answer.status_code == 401
    message = answer.json()["error"]["message"]
    said = re.search(rf"is (\d+) seconds {says};", message)
    assert said, message
    # The server reads its clock after the test did (2 s later seen, on a first request of a busy run): the stale
    # signature is then a little older, the future one a little nearer, never the other way.
    drift = (int(said.group(1)) - abs(offset)) * (1 if offset < 0 else -1)
    assert 0 <= drift <= 5, message
    assert "within 300 seconds" in message and "CHARMING_HOOK_TOLERANCE_SECONDS" in message
    assert expenses(app) == []


def test_a_replay_is_refused_before_it_spends_the_hooks_budget(app, made, settings):
    settings.CHARMING_RATE_HOOK_BURST = 1
    settings.CHARMING_RATE_HOOK_PER_MINUTE = 1
    t = int(time.time())

    assert deliver(made, {"amount": 7}, t=t).status_code == 200
    assert [deliver(made, {"amount": 7}, t=t).status_code for _ in range(3)] == [409, 409, 409]


def test_a_refusal_that_passes_is_not_recorded_so_the_same_signed_delivery_can_be_sent_again(app, made, settings):
    from apps_registry.models import RateBudget

    settings.CHARMING_RATE_APP_BURST = 1
    settings.CHARMING_RATE_APP_PER_MINUTE = 1
    assert deliver(made, {"amount": 1}).status_code == 200
    t = int(time.time())

    busy = deliver(made, {"amount": 2}, t=t)
    assert busy.status_code == 429 and busy.json()["error"]["kind"] == "rate_limited"
    assert HookDelivery.objects.count() == 1
    RateBudget.objects.filter(key__startswith="app:").delete()  # the app's budget, refilled
    assert deliver(made, {"amount": 2}, t=t).status_code == 200
    assert expenses(app) == [1, 2]


def test_the_same_signed_delivery_sent_twice_runs_once(app, made):
    t = int(time.time())
    first = deliver(made, {"amount": 7}, t=t)
    again = deliver(made, {"amount": 7}, t=t)

    assert first.status_code == 200
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["kind"] == "operation_failed" and "already received" in error["message"]
    assert "(ok)" in error["message"] and error["details"] == {"replay": True}
    assert expenses(app) == [7] and HookDelivery.objects.count() == 1


def test_a_replay_signed_with_the_other_secret_of_an_overlap_is_still_a_replay(app, made, owner):
    rotated = hook_rotate(actor=owner, hook_id=made.view.hook.id, keep_old_minutes=30)
    t = int(time.time())
    body = json.dumps({"amount": 4}).encode()
    both = (
        signature_make(secret=rotated.secret, timestamp=t, body=body)
        + ",v1="
        + signature_make(secret=made.secret, timestamp=t, body=body).split("v1=")[1]
    )

    assert deliver(made, body, header=both).status_code == 200
    only_old = signature_make(secret=made.secret, timestamp=t, body=body)
    assert deliver(made, body, header=only_old).status_code == 409
    assert expenses(app) == [4]


def test_a_body_too_large_is_refused_before_it_is_read(app, made, settings):
    settings.CHARMING_HOOK_BODY_BYTES = 100
    answer = deliver(made, {"amount": 1, "note": "x" * 200})

    assert answer.status_code == 413
    assert "larger than 100 bytes (CHARMING_HOOK_BODY_BYTES)" in answer.json()["error"]["message"]
    assert expenses(app) == [] and not HookDelivery.objects.exists()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "The body is not JSON (Expecting property name enclosed in double quotes at character 1)"),
        (b"[1, 2]", "must be a JSON object (the route's params), got an array"),
        (b'{"amount": NaN}', "The body is not JSON"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_signed_body_that_is_not_a_json_object_is_refused_and_recorded(app, made, body, says):
    answer = deliver(made, body)

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["kind"] == "invalid_input" and says in error["message"]
    (delivery,) = HookDelivery.objects.all()
    assert (delivery.outcome, delivery.status) == ("failed", 400) and says in delivery.error
    assert expenses(app) == []


def test_params_the_route_refuses_are_its_own_error_and_the_delivery_is_recorded_failed(app, made, owner):
    bad = deliver(made, {"amount": -1})
    refusing = hook_create(actor=owner, app_id=app.id, route="refuse")
    refused = deliver(refusing, {})

    assert bad.status_code == 400 and bad.json()["error"]["errors"][0]["path"] == "$.amount"
    assert refused.status_code == 422
    assert refused.json()["error"]["message"] == "the bank export is not there yet"
    assert sorted(HookDelivery.objects.values_list("outcome", "status")) == [("failed", 400), ("failed", 422)]
    assert expenses(app) == []


def test_an_empty_body_is_a_route_without_params(owner):
    app = app_definition_save(
        actor=owner,
        definition={
            "name": "Doorbell",
            "collections": {"rings": {}},
            "routes": {
                "ring": {"kind": "mutation", "steps": [{"insert": {"collection": "rings", "value": "{'at': now}"}}]}
            },
        },
    )
    bell = hook_create(actor=owner, app_id=app.id, route="ring")

    assert deliver(bell, b"").status_code == 200
    assert len(records(app, "rings")) == 1


# A fixed id that no hook has (not uuid4() at collection: every xdist worker must collect the same test ids).
@pytest.mark.parametrize("hook_id", ["3776dd64-f224-4536-b7f7-6079857b2bb1", "not-a-hook"])
def test_an_unknown_hook_is_refused_and_counts_against_the_address_but_never_locks_a_good_sender_out(
    app, made, hook_id, settings
):
    settings.CHARMING_RATE_AUTH_FAILURES_BURST = 2
    settings.CHARMING_RATE_AUTH_FAILURES_PER_MINUTE = 1
    address = "203.0.113.50"
    answers = [deliver(hook_id, {"amount": 1}, header="t=1,v1=" + "0" * 64, address=address) for _ in range(3)]

    assert [a.status_code for a in answers] == [404, 404, 429]
    assert "No webhook at this address" in answers[0].json()["error"]["message"]
    assert "Too many refused tokens from your address" in answers[2].json()["error"]["message"]
    assert deliver(made, {"amount": 1}, secret="whsec_wrong", address=address).status_code == 429
    # A stranger behind the same address (a NAT, a hosted sender's egress) cannot lock the real sender out.
    assert deliver(made, {"amount": 2}, address=address).status_code == 200
    assert expenses(app) == [2]


def test_bad_signatures_do_not_spend_the_hooks_own_budget_and_good_ones_do(app, made, settings):
    settings.CHARMING_RATE_HOOK_BURST = 2
    settings.CHARMING_RATE_HOOK_PER_MINUTE = 1
    for n in range(5):
        assert deliver(made, {"amount": 1}, secret="whsec_wrong", address=f"192.0.2.{n}").status_code == 401

    answers = [deliver(made, {"amount": n + 1}) for n in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2]["Retry-After"].isdigit()
    error = answers[2].json()["error"]
    assert error["kind"] == "rate_limited" and "This webhook had too many deliveries" in error["message"]
    assert expenses(app) == [1, 2]


def test_rotation_keeps_the_old_secret_for_the_overlap_then_only_the_new_one_signs(app, made, owner):
    rotated = hook_rotate(actor=owner, hook_id=made.view.hook.id, keep_old_minutes=10)

    assert rotated.secret != made.secret
    assert deliver(made, {"amount": 1}).status_code == 200
    assert deliver(made, {"amount": 2}, secret=rotated.secret).status_code == 200
    assert rotated.as_dict()["previous_secret_valid_until"] is not None
    Hook.objects.filter(pk=made.view.hook.id).update(previous_until=timezone.now() - timedelta(seconds=1))
    assert deliver(made, {"amount": 3}).status_code == 401
    assert deliver(made, {"amount": 4}, secret=rotated.secret).status_code == 200
    assert expenses(app) == [1, 2, 4]


def test_in_an_overlap_the_old_secret_runs_as_whoever_the_hook_ran_as_before(app, owner):
    editor = UserFactory(username="ed")
    membership_set(actor=owner, app=app, user=editor, role="editor")
    theirs = hook_create(actor=editor, app_id=app.id, route="add_expense")
    membership_remove(actor=owner, app_id=app.id, username="ed")
    rotated = hook_rotate(actor=owner, hook_id=theirs.view.hook.id, keep_old_minutes=60)

    # The removed editor still holds the old secret: it does not act as the owner who rotated.
    assert deliver(theirs, {"amount": 1}).status_code == 403
    assert deliver(theirs, {"amount": 2}, secret=rotated.secret).status_code == 200
    assert expenses(app) == [2]


def test_rotation_with_no_overlap_ends_the_old_secret_at_once(app, made, owner):
    rotated = hook_rotate(actor=owner, hook_id=made.view.hook.id, keep_old_minutes=0)

    assert deliver(made, {"amount": 1}).status_code == 401
    assert deliver(made, {"amount": 2}, secret=rotated.secret).status_code == 200
    assert rotated.as_dict()["previous_secret_valid_until"] is None


@pytest.mark.parametrize(("minutes", "says"), [(-1, "from 0 to 10080"), (10081, "from 0 to 10080"), ("5", "whole")])
def test_a_rotation_overlap_out_of_range_is_refused(made, owner, minutes, says):
    with pytest.raises(InvalidInput) as refused:
        hook_rotate(actor=owner, hook_id=made.view.hook.id, keep_old_minutes=minutes)

    assert says in refused.value.message and refused.value.errors[0]["path"] == "$.keep_old_minutes"


def test_a_creator_who_lost_access_stops_the_hook_until_an_owner_rotates_it(app, owner):
    editor = UserFactory(username="ed")
    membership_set(actor=owner, app=app, user=editor, role="editor")
    theirs = hook_create(actor=editor, app_id=app.id, route="add_expense")
    membership_remove(actor=owner, app_id=app.id, username="ed")

    refused = deliver(theirs, {"amount": 1})

    assert refused.status_code == 403
    assert "runs as ed, who can no longer change its app; nothing was run" in refused.json()["error"]["message"]
    assert expenses(app) == []
    rotated = hook_rotate(actor=owner, hook_id=theirs.view.hook.id)
    assert rotated.as_dict()["created_by"] == "owner"
    assert deliver(theirs, {"amount": 2}, secret=rotated.secret).status_code == 200
    assert Change.objects.get(route="add_expense").actor_id == owner.pk


def test_a_deactivated_creator_stops_the_hook(app, made, owner):
    owner.is_active = False
    owner.save()

    assert deliver(made, {"amount": 1}).status_code == 403
    assert expenses(app) == []


def test_a_deleted_hook_answers_404_and_its_deliveries_go_with_it(app, made, owner):
    deliver(made, {"amount": 1})

    hook_delete(actor=owner, hook_id=made.view.hook.id)

    assert deliver(made, {"amount": 2}).status_code == 404
    assert not HookDelivery.objects.exists()
    assert expenses(app) == [1]
    assert list(AuditEvent.objects.filter(action__startswith="hook.").values_list("action", flat=True)) == [
        "hook.delete",
        "hook.create",
    ]


def test_only_mutations_of_the_app_can_be_hooked_and_each_problem_is_named(app, owner):
    with pytest.raises(InvalidInput) as query:
        hook_create(actor=owner, app_id=app.id, route="total")
    with pytest.raises(InvalidInput) as unknown:
        hook_create(actor=owner, app_id=app.id, route="add_expence")
    with pytest.raises(InvalidInput) as long:
        hook_create(actor=owner, app_id=app.id, route="add_expense", description="x" * 201)

    assert "'total' is a query; webhooks run mutations. Its mutation routes: add_expense, refuse" in query.value.message
    assert "'add_expence' is not a route of app 'Budget'; its mutation routes: add_expense, refuse" in (
        unknown.value.message
    )
    assert long.value.errors[0]["path"] == "$.description"
    assert not Hook.objects.exists()


def test_viewers_cannot_see_or_manage_hooks_and_strangers_cannot_find_them(app, made, owner):
    viewer, stranger = UserFactory(username="vi"), UserFactory(username="st")
    membership_set(actor=owner, app=app, user=viewer, role="viewer")
    hook_id = made.view.hook.id

    for call in (
        lambda who: hooks_for(actor=who, app_id=app.id),
        lambda who: hook_create(actor=who, app_id=app.id, route="add_expense"),
        lambda who: hook_rotate(actor=who, hook_id=hook_id),
        lambda who: hook_delete(actor=who, hook_id=hook_id),
    ):
        with pytest.raises(AccessDenied) as denied:
            call(viewer)
        assert "Only the app's owner and editors can manage the webhooks of app 'Budget'; you are a viewer." in (
            denied.value.message
        )
        with pytest.raises(NotFound):
            call(stranger)
    with pytest.raises(NotFound) as hidden:
        hook_delete(actor=stranger, hook_id=hook_id)
    assert hidden.value.message == f"No webhook with id {hook_id} exists or is visible to you."  # as for none
    with pytest.raises(NotFound) as missing:
        hook_delete(actor=owner, hook_id=hook_id, app_id=uuid.uuid4())
    assert missing.value.message == hidden.value.message
    assert Hook.objects.get(pk=hook_id).secret_nonce == made.view.hook.secret_nonce


def test_hooks_per_app_and_per_owner_are_bounded(app, owner, settings):
    settings.CHARMING_HOOKS_PER_APP = 2
    settings.CHARMING_HOOKS_PER_OWNER = 3
    hook_create(actor=owner, app_id=app.id, route="add_expense")
    hook_create(actor=owner, app_id=app.id, route="add_expense")
    with pytest.raises(OperationFailed) as per_app:
        hook_create(actor=owner, app_id=app.id, route="add_expense")
    second = app_definition_save(actor=owner, definition={**BUDGET, "name": "Budget 2"})
    hook_create(actor=owner, app_id=second.id, route="add_expense")
    with pytest.raises(OperationFailed) as per_owner:
        hook_create(actor=owner, app_id=second.id, route="add_expense")

    assert per_app.value.message == (
        "App 'Budget' has 2 webhooks, the most an app may have (CHARMING_HOOKS_PER_APP). Delete one it no longer "
        "needs (list_hooks shows them)."
    )
    assert per_app.value.details == {"limit": "hooks_per_app", "max": 2}
    assert per_owner.value.message == (
        "The apps of this app's owner have 3 webhooks, the most one owner's apps may have (CHARMING_HOOKS_PER_OWNER). "
        "Delete one first."
    )
    assert per_owner.value.details == {"limit": "hooks_per_owner", "max": 3}


def test_get_on_a_hook_is_refused_with_the_methods_it_takes(made):
    answer = Client().get(f"/hooks/{made.view.hook.id}/")

    assert answer.status_code == 405
    assert "it takes POST" in answer.json()["error"]["message"]


def test_a_header_carries_at_most_four_signatures():
    with pytest.raises(AuthenticationFailed, match="carries 5 v1 signatures; at most 4"):
        signature_parse("t=1," + ",".join(["v1=" + "a" * 64] * 5))


def test_purge_storage_deletes_old_deliveries_with_the_change_history(app, made, settings, capsys):
    deliver(made, {"amount": 1})
    deliver(made, {"amount": 2})
    HookDelivery.objects.filter(status=200).update(received_at=timezone.now() - timedelta(days=400))
    deliver(made, {"amount": 3})

    call_command("purge_storage")

    assert HookDelivery.objects.count() == 1
    assert "Webhook deliveries received before then" in capsys.readouterr().out


def test_rest_an_owner_creates_lists_rotates_and_deletes_a_hook(api, user):
    app = app_definition_save(actor=user, definition=BUDGET)
    created = api.post(f"/api/apps/{app.id}/hooks/", {"route": "add_expense", "description": "form"}, format="json")

    assert created.status_code == 201, created.content
    value = created.json()["value"]
    assert value["secret"].startswith("whsec_") and value["description"] == "form"
    listed = api.get(f"/api/apps/{app.id}/hooks/").json()["value"]
    assert [h["id"] for h in listed] == [value["id"]] and "secret" not in listed[0]
    assert value["secret"] not in json.dumps(listed)
    rotated = api.post(f"/api/apps/{app.id}/hooks/{value['id']}/rotate/", {"keep_old_minutes": 0}, format="json")
    assert rotated.status_code == 200 and rotated.json()["value"]["secret"] != value["secret"]
    nothing = api.post(f"/api/apps/{app.id}/hooks/{value['id']}/rotate/")
    assert nothing.status_code == 200
    unknown = api.post(f"/api/apps/{app.id}/hooks/", {"route": "add_expense", "secret": "x"}, format="json")
    assert unknown.status_code == 400 and "Unknown field(s) 'secret'" in unknown.json()["error"]["message"]
    deleted = api.delete(f"/api/apps/{app.id}/hooks/{value['id']}/")
    assert deleted.status_code == 200 and not Hook.objects.exists()
    assert api.delete(f"/api/apps/{app.id}/hooks/{value['id']}/").status_code == 404


def test_rest_a_read_only_token_cannot_manage_hooks(user):
    from rest_framework.test import APIClient

    from apps_registry.services.tokens import token_create

    app = app_definition_save(actor=user, definition=BUDGET)
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, scopes=['apps:read']).plaintext}")

    answer = reader.get(f"/api/apps/{app.id}/hooks/")

    assert answer.status_code == 403 and answer.json()["error"]["kind"] == "insufficient_scope"


def test_the_address_works_without_its_final_slash(app, made):
    raw = json.dumps({"amount": 5}).encode()
    header = signature_make(secret=made.secret, timestamp=int(time.time()), body=raw)

    answer = Client().post(
        f"/hooks/{made.view.hook.id}", data=raw, content_type="application/json", HTTP_CHARMING_SIGNATURE=header
    )

    assert answer.status_code == 200 and expenses(app) == [5]
