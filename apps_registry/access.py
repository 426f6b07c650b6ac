"""Who may do what with an app: the one table of roles and needs, and the only lookups that apply it.

Every service, selector, the REST API, the admin and the MCP tools reach an app on a user's behalf
through `app_for` (or `apps_visible_to` for lists). An app the caller cannot see is reported exactly
like one that does not exist. Sharing (`membership_set`) is a rule of this module too; invitations,
accepting and leaving will join it here.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, get_args

from django.db import transaction
from django.db.models import F, QuerySet

from apps_registry.exceptions import AccessDenied, InvalidInput, app_not_found
from apps_registry.models import App, Membership, Role

Need = Literal["read", "query", "mutate", "author", "own"]
NEEDS: tuple[Need, ...] = get_args(Need)

_ALL_ROLES = frozenset({Role.OWNER, Role.EDITOR, Role.VIEWER})

# The table. read: see the app and its routes; query: run its queries; mutate: run its mutations;
# author: read, replace or clear its definition; own: delete it, share it, manage its members.
ALLOWED_ROLES: dict[Need, frozenset[str]] = {
    "read": _ALL_ROLES,
    "query": _ALL_ROLES,
    "mutate": frozenset({Role.OWNER, Role.EDITOR}),
    "author": frozenset({Role.OWNER, Role.EDITOR}),
    "own": frozenset({Role.OWNER}),
}

# The roles an owner may give to someone else (there is one owner per app).
SHAREABLE_ROLES: tuple[str, ...] = (Role.EDITOR, Role.VIEWER)


def role_allows(role: str, need: Need) -> bool:
    """Whether `role` may do `need`: the table above, for the fast path's hand-written lookup too."""
    return role in ALLOWED_ROLES[need]


def _with_article(role: str) -> str:
    return f"an {role}" if role[0] in "aeiou" else f"a {role}"


def refusal_message(*, app_name: str, role: str, need: Need) -> str:
    """The one wording of each refusal (the domain's words; transports may name their own tools)."""
    if need == "mutate":
        return (
            f"You are {_with_article(role)} of app '{app_name}'; {role}s may only query and read it. "
            "Ask the owner for editor access to change its data."
        )
    if need == "author":
        return (
            f"Only the app's owner and editors can read or change the definition of app '{app_name}'; "
            f"you are {_with_article(role)}."
        )
    if need == "own":
        return (
            f"Only the app's owner can delete, share or manage app '{app_name}'; "
            f"you are {_with_article(role)}, not the owner."
        )
    return f"You are {_with_article(role)} of app '{app_name}', which does not allow this."


def role_check(*, app: App, role: str, need: Need) -> None:
    """AccessDenied unless `role` may do `need` in `app`."""
    if not role_allows(role, need):
        raise AccessDenied(
            refusal_message(app_name=app.name, role=role, need=need),
            app_id=app.id,
            app_name=app.name,
            role=role,
            need=need,
        )


def apps_visible_to(actor: Any) -> QuerySet[App]:
    """Apps the actor owns or is a member of, each annotated with `caller_role` (the actor's role)."""
    # One membership per (user, app), so the join never repeats an app.
    return App.objects.filter(memberships__user=actor).annotate(caller_role=F("memberships__role"))


def app_for(*, actor: Any, app_id: uuid.UUID | str, need: Need, for_update: bool = False) -> tuple[App, str]:
    """The app and the actor's role in it, if that role allows `need`.

    NotFound (the same for a missing app and an invisible one) or AccessDenied. `for_update` locks the
    app's row until the end of the caller's transaction.
    """
    try:
        app_uuid = uuid.UUID(str(app_id))
    except ValueError:
        raise app_not_found(app_id) from None
    apps = apps_visible_to(actor).filter(pk=app_uuid)
    if for_update:
        apps = apps.select_for_update(of=("self",))
    app = apps.first()
    if app is None:
        raise app_not_found(app_id)
    role: str = app.caller_role  # type: ignore[attr-defined]
    role_check(app=app, role=role, need=need)
    return app, role


@transaction.atomic
def membership_set(*, actor: Any, app: App, user: Any, role: str) -> Membership:
    """Give `user` a role (editor or viewer) in `app`; only the owner may share."""
    _locked, _owner_role = app_for(actor=actor, app_id=app.id, need="own", for_update=True)
    if user.pk == app.owner_id:
        raise InvalidInput(
            "The owner's own role cannot change: an app has exactly one owner.",
            errors=[{"path": "$.user", "message": "is the app's owner"}],
        )
    if role not in SHAREABLE_ROLES:
        raise InvalidInput(
            f"A shared app's role must be 'editor' or 'viewer', got {role!r}.",
            errors=[{"path": "$.role", "message": "must be 'editor' or 'viewer'"}],
        )
    membership, _ = Membership.objects.update_or_create(user=user, app=app, defaults={"role": role})
    return membership
