"""Sharing an app over REST: its members, the owner's invitations, and the invitee's answers.

Who may do what is apps_registry.access's; these views validate the body, call one service or
selector, and shape the result.
"""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps_registry.access import app_for
from apps_registry.api.serializers import IsoDateTimeField, StrictInputSerializer, input_validated
from apps_registry.selectors import invitations_pending_for, invitations_pending_of, members_of
from apps_registry.services.sharing import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_revoke,
    membership_leave,
    membership_remove,
    membership_role_change,
)


def _role_field() -> serializers.JSONField:
    # Any JSON, as for 'user': the services say what a role must be, with its path.
    return serializers.JSONField(error_messages={"required": "Missing 'role': 'editor' or 'viewer'."})


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField()


class SentInvitationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    role = serializers.CharField()
    created_at = IsoDateTimeField()


class AppMembersView(APIView):
    """GET /api/apps/<app_id>/members/: the app's members and their roles (any member).
    POST {"user": "name-or-email", "role": "editor"}: the owner invites someone."""

    class InputSerializer(StrictInputSerializer):
        example = '{"user": "bob", "role": "editor"}'
        takes = "an invitation takes only 'user' (a username or email) and 'role' ('editor' or 'viewer')."

        user = serializers.JSONField(error_messages={"required": "Missing 'user': the username or email to invite."})
        role = _role_field()

    OutputSerializer = MemberSerializer

    def get(self, request: Request, app_id: str) -> Response:
        app, _role = app_for(actor=request.user, app_id=app_id, need="read")
        return Response({"ok": True, "value": self.OutputSerializer(members_of(app), many=True).data})

    def post(self, request: Request, app_id: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        invitation = invitation_create(actor=request.user, app_id=app_id, invitee=data["user"], role=data["role"])
        value = {
            "id": invitation.pk,
            "username": invitation.invitee.get_username(),
            "role": invitation.role,
            "created_at": invitation.created_at,
        }
        return Response({"ok": True, "value": SentInvitationSerializer(value).data}, status=status.HTTP_201_CREATED)


class AppMemberView(APIView):
    """PATCH /api/apps/<app_id>/members/<username>/ {"role": "viewer"}: the owner changes a member's role.
    DELETE: the owner removes the member, or a member removes themselves (leaves the app)."""

    class InputSerializer(StrictInputSerializer):
        example = '{"role": "viewer"}'
        takes = "a member change takes only 'role' ('editor' or 'viewer')."

        role = _role_field()

    OutputSerializer = MemberSerializer

    def patch(self, request: Request, app_id: str, username: str) -> Response:
        data = input_validated(self.InputSerializer, request.data)
        membership = membership_role_change(actor=request.user, app_id=app_id, username=username, role=data["role"])
        value = {"username": username, "role": membership.role}
        return Response({"ok": True, "value": self.OutputSerializer(value).data})

    def delete(self, request: Request, app_id: str, username: str) -> Response:
        if username == request.user.get_username():
            membership_leave(actor=request.user, app_id=app_id)
            return Response({"ok": True, "value": {"app_id": app_id, "left": True}})
        membership_remove(actor=request.user, app_id=app_id, username=username)
        return Response({"ok": True, "value": {"app_id": app_id, "removed": username}})


class AppInvitationsView(APIView):
    """GET /api/apps/<app_id>/invitations/: the owner's invitations still waiting for an answer."""

    OutputSerializer = SentInvitationSerializer

    def get(self, request: Request, app_id: str) -> Response:
        app, _role = app_for(actor=request.user, app_id=app_id, need="own")
        return Response({"ok": True, "value": self.OutputSerializer(invitations_pending_of(app), many=True).data})


class AppInvitationView(APIView):
    """DELETE /api/apps/<app_id>/invitations/<invitation_id>/: the owner revokes a pending invitation."""

    def delete(self, request: Request, app_id: str, invitation_id: str) -> Response:
        invitation = invitation_revoke(actor=request.user, app_id=app_id, invitation_id=invitation_id)
        return Response({"ok": True, "value": {"id": invitation.pk, "status": invitation.status}})


class InvitationListView(APIView):
    """GET /api/invitations/: invitations waiting for the caller's answer (app name, inviter, role)."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        app_name = serializers.CharField()
        invited_by = serializers.CharField()
        role = serializers.CharField()
        created_at = IsoDateTimeField()

    def get(self, request: Request) -> Response:
        invitations = self.OutputSerializer(invitations_pending_for(request.user), many=True).data
        return Response({"ok": True, "value": invitations})


class InvitationAcceptView(APIView):
    """POST /api/invitations/<invitation_id>/accept/: become a member with the invitation's role."""

    class OutputSerializer(serializers.Serializer):
        app_id = serializers.UUIDField(source="app.id")
        app_name = serializers.CharField(source="app.name")
        role = serializers.CharField()

    def post(self, request: Request, invitation_id: str) -> Response:
        membership = invitation_accept(actor=request.user, invitation_id=invitation_id)
        return Response({"ok": True, "value": self.OutputSerializer(membership).data})


class InvitationDeclineView(APIView):
    """POST /api/invitations/<invitation_id>/decline/: turn the invitation down."""

    def post(self, request: Request, invitation_id: str) -> Response:
        invitation = invitation_decline(actor=request.user, invitation_id=invitation_id)
        return Response({"ok": True, "value": {"id": invitation.pk, "status": invitation.status}})
