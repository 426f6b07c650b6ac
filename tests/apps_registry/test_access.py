"""apps_registry.access: the one table of who may do what, and every path that applies it."""

from __future__ import annotations

import pytest

from apps_registry.access import (
    ALL_SCOPES,
    ALLOWED_ROLES,
    NEED_SCOPES,
    NEEDS,
    SCOPES,
    app_for,
    apps_visible_to,
    membership_set,
    refusal_message,
    role_allows,
    scope_check,
    scope_for,
)
from apps_registry.exceptions import AccessDenied, AppNotFound, InsufficientScope, InvalidInput, RouteNotFound
from apps_registry.models import Membership, Role
from apps_registry.services import routes
from apps_registry.services.definitions import app_definition_save
from tests.factories import UserFactory
from tests.mcp_tools.test_mutate_app import DEFINITION

pytestmark = pytest.mark.django_db

ROLES = (Role.OWNER, Role.EDITOR, Role.VIEWER)


@pytest.fixture
def budget(user):
    return app_definition_save(actor=user, definition=DEFINITION)


def member(app, role):
    """A user with `role` in `app` (the owner for Role.OWNER)."""
    if role == Role.OWNER:
        return app.owner
    user = UserFactory(username=f"{role}-member")
    membership_set(actor=app.owner, app=app, user=user, role=role)
    return user


def test_the_table_names_every_need_and_owners_may_do_everything():
    assert set(ALLOWED_ROLES) == set(NEEDS)
    assert all(role_allows(Role.OWNER, need) for need in NEEDS)
    assert [need for need in NEEDS if role_allows(Role.VIEWER, need)] == ["read", "query", "feedback", "membership"]
    editor_needs = [need for need in NEEDS if role_allows(Role.EDITOR, need)]
    assert editor_needs == ["read", "query", "feedback", "membership", "mutate", "author"]


def test_every_need_takes_one_scope_and_only_deletion_takes_apps_delete():
    assert set(NEED_SCOPES) == set(NEEDS)
    assert {need: scope_for(need) for need in NEEDS} == {
        "read": "apps:read",
        "query": "apps:read",
        "feedback": "apps:write",
        "membership": "apps:write",  # answering one's invitation, leaving an app
        "mutate": "apps:write",
        "author": "apps:write",
        "own": "apps:write",  # sharing: an owner's power, but undoable and destroying nothing
        "delete": "apps:delete",
    }
    assert set(NEED_SCOPES.values()) == set(SCOPES) == ALL_SCOPES


@pytest.mark.parametrize("need", NEEDS)
def test_scope_check_refuses_a_token_without_the_needs_scope_naming_it(need):
    scope = scope_for(need)
    scope_check(scopes=frozenset({scope}), need=need)
    with pytest.raises(InsufficientScope) as exc:
        scope_check(scopes=ALL_SCOPES - {scope}, need=need)
    assert (exc.value.kind, exc.value.scope, exc.value.details) == ("insufficient_scope", scope, {"scope": scope})
    assert exc.value.message == (
        f"This token does not carry the {scope} scope ({SCOPES[scope].lower()}), which this needs. "
        f"Connect again granting {scope}, or use a token that has it."
    )


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("need", NEEDS)
def test_app_for_follows_the_table_for_every_role_and_need(budget, role, need):
    actor = member(budget, role)
    if role_allows(role, need):
        assert app_for(actor=actor, app_id=budget.id, need=need) == (budget, role)
        return
    with pytest.raises(AccessDenied) as exc:
        app_for(actor=actor, app_id=budget.id, need=need)
    assert exc.value.message == refusal_message(app_name="Budget", role=role, need=need)
    assert (exc.value.kind, exc.value.role, exc.value.need, exc.value.app_id) == ("forbidden", role, need, budget.id)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("need", NEEDS)
def test_the_fast_path_of_route_run_agrees_with_the_table(budget, role, need):
    """route_run's hand-written lookup reads the same role as app_for, and decides with the same table."""
    actor = member(budget, role)
    found = routes._route_for_call(actor=actor, app_id=budget.id, op="add_expense")
    assert found is not None and found.role == role
    if need not in routes.NEED_FOR_KIND.values():
        return  # no route kind asks for it: the fast path never decides it
    kind = next(kind for kind, needed in routes.NEED_FOR_KIND.items() if needed == need)
    op = "add_expense" if kind == "mutation" else "count_expenses"
    params = {"amount": 1, "category": "tea"} if kind == "mutation" else None
    if role_allows(role, need):
        routes.route_run(actor=actor, app_id=budget.id, op=op, params=params, kind=kind)
        with pytest.raises(RouteNotFound):  # the slow path (no such route) agrees
            routes.route_run(actor=actor, app_id=budget.id, op="nope", params=None, kind=kind)
        return
    expected = refusal_message(app_name="Budget", role=role, need=need)
    for name in (op, "nope"):  # the fast path (route found) and the slow path (no such route)
        with pytest.raises(AccessDenied) as exc:
            routes.route_run(actor=actor, app_id=budget.id, op=name, params=params, kind=kind)
        assert exc.value.message == expected


@pytest.mark.parametrize("app_id", ["missing", "not-a-uuid"])
def test_an_app_the_caller_cannot_see_is_reported_exactly_like_a_missing_one(budget, other_user, app_id):
    import uuid

    hidden = str(budget.id)
    missing = str(uuid.uuid4()) if app_id == "missing" else app_id
    with pytest.raises(AppNotFound) as invisible:
        app_for(actor=other_user, app_id=hidden, need="read")
    with pytest.raises(AppNotFound) as absent:
        app_for(actor=budget.owner, app_id=missing, need="read")
    assert invisible.value.message == f"No app with id {hidden} exists or is visible to you."
    assert absent.value.message == f"No app with id {missing} exists or is visible to you."
    assert routes._route_for_call(actor=other_user, app_id=hidden, op="add_expense") is None


def test_apps_visible_to_lists_owned_and_shared_apps_with_the_callers_role(budget, other_user):
    theirs = app_definition_save(actor=other_user, definition={**DEFINITION, "name": "Theirs"})
    membership_set(actor=other_user, app=theirs, user=budget.owner, role=Role.VIEWER)
    seen = {app.name: app.caller_role for app in apps_visible_to(budget.owner)}
    assert seen == {"Budget": "owner", "Theirs": "viewer"}


def test_only_the_owner_may_share(budget, other_user):
    editor = member(budget, Role.EDITOR)
    with pytest.raises(AccessDenied) as exc:
        membership_set(actor=editor, app=budget, user=other_user, role=Role.VIEWER)
    assert exc.value.message == (
        "Only the app's owner can delete, share or manage app 'Budget'; you are an editor, not the owner."
    )
    with pytest.raises(AppNotFound):
        membership_set(actor=other_user, app=budget, user=other_user, role=Role.VIEWER)
    assert not Membership.objects.filter(app=budget, user=other_user).exists()


@pytest.mark.parametrize("role", ["owner", "admin", ""])
def test_sharing_gives_only_editor_or_viewer(budget, other_user, role):
    with pytest.raises(InvalidInput) as exc:
        membership_set(actor=budget.owner, app=budget, user=other_user, role=role)
    assert exc.value.message == f"A shared app's role must be 'editor' or 'viewer', got {role!r}."


def test_the_owners_own_role_cannot_change(budget):
    with pytest.raises(InvalidInput) as exc:
        membership_set(actor=budget.owner, app=budget, user=budget.owner, role=Role.EDITOR)
    assert exc.value.message == "The owner's own role cannot change: an app has exactly one owner."
    assert Membership.objects.get(app=budget, user=budget.owner).role == Role.OWNER
