from __future__ import annotations

from django.urls import path

from apps_registry.api import apps, bundles, changes, definitions, feedback, hooks, runs, sharing

app_name = "api"

urlpatterns = [
    path("apps/", apps.AppListView.as_view(), name="app-list"),
    path("apps/definitions/", definitions.DefinitionCreateView.as_view(), name="definition-create"),
    path("apps/bundles/", bundles.BundleImportView.as_view(), name="bundle-import"),
    path("apps/<str:app_id>/bundle/", bundles.AppBundleView.as_view(), name="app-bundle"),
    path("apps/<str:app_id>/definition/", definitions.DefinitionView.as_view(), name="app-definition"),
    path("apps/<str:app_id>/feedback/", feedback.AppFeedbackView.as_view(), name="app-feedback"),
    path("apps/<str:app_id>/run/<str:op>/", runs.RouteRunView.as_view(), name="app-run"),
    path("apps/<str:app_id>/changes/", changes.AppChangesView.as_view(), name="app-changes"),
    path("changes/<str:change_id>/revert/", changes.ChangeRevertView.as_view(), name="change-revert"),
    path("apps/<str:app_id>/hooks/", hooks.AppHooksView.as_view(), name="app-hooks"),
    path("apps/<str:app_id>/hooks/<str:hook_id>/", hooks.AppHookView.as_view(), name="app-hook"),
    path("apps/<str:app_id>/hooks/<str:hook_id>/rotate/", hooks.AppHookRotateView.as_view(), name="app-hook-rotate"),
    path("apps/<str:app_id>/members/", sharing.AppMembersView.as_view(), name="app-members"),
    path("apps/<str:app_id>/members/<str:username>/", sharing.AppMemberView.as_view(), name="app-member"),
    path("apps/<str:app_id>/invitations/", sharing.AppInvitationsView.as_view(), name="app-invitations"),
    path(
        "apps/<str:app_id>/invitations/<str:invitation_id>/",
        sharing.AppInvitationView.as_view(),
        name="app-invitation",
    ),
    path("invitations/", sharing.InvitationListView.as_view(), name="invitation-list"),
    path("invitations/<str:invitation_id>/accept/", sharing.InvitationAcceptView.as_view(), name="invitation-accept"),
    path(
        "invitations/<str:invitation_id>/decline/", sharing.InvitationDeclineView.as_view(), name="invitation-decline"
    ),
]
