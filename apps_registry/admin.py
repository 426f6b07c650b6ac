"""The staff console. Declarative; actions call services."""

from __future__ import annotations

import difflib
import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from apps_registry.exceptions import CharmingError
from apps_registry.models import (
    Advisory,
    ApiToken,
    App,
    AppVersion,
    AuditEvent,
    Change,
    ChangeEntry,
    ConfirmedEmail,
    Feedback,
    FeedbackResponse,
    Hook,
    HookDelivery,
    Invitation,
    Membership,
    PublicApp,
    PurgeJob,
    Record,
    Route,
    Schedule,
    ScheduleRun,
    Storage,
    Template,
)
from apps_registry.services.public_apps import public_apps_close_by_staff
from apps_registry.services.purge_jobs import purge_jobs_enqueue
from apps_registry.services.retention import (
    retained_until,
    retention_cutoff,
    storage_restore,
)
from apps_registry.services.staff import advisories_resolve, feedback_respond
from apps_registry.services.templates import templates_list_set
from apps_registry.services.tokens import token_revoke
from apps_registry.values import clip


class ReadOnlyAdminMixin:
    """Staff may look, never change: for records and the audit trail."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RouteInline(ReadOnlyAdminMixin, admin.StackedInline):
    # Routes change only through the author's definition (import_app, the definition API), which
    # checks the whole app, bumps versions and recomputes advisories; an edit here would skip all that.
    model = Route
    extra = 0
    fields = ("name", "kind", "description", "version", "input_schema", "output_schema", "definition")
    show_change_link = True


DIFF_MAX_LINES = 300
DELIVERIES_SHOWN_IN_ADMIN = 20


def _definition_lines(definition: Any) -> list[str]:
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def definition_diff(before: Any, after: Any) -> str:
    """A unified diff of two saved definitions (as sorted, indented JSON), at most DIFF_MAX_LINES lines."""
    lines = list(
        difflib.unified_diff(_definition_lines(before), _definition_lines(after), "before", "after", lineterm="", n=2)
    )
    if len(lines) > DIFF_MAX_LINES:
        lines = lines[:DIFF_MAX_LINES] + [f"... ({len(lines) - DIFF_MAX_LINES} more lines)"]
    return "\n".join(lines)


class AppVersionInline(ReadOnlyAdminMixin, admin.StackedInline):
    # The history of saves: each definition whole, as written, and what changed from the one before.
    # Versions are written by the definition service only; restoring one is update_app's restore_version.
    model = AppVersion
    extra = 0
    ordering = ("-number",)
    fields = ("number", "author_repr", "created_at", "summary", "restored_from", "diff")
    readonly_fields = ("number", "author_repr", "created_at", "summary", "restored_from", "diff")
    verbose_name = "saved version"
    verbose_name_plural = "history of the definition (newest first)"

    @admin.display(description="Changes from the version before")
    def diff(self, version: AppVersion) -> str:
        previous = AppVersion.objects.filter(app_id=version.app_id, number__lt=version.number).order_by("-number")
        before = previous.values_list("definition", flat=True).first()
        text = definition_diff(before if before is not None else {}, version.definition)
        return format_html('<pre class="definition-diff">{}</pre>', text or "(no change)")


class MembershipInline(ReadOnlyAdminMixin, admin.TabularInline):
    # Ownership and sharing go through services (the owner row must match App.owner and the storage's owner).
    model = Membership
    extra = 0
    fields = ("user", "role", "created_at")
    readonly_fields = ("user", "role", "created_at")


class InvitationInline(ReadOnlyAdminMixin, admin.TabularInline):
    # Invitations are sent, answered and revoked by the owner and the invitee, through the sharing services.
    model = Invitation
    extra = 0
    fields = ("invitee", "role", "status", "invited_by", "created_at", "responded_at")
    readonly_fields = fields


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "route_count", "record_count", "open_advisory_count", "updated_at")
    search_fields = ("name", "description", "owner__username", "owner__email", "=id")
    list_filter = ("created_at",)
    # The owner is fixed (it must match the owner membership and the storage's owner); collections come
    # from the definition, like routes.
    readonly_fields = ("id", "owner", "version", "collections", "created_at", "updated_at")
    inlines = (MembershipInline, InvitationInline, RouteInline, AppVersionInline)
    actions = ("purge_selected",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Apps are created from definitions (import_app, the definition API), with their owner and storage.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The stock delete would orphan the storage; "Purge" (below) or the owner's delete_app go through services.
        return False

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("apps_registry.purge_app")

    @admin.action(description="Purge selected apps and all their data…", permissions=["purge"])
    def purge_selected(self, request: HttpRequest, queryset: QuerySet[App]) -> TemplateResponse | None:
        if request.POST.get("confirmed") != "yes":
            return _confirmation_page(
                self,
                request,
                queryset,
                action="purge_selected",
                title="Purge apps and all their data",
                warning="These apps, their routes, members, advisories, feedback and records will be deleted now, "
                "for good: nothing is retained.",
                items=[f"{app.name} ({app.id}) of {app.owner}: {self.record_count(app)} records" for app in queryset],
            )
        targets = [(app.id, f"{app.name} ({app.id}) of {app.owner}") for app in queryset.select_related("owner")]
        _queue_purges(self, request, kind=PurgeJob.Kind.APP, targets=targets, what="app")
        return None

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
    def open_advisory_count(self, obj: Any) -> str:
        url = reverse("admin:apps_registry_advisory_changelist")
        return format_html(
            '<a href="{}?app__id__exact={}&amp;resolved__exact=0">{}</a>', url, obj.pk, int(obj._open_advisory_count)
        )


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("app", "invitee", "role", "status", "invited_by", "created_at", "responded_at")
    list_filter = ("status", "role", "created_at")
    search_fields = ("app__name", "=app__id", "invitee__username", "invitee__email", "invited_by__username")
    list_select_related = ("app", "invitee", "invited_by")
    date_hierarchy = "created_at"


@admin.register(Route)
class RouteAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("name", "app", "kind", "version", "updated_at")
    list_filter = ("kind",)
    search_fields = ("name", "description", "app__name")
    list_select_related = ("app",)


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
        return clip(obj.summary, 90)

    @admin.action(description="Resolve selected advisories")
    def resolve_selected(self, request: HttpRequest, queryset: QuerySet[Advisory]) -> None:
        changed = advisories_resolve(advisories=queryset)
        self.message_user(request, f"Resolved {changed} advisor{'y' if changed == 1 else 'ies'}.", messages.SUCCESS)


class FeedbackResponseInline(admin.StackedInline):
    model = FeedbackResponse
    extra = 1
    fields = ("body", "staff_author", "created_at", "read_status")
    readonly_fields = ("staff_author", "created_at", "read_status")

    @admin.display(description="read by the user")
    def read_status(self, obj: FeedbackResponse) -> str:
        if obj.pk is None:
            return "-"
        if obj.read_at is None:
            return "Not yet: delivered with the app's next tool result for the user"
        return f"Read {obj.read_at:%Y-%m-%d %H:%M} UTC"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Sent answers may have been delivered already; staff add a new one instead of rewriting.
        return False


class FeedbackStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("unanswered", "Unanswered"), ("unread", "Answered, not read yet"), ("read", "Answered and read")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "unanswered":
            return queryset.filter(_responses=0)
        if self.value() == "unread":
            return queryset.filter(_responses__gt=0).exclude(_read=F("_responses"))
        if self.value() == "read":
            return queryset.filter(_responses__gt=0, _read=F("_responses"))
        return queryset


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = (
        "short_body",
        "app",
        "author",
        "created_at",
        "response_count",
        "answered_and_read",
        "last_read_at",
    )
    list_filter = (FeedbackStatusFilter, "created_at", ("app", admin.RelatedOnlyFieldListFilter))
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
                _last_read_at=Max("responses__read_at"),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="feedback")
    def short_body(self, obj: Feedback) -> str:
        return clip(obj.body, 80)

    @admin.display(description="responses", ordering="_responses")
    def response_count(self, obj: Any) -> int:
        return int(obj._responses)

    @admin.display(description="read by user", boolean=True)
    def answered_and_read(self, obj: Any) -> bool | None:
        if not obj._responses:
            return None
        return bool(obj._read == obj._responses)

    @admin.display(description="answer last read", ordering="_last_read_at")
    def last_read_at(self, obj: Any) -> Any:
        return obj._last_read_at

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        instances = formset.save(commit=False)
        for instance in instances:
            if isinstance(instance, FeedbackResponse) and instance.pk is None:
                answer = feedback_respond(staff=request.user, feedback=form.instance, body=instance.body)
                # The admin's change message names the saved answer, not the unsaved form instance.
                formset.new_objects[formset.new_objects.index(instance)] = answer
            else:
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


class StorageStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("attached", "Attached to a live app"),
            ("retained", "Retained (deleted app, restorable)"),
            ("expired", "Past retention (purge_storage removes it)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "attached":
            return queryset.filter(detached_at__isnull=True)
        if self.value() == "retained":
            return queryset.filter(detached_at__gte=retention_cutoff())
        if self.value() == "expired":
            return queryset.filter(detached_at__lt=retention_cutoff())
        return queryset


class RestoreStorageForm(forms.Form):
    app = forms.ModelChoiceField(
        queryset=App.objects.none(), label="Restore into app", help_text="Apps of the same owner."
    )

    def __init__(self, *args: Any, storage: Storage, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["app"].queryset = App.objects.filter(owner=storage.owner_id).order_by("name")  # type: ignore[attr-defined]


@admin.register(Storage)
class StorageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "app_name",
        "app_uuid",
        "owner",
        "attached",
        "record_count",
        "detached_at",
        "kept_until",
        "created_at",
    )
    list_filter = (StorageStateFilter, ("detached_at", admin.EmptyFieldListFilter))
    search_fields = ("app_name", "=app_uuid", "=id", "owner__username")
    list_select_related = ("owner",)
    actions = ("restore_to_app", "purge_selected")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Storage]:
        # A correlated subquery is computed for the listed page only, not grouped over every record.
        records = Record.objects.filter(storage=OuterRef("pk")).order_by().values("storage").annotate(n=Count("pk"))
        return super().get_queryset(request).annotate(_record_count=Coalesce(Subquery(records.values("n")), 0))

    @admin.display(description="attached", boolean=True)
    def attached(self, obj: Storage) -> bool:
        return not obj.is_detached

    @admin.display(description="records", ordering="_record_count")
    def record_count(self, obj: Any) -> int:
        return int(obj._record_count)

    @admin.display(description="restorable until")
    def kept_until(self, obj: Storage) -> Any:
        return retained_until(obj)

    def has_restore_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("apps_registry.restore_storage")

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("apps_registry.purge_storage")

    @admin.action(description="Restore the selected retained storage to an app…", permissions=["restore"])
    def restore_to_app(self, request: HttpRequest, queryset: QuerySet[Storage]) -> TemplateResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one retained storage to restore.", messages.ERROR)
            return None
        storage = queryset.select_related("owner").get()
        if storage.detached_at is None:
            self.message_user(
                request,
                f"Storage of '{storage.app_name}' is attached to that live app; only retained storage of a deleted "
                "app can be restored.",
                messages.ERROR,
            )
            return None
        form = RestoreStorageForm(request.POST if request.POST.get("confirmed") == "yes" else None, storage=storage)
        if form.is_bound and form.is_valid():
            try:
                result = storage_restore(
                    actor=request.user,
                    storage_id=storage.id,
                    to_app_id=form.cleaned_data["app"].id,
                    confirmed_via="admin",
                )
            except CharmingError as error:
                self.message_user(request, error.message, messages.ERROR)
                return None
            self.message_user(
                request,
                f"Restored {result.records_restored} records of '{result.from_app_name}' into '{result.app_name}' "
                f"({result.mode}).",
                messages.SUCCESS,
            )
            return None
        return _confirmation_page(
            self,
            request,
            queryset,
            action="restore_to_app",
            title="Restore retained storage",
            warning=f"Storage of the deleted app '{storage.app_name}' (owner {storage.owner_name}), detached "
            f"{storage.detached_at:%Y-%m-%d %H:%M} UTC. Pick an app of the same owner to restore it into.",
            items=[f"{storage.app_name} ({storage.id}): {storage.records.count()} records"],
            form=form,
            button="Restore",
        )

    @admin.action(description="Purge the selected retained storage now…", permissions=["purge"])
    def purge_selected(self, request: HttpRequest, queryset: QuerySet[Storage]) -> TemplateResponse | None:
        if request.POST.get("confirmed") != "yes":
            return _confirmation_page(
                self,
                request,
                queryset,
                action="purge_selected",
                title="Purge retained storage",
                warning="The records of these deleted apps will be deleted now, for good. Storage still attached "
                "to a live app is refused.",
                items=[
                    f"{s.app_name} ({s.id}) of {s.owner_name}: {self.record_count(s)} records"
                    for s in queryset.select_related("owner")
                ],
            )
        targets = [(s.id, f"{s.app_name} ({s.id}) of {s.owner_name}") for s in queryset.select_related("owner")]
        _queue_purges(self, request, kind=PurgeJob.Kind.STORAGE, targets=targets, what="retained storage")
        return None


def _queue_purges(
    model_admin: admin.ModelAdmin, request: HttpRequest, *, kind: str, targets: list[tuple[Any, str]], what: str
) -> None:
    """Queue the purges for the worker and say where to follow them; the request returns at once."""
    try:
        jobs = purge_jobs_enqueue(actor=request.user, kind=kind, targets=targets)
    except CharmingError as error:
        model_admin.message_user(request, error.message, messages.ERROR)
        return
    jobs_url = reverse("admin:apps_registry_purgejob_changelist")
    model_admin.message_user(
        request,
        format_html(
            'Queued {} {} purge(s); the worker runs them now. Follow their progress under <a href="{}">Purge jobs</a>.',
            len(jobs),
            what,
            jobs_url,
        ),
        messages.SUCCESS,
    )


def _confirmation_page(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    action: str,
    title: str,
    warning: str,
    items: list[str],
    form: forms.Form | None = None,
    button: str = "Yes, purge",
) -> TemplateResponse:
    """The intermediate page of a destructive action: re-posts the selection with confirmed=yes."""
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": model_admin.model._meta,
        "queryset": queryset,
        "action": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "warning": warning,
        "items": items,
        "form": form,
        "button": button,
        "now": timezone.now(),
    }
    return TemplateResponse(request, "admin/apps_registry/confirm_action.html", context)


@admin.register(PurgeJob)
class PurgeJobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Staff purges queued from the Apps and Storages actions, as the worker runs them."""

    list_display = (
        "created_at",
        "kind",
        "target_label",
        "status",
        "progress",
        "requested_by_repr",
        "finished_at",
        "message",
    )
    list_filter = ("status", "kind")
    search_fields = ("target_label", "=target_id", "requested_by_repr")

    @admin.display(description="records purged")
    def progress(self, obj: PurgeJob) -> str:
        if obj.records_total is None:
            return str(obj.records_purged)
        return f"{obj.records_purged} of {obj.records_total}"


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
    list_display = ("prefix", "name", "user", "scopes", "created_at", "last_used_at", "expires_at", "is_revoked")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "expires_at")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    # The secret is never shown: only its hash is stored, and even that stays out of the console.
    fields = ("prefix", "name", "user", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at")
    # Scopes are fixed at issue (a wider token is a new token), like the secret.
    readonly_fields = ("prefix", "user", "scopes", "created_at", "last_used_at", "revoked_at")
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
            token_revoke(token=token, actor=request.user)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


class AuditAreaFilter(admin.SimpleListFilter):
    """The kind of act: each area is a set of the actions' prefixes (`membership.invite` is sharing)."""

    title = "area"
    parameter_name = "area"
    AREAS: dict[str, tuple[str, tuple[str, ...]]] = {
        "sharing": ("Sharing", ("membership.",)),
        "tokens": ("Tokens and OAuth grants", ("token.", "oauth.")),
        "deletions": ("Deletions, purges and restores", ("app.", "storage.", "account.", "purge", "restore")),
        "schedules": ("Schedules", ("schedule.",)),
        "hooks": ("Webhooks", ("hook.",)),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, title) for key, (title, _prefixes) in self.AREAS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        area = self.AREAS.get(self.value() or "")
        if area is None:
            return queryset
        match = Q()
        for prefix in area[1]:
            match |= Q(action__startswith=prefix)
        return queryset.filter(match)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The audit trail of access-changing acts (sharing, tokens, OAuth disconnections, deletions, purges, schedules,
    webhooks); its details name tokens and webhook secrets by their public first characters only, never a secret."""

    list_display = ("created_at", "actor_repr", "action", "app_id")
    list_filter = (AuditAreaFilter, "action", "created_at")
    search_fields = ("actor_repr", "=app_id", "action")
    date_hierarchy = "created_at"


@admin.register(Change)
class ChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The change log (services/changes.py): each mutation's records before and after; staff only look."""

    list_display = ("id", "created_at", "actor_repr", "via", "route", "app_id", "records", "reverts_id")
    list_filter = ("via", "created_at")
    search_fields = ("actor_repr", "=app__id", "route")
    date_hierarchy = "created_at"
    readonly_fields = ("entries_shown",)

    @admin.display(description="records before and after")
    def entries_shown(self, obj: Change) -> str:
        # ChangeEntry has a composite primary key, which the admin cannot show as an inline.
        lines = [
            f"{e.collection}/{e.record_id}: {json.dumps(e.before)} → {json.dumps(e.after)}"
            for e in ChangeEntry.objects.filter(change=obj).order_by("position")[:100]
        ]
        return "\n".join(lines)


@admin.register(ConfirmedEmail)
class ConfirmedEmailAdmin(admin.ModelAdmin):
    """Who confirmed which address, and when. Only ever made by the person's own link (or demo_setup); staff may
    delete a row, which makes the account confirm its address again."""

    list_display = ("user", "email", "confirmed_at")
    search_fields = ("user__username", "email")
    readonly_fields = ("user", "email", "confirmed_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ScheduleRunInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ScheduleRun
    fields = ("due_at", "ran_at", "outcome", "error", "change_id")
    ordering = ("-due_at",)
    extra = 0


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Apps' schedules (services/schedules.py) with their runs; staff look, the app's owner and editors manage them."""

    list_display = ("route", "app", "cron", "time_zone", "creator", "active", "failures", "next_run_at")
    list_filter = ("active", "time_zone")
    search_fields = ("=app__id", "app__name", "route", "creator__username")
    inlines = [ScheduleRunInline]


@admin.register(Hook)
class HookAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Apps' webhooks (services/hooks.py) with their deliveries; staff look, the app's owner and editors manage them.
    The nonces its secret is derived from are not shown: with the server's key they would give the secret."""

    list_display = ("route", "app", "description", "creator", "secret_hint", "created_at", "rotated_at")
    search_fields = ("=id", "=app__id", "app__name", "route", "creator__username")
    fields = (
        "id",
        "app",
        "route",
        "description",
        "creator",
        "secret_hint",
        "created_at",
        "rotated_at",
        "deliveries_shown",
    )
    readonly_fields = fields

    @admin.display(description="last deliveries")
    def deliveries_shown(self, obj: Hook) -> str:
        # The last ones only: a busy hook takes 120 a minute, kept as long as the change log.
        rows = HookDelivery.objects.filter(hook=obj).order_by("-received_at", "-id")[:DELIVERIES_SHOWN_IN_ADMIN]
        return "\n".join(
            f"{d.received_at:%Y-%m-%d %H:%M:%S} {d.outcome} {d.status}"
            + (f" change {d.change_id}" if d.change_id else "")
            + (f": {clip(d.error, 200)}" if d.error else "")
            for d in rows
        )


@admin.register(Template)
class TemplateAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Published templates (services/templates.py): staff look, and take one out of the gallery (or put it back);
    its owner publishes, updates and takes it down from the app's page."""

    list_display = ("title", "author_repr", "app", "version", "listed", "published_at")
    list_filter = ("listed",)
    search_fields = ("title", "description", "author_repr", "=app__id")
    fields = ("id", "title", "description", "starter_prompt", "author_repr", "app", "version", "listed", "definition")
    readonly_fields = fields
    actions = ["unlist_selected", "list_selected"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # listing is the actions' business; the rest is the owner's

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # The actions change what the gallery shows: only staff given the change permission on templates run them.
        actions = super().get_actions(request)
        if not request.user.has_perm("apps_registry.change_template"):
            actions.pop("unlist_selected", None)
            actions.pop("list_selected", None)
        return actions

    @admin.action(description="Take the selected templates out of the gallery")
    def unlist_selected(self, request: HttpRequest, queryset: QuerySet[Template]) -> None:
        changed = templates_list_set(
            actor=request.user, template_ids=list(queryset.values_list("pk", flat=True)), listed=False
        )
        self.message_user(request, f"Unlisted {changed} template{'s' if changed != 1 else ''}.", messages.SUCCESS)

    @admin.action(description="Put the selected templates back in the gallery")
    def list_selected(self, request: HttpRequest, queryset: QuerySet[Template]) -> None:
        changed = templates_list_set(
            actor=request.user, template_ids=list(queryset.values_list("pk", flat=True)), listed=True
        )
        self.message_user(request, f"Listed {changed} template{'s' if changed != 1 else ''} again.", messages.SUCCESS)


@admin.register(PublicApp)
class PublicAppAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Apps made public (services/public_apps.py): staff look, and turn a page off (abuse); its owner opens,
    changes and closes it from the app's page."""

    list_display = ("handle", "app", "mutations", "opened_by", "updated_at")
    search_fields = ("handle", "=app__id", "app__name")
    fields = ("handle", "app", "mutations", "opened_by", "created_at", "updated_at")
    readonly_fields = fields
    actions = ["close_selected"]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # Turning a page off changes what the public sees: only staff given the change permission run it.
        actions = super().get_actions(request)
        if not request.user.has_perm("apps_registry.change_publicapp"):
            actions.pop("close_selected", None)
        return actions

    @admin.action(description="Turn the selected public pages off")
    def close_selected(self, request: HttpRequest, queryset: QuerySet[PublicApp]) -> None:
        closed = public_apps_close_by_staff(actor=request.user, app_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"Turned {closed} public page{'s' if closed != 1 else ''} off.", messages.SUCCESS)
