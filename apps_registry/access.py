"""Who may do what with an app: the one table of roles and needs, and the only lookups that apply it.

Every service, selector, the REST API, the admin and the MCP tools reach an app on a user's behalf
through `app_for` (or `apps_visible_to` for lists). An app the caller cannot see is reported exactly
like one that does not exist. Sharing is a rule of this module too: only the owner ("own" in the
table) invites, revokes, changes roles and removes members; only the invitee sees and answers an
invitation (`invitation_for`); any member but the owner may leave (`leave_check`). The flows that apply
these rules (with their audit) are apps_registry.services.sharing.

A role says what a person may do in an app; a token's scopes say what the agent holding it may do
for that person (`NEED_SCOPES`, checked by every transport with `scope_check` before it calls a
service). Both must allow a need.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal, get_args

from django.db import transaction
from django.db.models import F, QuerySet

from apps_registry.exceptions import (
    AccessDenied,
    CharmingError,
    Forbidden,
    InsufficientScope,
    InvalidInput,
    NotFound,
    OperationFailed,
    app_not_found,
)
from apps_registry.models import App, Invitation, InvitationStatus, Membership, Role
from apps_registry.values import parse_uuid

Need = Literal["read", "query", "feedback", "membership", "mutate", "author", "own", "delete"]
NEEDS: tuple[Need, ...] = get_args(Need)

_ALL_ROLES = frozenset({Role.OWNER, Role.EDITOR, Role.VIEWER})

# The table. read: see the app and its routes; query: run its queries; feedback: send feedback on it
# to staff; membership: answer one's own invitation, leave; mutate: run its mutations; author: read,
# replace or clear its definition; own: share it, manage its members; delete: delete it.
ALLOWED_ROLES: dict[Need, frozenset[str]] = {
    "read": _ALL_ROLES,
    "query": _ALL_ROLES,
    "feedback": _ALL_ROLES,
    # membership: answer one's own invitation or leave an app (who exactly: invitation_for, leave_check).
    "membership": _ALL_ROLES,
    "mutate": frozenset({Role.OWNER, Role.EDITOR}),
    "author": frozenset({Role.OWNER, Role.EDITOR}),
    "own": frozenset({Role.OWNER}),
    "delete": frozenset({Role.OWNER}),
}

# The OAuth scopes (and personal tokens' scopes), with what each lets an agent do in the words the
# consent page and the /connect/ page show.
Scope = Literal["apps:read", "apps:write", "apps:delete"]
READ: Scope = "apps:read"
WRITE: Scope = "apps:write"
DELETE: Scope = "apps:delete"
SCOPES: dict[str, str] = {
    READ: "See your apps and read the data stored in them",
    WRITE: "Add, change and remove data in your apps, create or edit apps, and share them",
    DELETE: "Delete your apps",
}
ALL_SCOPES: frozenset[str] = frozenset(SCOPES)
# What the 401 challenge tells a host to ask for: least privilege, so hosts do not ask for deletion
# up front; a host steps up to apps:delete when a delete_app call is refused for lack of it.
CHALLENGE_SCOPES: tuple[str, ...] = (READ, WRITE)

# The scope each need takes. Reading and querying read; whatever changes an app's data, its
# definition, its feedback or who may reach it writes. Sharing is an owner's power like deletion,
# but it destroys nothing and the owner can undo it, so it is apps:write; apps:delete is kept for
# the one irreversible act, deleting an app (and its data).
NEED_SCOPES: dict[Need, Scope] = {
    "read": READ,
    "query": READ,
    "feedback": WRITE,
    "membership": WRITE,
    "mutate": WRITE,
    "author": WRITE,
    "own": WRITE,
    "delete": DELETE,
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
    if need in ("own", "delete"):
        return (
            f"Only the app's owner can delete, share or manage app '{app_name}'; "
            f"you are {_with_article(role)}, not the owner."
        )
    return f"You are {_with_article(role)} of app '{app_name}', which does not allow this."


def scope_for(need: Need) -> Scope:
    """The scope a token needs for `need`."""
    return NEED_SCOPES[need]


def scope_refusal_message(scope: str) -> str:
    """The one wording of a refusal for lack of a scope (transports add how to get it)."""
    return (
        f"This token does not carry the {scope} scope ({SCOPES[scope].lower()}), which this needs. "
        f"Connect again granting {scope}, or use a token that has it."
    )


def scope_check(*, scopes: frozenset[str], need: Need) -> None:
    """InsufficientScope unless a token with `scopes` may do `need`."""
    scope = NEED_SCOPES[need]
    if scope not in scopes:
        raise InsufficientScope(scope_refusal_message(scope), scope=scope, need=need)


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


# --- public apps: anonymous visitors (the flows: apps_registry/services/public_apps.py) ---

VISITOR = "visitor"  # caller.role of an anonymous visitor of a public app (no account, no membership)


@dataclass(frozen=True)
class Visitor:
    """An anonymous visitor of a public app, as the actor of a route run. `caller_id` is a pseudonym of their
    address for this app alone (services.public_apps.visitor_for); `owner_id` is the account whose fair share
    their CEL work takes. No account: `pk` is None, and the change log names them "visitor"."""

    app_id: uuid.UUID
    owner_id: int
    caller_id: str
    address_key: str
    pk: None = None

    def get_username(self) -> str:
        return VISITOR


def visitor_check(*, opened: list[str], op: str, kind: str) -> None:
    """A visitor may run every query of a public app, and only the mutations its owner opened to visitors."""
    if kind == "mutation" and op not in opened:
        raise Forbidden("This action is not open to visitors of this app; only its members can run it.")


def apps_visible_to(actor: Any) -> QuerySet[App]:
    """Apps the actor owns or is a member of, each annotated with `caller_role` (the actor's role)."""
    # One membership per (user, app), so the join never repeats an app.
    return App.objects.filter(memberships__user=actor).annotate(caller_role=F("memberships__role"))


def app_for(*, actor: Any, app_id: uuid.UUID | str, need: Need, for_update: bool = False) -> tuple[App, str]:
    """The app and the actor's role in it, if that role allows `need`.

    NotFound (the same for a missing app and an invisible one) or AccessDenied. `for_update` locks the
    app's row until the end of the caller's transaction.
    """
    app_uuid = parse_uuid(app_id)
    if app_uuid is None:
        raise app_not_found(app_id)
    apps = apps_visible_to(actor).filter(pk=app_uuid)
    if for_update:
        apps = apps.select_for_update(of=("self",))
    app = apps.first()
    if app is None:
        raise app_not_found(app_id)
    role: str = app.caller_role  # type: ignore[attr-defined]
    role_check(app=app, role=role, need=need)
    return app, role


def manager_app_for(*, actor: Any, app_id: Any, what: str, for_update: bool = False) -> App:
    """The app, if `actor` may manage its `what` (its schedules, its webhooks): the owner and editors, as for its
    definition. NotFound as app_for; AccessDenied naming `what` for anyone else."""
    app, role = app_for(actor=actor, app_id=app_id, need="read", for_update=for_update)
    if role not in ALLOWED_ROLES["author"]:
        raise AccessDenied(
            f"Only the app's owner and editors can manage the {what} of app '{app.name}'; "
            f"you are {_with_article(role)}.",
            app_id=app.id,
            app_name=app.name,
            role=role,
            need="author",
        )
    return app


def still_authors(*, user: Any, app_id: Any) -> bool:
    """Whether `user` (who set up a schedule or a webhook, which run as them) can still change the app: an active
    account that is its owner or an editor."""
    if not user.is_active:  # a deactivated account acts no more
        return False
    try:
        app_for(actor=user, app_id=app_id, need="author")
    except CharmingError:
        return False
    return True


def shareable_role_check(role: object) -> str:
    """`role` if an owner may give it to someone else (editor or viewer); InvalidInput otherwise."""
    if role not in SHAREABLE_ROLES:
        raise InvalidInput(
            f"A shared app's role must be 'editor' or 'viewer', got {role!r}.",
            errors=[{"path": "$.role", "message": "must be 'editor' or 'viewer'"}],
        )
    return str(role)


def owner_membership_check(*, app: App, user: Any) -> None:
    """InvalidInput if `user` is the app's owner, whose membership no one may change: one owner per app."""
    if user.pk == app.owner_id:
        raise InvalidInput(
            "The owner's own role cannot change: an app has exactly one owner.",
            errors=[{"path": "$.user", "message": "is the app's owner"}],
        )


def leave_check(*, app: App, role: str) -> None:
    """Forbidden for the owner: an app keeps its one owner, who deletes it rather than leaving it."""
    if role == Role.OWNER:
        raise Forbidden(
            f"You own app '{app.name}' and cannot leave it: an app has exactly one owner. "
            "Delete the app instead, or remove its other members."
        )


def invitation_for(*, actor: Any, invitation_id: int | str, for_update: bool = False) -> Invitation:
    """An invitation addressed to the actor (any status); NotFound for anyone else's, exactly as for a missing one.

    A pending invitation shows its app's name and its inviter, nothing more: it grants no access to the app.
    """
    not_found = NotFound(f"No invitation with id {invitation_id} is addressed to you.")
    pk = _invitation_pk(invitation_id)
    if pk is None:
        raise not_found
    invitations = Invitation.objects.select_related("app", "invited_by").filter(pk=pk, invitee=actor)
    invitation = invitations.first()
    if invitation is None:
        raise not_found
    if for_update:
        # Lock the app first, then the invitation: the owner's calls (app_for(for_update=True)) take them
        # in that order, and accepting inserts a membership, which waits on the app's row anyway.
        list(App.objects.select_for_update().filter(pk=invitation.app_id).values_list("pk", flat=True))
        invitation = invitations.select_for_update(of=("self",)).first()
        if invitation is None:
            raise not_found
    return invitation


def invitation_of_app(*, app: App, invitation_id: int | str) -> Invitation:
    """One of `app`'s invitations (any status), locked; reach `app` with need "own" first. NotFound otherwise."""
    pk = _invitation_pk(invitation_id)
    invitations = Invitation.objects.select_for_update(of=("self",)).select_related("app", "invitee")
    invitation = invitations.filter(app=app, pk=pk).first() if pk is not None else None
    if invitation is None:
        raise NotFound(f"App '{app.name}' has no invitation with id {invitation_id}.")
    return invitation


def _invitation_pk(value: int | str) -> int | None:
    """The invitation id in `value`, or None when it cannot be one (not a number, beyond a 64-bit key)."""
    text = str(value)
    if not (text.isascii() and text.isdigit()):
        return None
    pk = int(text)
    return pk if 0 < pk < 2**63 else None


def invitation_pending_check(invitation: Invitation) -> None:
    """OperationFailed unless the invitation still waits for its answer."""
    if invitation.status != InvitationStatus.PENDING:
        when = f" on {invitation.responded_at:%Y-%m-%d}" if invitation.responded_at else ""
        raise OperationFailed(
            f"The invitation to app '{invitation.app.name}' was already {invitation.status}{when}; "
            "it can no longer be answered or revoked.",
            details={"invitation_id": invitation.pk, "status": invitation.status},
        )


@transaction.atomic
def membership_set(*, actor: Any, app: App, user: Any, role: str) -> Membership:
    """Give `user` a role (editor or viewer) in `app` directly, without an invitation; only the owner may.

    For fixtures and operators; people share through invitations (apps_registry.services.sharing).
    """
    _locked, _owner_role = app_for(actor=actor, app_id=app.id, need="own", for_update=True)
    owner_membership_check(app=app, user=user)
    shareable_role_check(role)
    membership, _ = Membership.objects.update_or_create(user=user, app=app, defaults={"role": role})
    return membership
