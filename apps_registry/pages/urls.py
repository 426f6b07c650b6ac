"""URLs of the people's pages. Account URLs keep Django's auth names (login, logout, password_change, ...)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from apps_registry.pages import (
    app_views,
    bundle_views,
    history_views,
    hook_views,
    live,
    notice_views,
    public_views,
    schedule_views,
    sharing_views,
    template_views,
    transfer_views,
    views,
)

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="home"), name="logout"),
    path(
        "accounts/password/change/",
        auth_views.PasswordChangeView.as_view(template_name="accounts/password_change_form.html"),
        name="password_change",
    ),
    path(
        "accounts/password/change/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="accounts/password_change_done.html"),
        name="password_change_done",
    ),
    path(
        "accounts/password/reset/",
        views.PasswordResetView.as_view(
            template_name="accounts/password_reset_form.html",
            email_template_name="accounts/password_reset_email.txt",
            subject_template_name="accounts/password_reset_subject.txt",
            success_url=reverse_lazy("password_reset_done"),
        ),
        name="password_reset",
    ),
    path(
        "accounts/password/reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name="accounts/password_reset_done.html"),
        name="password_reset_done",
    ),
    path(
        "accounts/password/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(template_name="accounts/password_reset_confirm.html"),
        name="password_reset_confirm",
    ),
    path(
        "accounts/password/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="accounts/password_reset_complete.html"),
        name="password_reset_complete",
    ),
    path("accounts/delete/", views.account_delete_view, name="account_delete"),
    path("accounts/email/", views.email_status, name="email_status"),
    path("accounts/email/confirm/<str:token>/", views.email_confirm_view, name="email_confirm"),
    path("connect/", views.connect, name="connect"),
    path("connect/token/", views.token_created, name="token_created"),
    path("connect/tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
    # --- App pages: each app's page generated from its definition (apps_registry/pages/app_views.py) ---
    path("apps/<uuid:app_id>/", app_views.app_page, name="app_page"),
    path("apps/<uuid:app_id>/run/<str:op>/", app_views.route_submit, name="app_route_submit"),
    path("apps/<uuid:app_id>/feedback/", app_views.feedback_submit, name="app_feedback"),
    path("apps/<uuid:app_id>/records/<str:collection>/", app_views.records_page, name="app_records"),
    path("apps/<uuid:app_id>/changes/", live.app_changes, name="app_changes"),
    path("apps/<uuid:app_id>/pick/<str:collection>/", app_views.picker_options, name="app_picker"),
    path("apps/<uuid:app_id>/export.json", app_views.export_json, name="app_export_json"),
    path("apps/<uuid:app_id>/export.csv", app_views.export_csv, name="app_export_csv"),
    path("apps/<uuid:app_id>/delete/", app_views.app_delete_page, name="app_delete"),
    # --- Activity: the change log, a record's history, revert (apps_registry/pages/history_views.py) ---
    path("apps/<uuid:app_id>/activity/", history_views.activity_page, name="app_activity"),
    path(
        "apps/<uuid:app_id>/records/<str:collection>/<path:record_id>/history/",
        history_views.record_history_page,
        name="app_record_history",
    ),
    path(
        "apps/<uuid:app_id>/changes/<str:change_id>/revert/",
        history_views.change_revert_submit,
        name="app_change_revert",
    ),
    # --- Schedules (apps_registry/pages/schedule_views.py) ---
    path("apps/<uuid:app_id>/schedules/", schedule_views.schedules_page, name="app_schedules"),
    path("apps/<uuid:app_id>/schedules/new/", schedule_views.schedule_create_submit, name="app_schedule_create"),
    path(
        "apps/<uuid:app_id>/schedules/<uuid:schedule_id>/",
        schedule_views.schedule_change_submit,
        name="app_schedule_change",
    ),
    # --- Webhooks (apps_registry/pages/hook_views.py) ---
    path("apps/<uuid:app_id>/hooks/", hook_views.hooks_page, name="app_hooks"),
    path("apps/<uuid:app_id>/hooks/new/", hook_views.hook_create_submit, name="app_hook_create"),
    path("apps/<uuid:app_id>/hooks/<uuid:hook_id>/", hook_views.hook_change_submit, name="app_hook_change"),
    # --- Rename and hand over (apps_registry/pages/transfer_views.py) ---
    path("apps/<uuid:app_id>/rename/", transfer_views.rename_submit, name="app_rename"),
    path("apps/<uuid:app_id>/transfer/", transfer_views.transfer_submit, name="app_transfer"),
    path("transfers/<int:transfer_id>/", transfer_views.transfer_answer, name="transfer_answer"),
    # --- Bundles (apps_registry/pages/bundle_views.py): an app as one file, and back ---
    path("apps/<uuid:app_id>/bundle/", bundle_views.bundle_download, name="app_bundle"),
    path("apps/import/", bundle_views.bundle_upload, name="app_import"),
    path("bundles/<str:token>/", bundle_views.bundle_signed_download, name="bundle_signed_download"),
    # --- Templates (apps_registry/pages/template_views.py): the gallery, a template, remix, publishing ---
    path("templates/", template_views.gallery, name="templates"),
    path("templates/<uuid:template_id>/", template_views.template_page, name="template_page"),
    path("templates/<uuid:template_id>/remix/", template_views.remix_submit, name="template_remix"),
    path("apps/<uuid:app_id>/template/", template_views.app_template_page, name="app_template"),
    # --- Public apps (apps_registry/pages/public_views.py): anyone's page of an app made public, the owner's card ---
    path("p/<str:handle>/", public_views.public_page, name="public_page"),
    path("p/<str:handle>/run/<str:op>/", public_views.public_route_submit, name="public_route_submit"),
    path("apps/<uuid:app_id>/public/", public_views.public_settings_submit, name="app_public"),
    # --- Notices (apps_registry/pages/notice_views.py): read on the home page, turned off per app ---
    path("notices/read/", notice_views.notices_read_all_submit, name="notices_read_all"),
    path("notices/<int:receipt_id>/read/", notice_views.notice_read_submit, name="notice_read"),
    path("apps/<uuid:app_id>/notices/", notice_views.notices_mute_submit, name="app_notices_mute"),
    # --- Sharing (apps_registry/pages/sharing_views.py) ---
    path("apps/<uuid:app_id>/members/invite/", sharing_views.member_invite, name="app_member_invite"),
    path("apps/<uuid:app_id>/members/<str:username>/role/", sharing_views.member_role_change, name="app_member_role"),
    path("apps/<uuid:app_id>/members/<str:username>/remove/", sharing_views.member_remove, name="app_member_remove"),
    path(
        "apps/<uuid:app_id>/invitations/<int:invitation_id>/revoke/",
        sharing_views.invitation_revoke_view,
        name="app_invitation_revoke",
    ),
    path("apps/<uuid:app_id>/leave/", sharing_views.member_leave, name="app_leave"),
    path("invitations/<int:invitation_id>/accept/", sharing_views.invitation_accept_view, name="invitation_accept"),
    path("invitations/<int:invitation_id>/decline/", sharing_views.invitation_decline_view, name="invitation_decline"),
]
