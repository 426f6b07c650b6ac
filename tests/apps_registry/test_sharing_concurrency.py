"""Sharing calls racing each other on PostgreSQL, each in its own thread and connection."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from apps_registry.exceptions import CharmingError, OperationFailed
from apps_registry.models import AuditEvent, Invitation, Membership
from apps_registry.services.sharing import invitation_accept, invitation_create, invitation_revoke
from tests.factories import make_app

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_threads(*calls):
    """Run each callable in its own thread (and database connection) after a common start."""
    barrier = Barrier(len(calls))

    def one(call):
        try:
            barrier.wait()
            return call()
        except CharmingError as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(one, calls))


def test_two_invitations_of_the_same_person_at_once_leave_one_pending(user, other_user):
    budget = make_app(owner=user, name="Budget")

    results = in_threads(
        *(
            lambda role=role: invitation_create(actor=user, app_id=budget.id, invitee="bob", role=role)
            for role in ("editor", "viewer")
        )
    )

    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], OperationFailed), results
    assert "already has a pending invitation to app 'Budget'" in refused[0].message
    assert Invitation.objects.filter(status="pending").count() == 1
    assert AuditEvent.objects.filter(action="membership.invite").count() == 1


def test_accept_and_revoke_at_once_do_exactly_one_of_them(user, other_user):
    budget = make_app(owner=user, name="Budget")
    invitation = invitation_create(actor=user, app_id=budget.id, invitee="bob", role="editor")

    accepted, revoked = in_threads(
        lambda: invitation_accept(actor=other_user, invitation_id=invitation.pk),
        lambda: invitation_revoke(actor=user, app_id=budget.id, invitation_id=invitation.pk),
    )

    invitation.refresh_from_db()
    is_member = Membership.objects.filter(app=budget, user=other_user).exists()
    if isinstance(revoked, OperationFailed):
        assert not isinstance(accepted, Exception) and invitation.status == "accepted" and is_member
        assert "was already accepted on " in revoked.message
    else:
        assert isinstance(accepted, OperationFailed), (accepted, revoked)
        assert invitation.status == "revoked" and not is_member
        assert "was already revoked on " in accepted.message
