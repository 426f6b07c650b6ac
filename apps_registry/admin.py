"""The staff console. Declarative; actions call services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from apps_registry.models import (
    Advisory,
    ApiToken,
    App,
    AuditEvent,
    Feedback,
    FeedbackResponse,
    Membership,
    Record,
    Route,
    Storage,
)
from apps_registry.services.staff import advisories_resolve
from apps_registry.services.tokens import token_revoke


class ReadOnlyAdminMixin:
    """Staff may look, never change: for records and the audit trail."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RouteInline(admin.StackedInline):
    model = Route
    extra = 0
    fields = ("name", "kind", "description", "version", "input_schema", "output_schema", "definition")
    readonly_fields = ("version",)
    show_change_link = True


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "route_count", "record_count", "open_advisory_count", "updated_at")
    search_fields = ("name", "description", "owner__username", "owner__email", "=id")
    list_filter = ("created_at",)
    readonly_fields = ("id", "created_at", "updated_at")
    autocomplete_fields = ("owner",)
    inlines = (MembershipInline, RouteInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[App]:
        return (
            super()
            .get_queryset(request)
            .select_related("owner")
            .annotate(
                _route_count=Count("routes", distinct=True),
                _record_count=Count("storage__records", distinct=True),
                _open_advisory_count=Count("advisories", filter=Q(advisories__resolved=False), distinct=True),
            )
        )

    @admin.display(description="routes", ordering="_route_count")
    def route_count(self, obj: Any) -> int:
        return int(obj._route_count)

    @admin.display(description="records", ordering="_record_count")
    def record_count(self, obj: Any) -> int:
        return int(obj._record_count)

    @admin.display(description="open advisories", ordering="_open_advisory_count")
    def open_advisory_count(self, obj: Any) -> int:
        return int(obj._open_advisory_count)


@admin.register(Route)
class RouteAdmin(admin.ModelAdmin):
    list_display = ("name", "app", "kind", "version", "updated_at")
    list_filter = ("kind",)
    search_fields = ("name", "description", "app__name")
    list_select_related = ("app",)
    readonly_fields = ("version", "created_at", "updated_at")
    autocomplete_fields = ("app",)


@admin.register(Advisory)
class AdvisoryAdmin(admin.ModelAdmin):
    list_display = ("kind", "severity", "app", "short_summary", "resolved", "created_at")
    list_filter = ("resolved", "severity", "kind", ("app", admin.RelatedOnlyFieldListFilter))
    search_fields = ("summary", "user_summary", "app__name", "kind")
    list_select_related = ("app",)
    readonly_fields = ("created_at", "updated_at", "resolved_at")
    actions = ("resolve_selected",)
    autocomplete_fields = ("app",)

    @admin.display(description="summary")
    def short_summary(self, obj: Advisory) -> str:
        return obj.summary if len(obj.summary) <= 90 else obj.summary[:89] + "…"

    @admin.action(description="Resolve selected advisories")
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[Advisory]) -> None:
        changed = advisories_resolve(advisories=queryset)
        self.message_user(request, f"Resolved {changed} advisor{'y' if changed == 1 else 'ies'}.", messages.SUCCESS)


class FeedbackResponseInline(admin.StackedInline):
    model = FeedbackResponse
    extra = 1
    fields = ("body", "staff_author", "created_at", "read_at")
    readonly_fields = ("staff_author", "created_at", "read_at")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Sent answers may have been delivered already; staff add a new one instead of rewriting.
        return False


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ("short_body", "app", "author", "created_at", "response_count", "answered_and_read")
    list_filter = ("created_at", ("app", admin.RelatedOnlyFieldListFilter))
    search_fields = ("body", "app__name", "author__username")
    readonly_fields = ("app", "author", "body", "created_at", "updated_at")
    inlines = (FeedbackResponseInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        return (
            super()
            .get_queryset(request)
            .select_related("app", "author")
            .annotate(
                _responses=Count("responses", distinct=True),
                _read=Count("responses", filter=Q(responses__read_at__isnull=False), distinct=True),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="feedback")
    def short_body(self, obj: Feedback) -> str:
        return obj.body if len(obj.body) <= 80 else obj.body[:79] + "…"

    @admin.display(description="responses", ordering="_responses")
    def response_count(self, obj: Any) -> int:
        return int(obj._responses)

    @admin.display(description="read by user", boolean=True)
    def answered_and_read(self, obj: Any) -> bool | None:
        if not obj._responses:
            return None
        return bool(obj._read == obj._responses)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        instances = formset.save(commit=False)
        for instance in instances:
            if isinstance(instance, FeedbackResponse) and instance.staff_author_id is None:
                instance.staff_author = request.user
            instance.save()
        for obj in formset.deleted_objects:
            obj.delete()
        formset.save_m2m()


@admin.register(FeedbackResponse)
class FeedbackResponseAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("feedback", "staff_author", "created_at", "read_at")
    list_filter = (("read_at", admin.EmptyFieldListFilter),)
    search_fields = ("body", "feedback__app__name", "staff_author__username")
    list_select_related = ("feedback__app", "feedback__author", "staff_author")


@admin.register(Storage)
class StorageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("app_name", "app_uuid", "owner", "attached", "detached_at", "created_at")
    list_filter = (("detached_at", admin.EmptyFieldListFilter),)
    search_fields = ("app_name", "=app_uuid", "owner__username")
    list_select_related = ("owner",)

    @admin.display(description="attached", boolean=True)
    def attached(self, obj: Storage) -> bool:
        return not obj.is_detached


@admin.register(Record)
class RecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("record_id", "collection", "app_name", "version", "updated_at")
    list_filter = ("collection", ("storage__app", admin.RelatedOnlyFieldListFilter))
    search_fields = ("record_id", "collection", "storage__app_name")
    list_select_related = ("storage",)
    show_full_result_count = False

    @admin.display(description="app", ordering="storage__app_name")
    def app_name(self, obj: Record) -> str:
        return obj.storage.app_name


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "last_used_at", "expires_at", "is_revoked")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "expires_at")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    # The secret is never shown: only its hash is stored, and even that stays out of the console.
    fields = ("prefix", "name", "user", "created_at", "last_used_at", "expires_at", "revoked_at")
    readonly_fields = ("prefix", "user", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A token's secret can only be shown once, at creation: use `manage.py create_token`.
        return False

    @admin.display(description="revoked", boolean=True)
    def is_revoked(self, obj: ApiToken) -> bool:
        return obj.revoked

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("created_at", "actor_repr", "action", "app_id")
    list_filter = ("action", "created_at")
    search_fields = ("actor_repr", "=app_id", "action")
    date_hierarchy = "created_at"
