"""Charming's data model: apps, their members' roles, their routes, their stored records, and what
staff look after (advisories, feedback and its answers, API tokens, the audit trail).

Fields, constraints and small derived properties only: what each role may do is decided in
apps_registry.access, and every flow is a service."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone


def json_object_only(value: Any) -> None:
    """A JSON field that must hold an object (a field validator: the admin's forms run it)."""
    if not isinstance(value, dict):
        raise ValidationError('Must be a JSON object, such as {"field": "amount"}; leave it {} for none.')


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    EDITOR = "editor", "Editor"
    VIEWER = "viewer", "Viewer"


class RouteKind(models.TextChoices):
    QUERY = "query", "Query"
    MUTATION = "mutation", "Mutation"


class Severity(models.TextChoices):
    INFO = "info", "Info"
    WARN = "warn", "Warn"


class App(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_apps")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The collections the author declared in the app definition: {"expenses": {}, ...}.
    collections = models.JSONField(default=dict, blank=True)
    # +1 on every save of the definition (0: none saved yet); updates name the version they read, and a
    # stale one is refused (services/definitions.py, a conditional UPDATE).
    version = models.PositiveIntegerField(default=0)
    # True while a migration of its records runs as a task (services/record_migrations.py): read by the route
    # lookup every call makes, so refusing mutations meanwhile costs no query.
    migrating = models.BooleanField(default=False)
    # The template this app was made from (services/templates.py `template_remix`); null once it is unpublished.
    remixed_from = models.ForeignKey(
        "Template", null=True, blank=True, on_delete=models.SET_NULL, related_name="remixes"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "name"])]
        permissions = [("purge_app", "Can purge an app and all its data at once")]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    # The member turned the app's notices off (its page's toggle): its notify steps skip them.
    notices_muted = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "app"], name="membership_one_per_user_and_app"),
            models.UniqueConstraint(fields=["app"], condition=Q(role="owner"), name="membership_one_owner_per_app"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.app}"


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    DECLINED = "declined", "Declined"
    REVOKED = "revoked", "Revoked"


class Invitation(models.Model):
    """An owner's offer of a role (editor or viewer) in their app; it grants nothing until accepted.

    Kept after it is answered (its status and `responded_at` say how), so the trail reads like the audit.
    """

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="invitations")
    invitee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=10, choices=InvitationStatus.choices, default=InvitationStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    responded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["app", "invitee"],
                condition=Q(status="pending"),
                name="invitation_one_pending_per_app_and_invitee",
            ),
            models.CheckConstraint(condition=Q(role__in=["editor", "viewer"]), name="invitation_role_shareable"),
            models.CheckConstraint(condition=Q(status__in=InvitationStatus.values), name="invitation_status_valid"),
        ]
        indexes = [models.Index(fields=["invitee", "status"], name="invitation_invitee_status")]

    def __str__(self) -> str:
        return f"{self.invitee} invited as {self.role} of {self.app} ({self.status})"


class Route(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="routes")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=RouteKind.choices)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(null=True, blank=True)
    # The author's steps, or the legacy {"handler": {...}} form, exactly as written.
    definition = models.JSONField(default=dict)
    # Presentation hints for the app page (title, help, view, chart, columns, row_actions, ...), as written;
    # see routes/hints.py.
    hints = models.JSONField(default=dict, blank=True)
    # The input and output schemas as JSON text in the author's key order, which jsonb does not keep: the
    # order the app page shows a form's fields and a table's columns in (empty for routes saved before it).
    schemas_text = models.TextField(blank=True, default="")
    # Bumped by the services whenever anything above changes; compiled routes are cached per version.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["app", "name"]
        constraints = [
            models.UniqueConstraint(fields=["app", "name"], name="route_name_unique_per_app"),
            models.CheckConstraint(condition=Q(kind__in=RouteKind.values), name="route_kind_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.app.name}.{self.name}"

    def _schemas_in_author_order(self) -> dict[str, Any] | None:
        schemas = json.loads(self.schemas_text) if self.schemas_text else None
        return schemas if isinstance(schemas, dict) else None

    @property
    def input_schema_ordered(self) -> Any:
        """The input schema with its properties in the author's order (a form's fields follow it)."""
        schemas = self._schemas_in_author_order()
        return schemas.get("input") if schemas is not None else self.input_schema

    @property
    def output_schema_ordered(self) -> Any:
        """The output schema with its properties in the author's order (a table's columns follow it)."""
        schemas = self._schemas_in_author_order()
        return schemas.get("output") if schemas is not None else self.output_schema


class AppVersion(models.Model):
    """One saved definition of an app, whole, as its author wrote it: the history and what rollback restores."""

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # Who saved it; kept as text too, so the history survives the author's account.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_repr = models.CharField(max_length=200)
    definition = models.JSONField()
    # What changed from the previous version: {"added": [...], "changed": [...], "removed": [...], ...}.
    changes = models.JSONField(default=dict, blank=True)
    summary = models.TextField(blank=True)
    restored_from = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["app", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["app", "number"], name="app_version_number_unique_per_app"),
        ]

    def __str__(self) -> str:
        return f"{self.app.name} v{self.number}"


class Storage(models.Model):
    """The container of an app's records. It outlives the app when deletion keeps the data."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app = models.OneToOneField(App, null=True, blank=True, on_delete=models.SET_NULL, related_name="storage")
    # Remembered so retained storage can still be named and traced after the app is gone.
    app_uuid = models.UUIDField(db_index=True)
    app_name = models.CharField(max_length=200)
    # Empty once the owner deleted their account: the storage stays for the retention window, then is purged.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="storages"
    )
    detached_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The records it holds, kept by the writes in their own transaction (the engine's SqlStore.records_changed,
    # a restore's merge), so the records-per-app limit is checked without counting the app's records.
    records_held = models.PositiveBigIntegerField(default=0)
    # +1 in every transaction that writes its records (a mutation, a record migration's batch, a restore): what
    # an open app page polls to know that its views changed (pages/live.py), one read by this row's key.
    records_changes = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "storage"
        permissions = [
            ("restore_storage", "Can restore retained storage to an app"),
            ("purge_storage", "Can purge retained storage"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(app__isnull=False, detached_at__isnull=True)
                | Q(app__isnull=True, detached_at__isnull=False),
                name="storage_attached_xor_detached",
            ),
        ]

    def __str__(self) -> str:
        state = f"detached {self.detached_at:%Y-%m-%d}" if self.detached_at else "attached"
        return f"{self.app_name} ({state})"

    @property
    def is_detached(self) -> bool:
        return self.detached_at is not None

    @property
    def owner_name(self) -> str:
        """The owner's username, or a note that the account was deleted."""
        return self.owner.get_username() if self.owner is not None else "(deleted account)"


class Record(models.Model):
    # No index of its own: both indexes below start with storage, and serve every lookup by it. A third one, on
    # storage alone, cost every insert and misled PostgreSQL's generic plans for prepared statements (planned
    # while the table was small, they chose it over the unique index and then filtered thousands of rows).
    storage = models.ForeignKey(Storage, on_delete=models.CASCADE, related_name="records", db_index=False)
    collection = models.CharField(max_length=100)
    record_id = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["storage", "collection", "record_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["storage", "collection", "record_id"], name="record_id_unique_per_collection"
            ),
        ]
        # The unique constraint above doubles as the lookup-by-id index. A GIN index on
        # `data` is added on PostgreSQL only by migration 0002.
        indexes = [models.Index(fields=["storage", "collection", "created_at"], name="record_collection_recent")]

    def __str__(self) -> str:
        return f"{self.collection}/{self.record_id}"


class Advisory(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="advisories")
    kind = models.CharField(max_length=64, db_index=True)
    severity = models.CharField(max_length=5, choices=Severity.choices, default=Severity.INFO)
    summary = models.TextField(help_text="Agent-facing: self-sufficient, no extra context required.")
    user_summary = models.TextField(blank=True, help_text="End-user-facing; shown in the app when set.")
    # An object: every tool result carries it as one (the contracts' `advisories[].data`), so staff's edits must be.
    data = models.JSONField(default=dict, blank=True, validators=[json_object_only])
    doc_url = models.CharField(max_length=500, blank=True)
    resolved = models.BooleanField(default=False, db_index=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "advisories"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(severity__in=Severity.values), name="advisory_severity_valid"),
        ]

    def __str__(self) -> str:
        return f"[{self.kind}] {self.summary[:60]}"


class Feedback(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="feedback")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="feedback")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "feedback"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.author} on {self.app}: {self.body[:40]}"


class FeedbackResponse(models.Model):
    feedback = models.ForeignKey(Feedback, on_delete=models.CASCADE, related_name="responses")
    staff_author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="feedback_responses"
    )
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when the answer was delivered to the feedback's author in a tool result.
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["feedback", "read_at"], name="feedback_response_unread")]

    def __str__(self) -> str:
        return f"Response by {self.staff_author} ({'read' if self.read_at else 'unread'})"


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=16, unique=True, help_text="Visible start of the token, for recognising it.")
    # SHA-256 of the whole token. Tokens are 256-bit random strings, so a fast hash suffices.
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Space-separated, as OAuth writes them; what each permits is apps_registry/access.py's NEED_SCOPES.
    scopes = models.CharField(
        max_length=100,
        default="apps:read apps:write apps:delete",
        help_text="What an agent holding this token may do: apps:read, apps:write, apps:delete.",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.name})"

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(self.scopes.split())

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


class OAuthClientRegistration(models.Model):
    """Who registered an OAuth client through dynamic registration (RFC 7591): the rate limit counts these."""

    application = models.OneToOneField(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="charming_registration"
    )
    client_ip = models.GenericIPAddressField()
    created_at = models.DateTimeField(auto_now_add=True)
    # RFC 7591's token_endpoint_auth_method as registered: DOT keeps only public/confidential, and accepts either
    # secret method from a confidential client, so this is what the registration (and RFC 7592 reads) answer.
    token_endpoint_auth_method = models.CharField(max_length=32, default="none")

    class Meta:
        indexes = [models.Index(fields=["client_ip", "created_at"], name="oauth_registration_ip_time")]

    def __str__(self) -> str:
        return f"{self.application_id} from {self.client_ip}"


class RedeemedAuthorizationCode(models.Model):
    """An authorization code already exchanged, remembered by its checksum so that a replay revokes the tokens it
    bought (RFC 6749 section 4.1.2, OAuth 2.1 section 4.1.3). DOT deletes the grant on exchange, so without this a
    replayed code looks like any unknown one."""

    code_checksum = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE)
    token_family = models.UUIDField()
    redeemed_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"code of {self.application_id} redeemed {self.redeemed_at:%Y-%m-%d %H:%M}"


class AuditEvent(models.Model):
    """The trail of deletions, purges and restores, written by the services.

    A saved event refuses `save()` and `delete()`; the code never updates or deletes events in bulk
    either. Deleting the acting account only clears `actor`; `actor_repr` keeps who it was.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who acted, as text, so the trail survives the actor's account.
    actor_repr = models.CharField(max_length=200)
    app_id = models.UUIDField(null=True, blank=True, db_index=True)
    action = models.CharField(max_length=64, db_index=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_repr} {self.action}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("Audit events are append-only and cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ValueError("Audit events are append-only and cannot be deleted.")


class RedeemedConfirmation(models.Model):
    """One-time confirmation nonces already used (delete_app on protocol 2026-07-28).

    Kept in the database, not a per-process cache, so a replayed answer is refused whichever
    worker receives it. Rows are dropped once their confirmation would have expired anyway.
    """

    nonce = models.CharField(max_length=64, primary_key=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.nonce} (until {self.expires_at:%Y-%m-%d %H:%M})"


class IdempotentResult(models.Model):
    """The result of a mutation run with an idempotency key, so a retry with that key returns it instead of writing
    again. Scoped to the caller, the app and the route; written in the mutation's own transaction, so it exists
    exactly when the mutation committed. Kept for CHARMING_IDEMPOTENCY_WINDOW_HOURS."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    app_id = models.UUIDField()  # not a foreign key: the key outlives nothing but must not block deleting the app
    op = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    params_hash = models.CharField(max_length=64)  # sha256 of the params as canonical JSON
    value = models.JSONField(null=True)
    # The first call's change in the change log (services/changes.py), so a retry answers the same change id.
    change_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "app_id", "op", "key"], name="idempotent_result_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.op} in {self.app_id})"


class PurgeJob(models.Model):
    """One staff purge run off the request (a django-tasks task): what, for whom, and how far it got.

    The admin action creates it queued; the worker moves it through running to done or failed,
    updating `records_purged` after each committed batch.
    """

    class Kind(models.TextChoices):
        APP = "app", "App with its data"
        STORAGE = "storage", "Retained storage"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target_id = models.UUIDField()
    # What the target was when queued, as text: the purge removes the app or storage itself.
    target_label = models.CharField(max_length=300)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_repr = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    records_total = models.PositiveIntegerField(null=True, blank=True)
    records_purged = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"purge {self.kind} {self.target_label}: {self.status}"


class RateBudget(models.Model):
    """One rate-limit budget (a token's, an app's, a client address's failed authentications), kept as the
    "theoretical arrival time" of the generic cell rate algorithm; apps_registry/services/rate_limits.py reads and
    writes it in one atomic statement. A row whose time has passed is the same as no row, and is swept."""

    key = models.CharField(max_length=200, primary_key=True)
    # Seconds since the epoch. Not indexed: every call rewrites it (PostgreSQL can then update the row in place), and
    # the once-a-minute sweep reads a table of one row per active token, app and address.
    tat = models.FloatField()

    def __str__(self) -> str:
        return self.key


class RecordMigration(models.Model):
    """A migration of an app's stored records given with a definition save, too large to run inside the save:
    run by a task in batches, each batch and the position after it committed together (so a worker killed
    mid-way resumes after the last committed batch: no record is lost or migrated twice)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="record_migrations")
    storage = models.ForeignKey(Storage, on_delete=models.CASCADE, related_name="record_migrations")
    version = models.PositiveIntegerField()  # the app version saved with it
    spec = models.JSONField()  # {"<collection>": "<CEL expression over record>"}
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField()  # records of its collections when it was queued
    done = models.PositiveIntegerField(default=0)
    position = models.BigIntegerField(default=0)  # the last migrated record's pk (records go in pk order)
    error = models.TextField(blank=True)
    # Who saved it: its change in the change log is theirs.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Its change in the change log (one for the whole migration, its entries added batch by batch), once a batch
    # wrote a record; a plain id, as the change log's rows keep no constraints (Change's comment says why).
    change_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["app", "status"])]

    def __str__(self) -> str:
        return f"migration of {self.app_id} v{self.version}: {self.done} of {self.total} ({self.status})"


class ConfirmedEmail(models.Model):
    """The e-mail address a person proved they read, by opening the link mailed to it and confirming
    (services/accounts.py). An account's address is confirmed while this row's address is its current one, so an
    address changed since (in the admin) is unconfirmed again. Creating tokens, authorizing an OAuth client and
    being found by an invitation by e-mail need it.

    One account per address, whatever its case, is the unique index on the users' e-mail (migration 0021), not a
    constraint here: an address moves between accounts only through the users' table."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="confirmed_email"
    )
    email = models.EmailField(max_length=254)
    confirmed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.email} confirmed {self.confirmed_at:%Y-%m-%d %H:%M}"


class ChangeVia(models.TextChoices):
    MCP = "mcp", "MCP"
    REST = "rest", "REST API"
    PAGE = "page", "App page"
    SCHEDULE = "schedule", "Schedule"
    HOOK = "hook", "Webhook"
    PUBLIC = "public", "Public page"
    MIGRATION = "migration", "Record migration"  # a definition save's `migrate` (services/record_migrations.py)
    INTERNAL = "internal", "Server"


class Change(models.Model):
    """One mutation's change set (services/changes.py): who, when, through what, the route; its records are
    its `ChangeEntry` rows, written with it in the mutation's transaction. A revert is a change too (`reverts`)."""

    id = models.BigAutoField(primary_key=True)
    # No index of its own: (app, id) below serves the timeline and every lookup by app. No database constraint either
    # (as IdempotentResult.app_id): a mutation's COMMIT would check it by locking the app's row (KEY SHARE), and
    # app_delete holds that row FOR UPDATE while it waits for the mutation's storage lock, a deadlock. Deleting an
    # app deletes its changes all the same (the ORM's cascade, after in-flight mutations committed).
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="changes", db_index=False, db_constraint=False)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_repr = models.CharField(max_length=150)  # the username then: kept when the account goes
    via = models.CharField(max_length=16, choices=ChangeVia.choices)
    route = models.CharField(max_length=100, blank=True)  # empty for a revert
    reverts = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverted_by")
    records = models.PositiveIntegerField()  # how many entries
    # No index: the retention purge walks changes by id (they are made in time order), one index fewer per mutation.
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["app", "id"], name="change_app_timeline"),
            # A revert's check for record migrations since the change (services/changes.py): few rows.
            models.Index(fields=["app", "id"], name="change_app_migrations", condition=Q(via="migration")),
        ]

    def __str__(self) -> str:
        return f"change {self.pk}"


class ChangeEntry(models.Model):
    """One record's before and after in a change (None: it did not exist before / no longer exists after)."""

    # The change and the record's place in it: the primary key's index serves a change's entries, so no id sequence
    # and no second index per entry (a mutation's write cost).
    pk = models.CompositePrimaryKey("change", "position")
    change = models.ForeignKey(Change, on_delete=models.CASCADE, related_name="entries", db_index=False)
    position = models.PositiveIntegerField()
    # The app again (not through the change): a record's history is one index range, (app, collection, record_id).
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    collection = models.CharField(max_length=100)
    record_id = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["change", "position"]
        indexes = [
            models.Index(fields=["app", "collection", "record_id", "change"], name="change_entry_record_history")
        ]

    def __str__(self) -> str:
        return f"{self.collection}/{self.record_id} in change {self.change_id}"


class Schedule(models.Model):
    """A mutation route run on its own at the times of a cron expression in a time zone, with fixed params
    (services/schedules.py). Each due time is claimed, run and recorded once (`ScheduleRun`) by the task worker;
    `next_run_at` is the one due time waiting, advanced in the run's transaction."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="schedules")
    route = models.CharField(max_length=100)
    cron = models.CharField(max_length=120)  # five fields, as saved (a preset is saved as its expression)
    time_zone = models.CharField(max_length=64)  # an IANA name
    params = models.JSONField(default=dict, blank=True)
    # Runs as this person (who created it, or last changed what it runs or resumed it): their access is checked at each
    # run; losing it pauses the schedule.
    creator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    active = models.BooleanField(default=True)
    paused_reason = models.CharField(max_length=300, blank=True)
    failures = models.PositiveIntegerField(default=0)  # consecutive failed runs
    next_run_at = models.DateTimeField(null=True, blank=True)  # None while paused
    # The task queued for next_run_at (a DBTaskResult id), so a lost task can be told from one still waiting.
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["app", "created_at"]
        indexes = [models.Index(fields=["active", "next_run_at"], name="schedule_due")]

    def __str__(self) -> str:
        return f"{self.route} at '{self.cron}' ({self.time_zone})"


class ScheduleRunOutcome(models.TextChoices):
    OK = "ok", "Ran"
    FAILED = "failed", "Failed"
    MISSED = "missed", "Missed"


class ScheduleRun(models.Model):
    """One due time of a schedule: run (ok or failed, with the error) or missed (the worker was away longer than the
    catch-up window). Unique per due time: a second claim of the same time cannot be recorded."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField()
    ran_at = models.DateTimeField(default=timezone.now)
    outcome = models.CharField(max_length=8, choices=ScheduleRunOutcome.choices)
    error = models.TextField(blank=True)  # the route's error message, as a caller would have seen it
    change_id = models.BigIntegerField(null=True, blank=True)  # the change log's entry for what the run wrote

    class Meta:
        ordering = ["-due_at"]
        constraints = [models.UniqueConstraint(fields=["schedule", "due_at"], name="schedule_run_once_per_due_time")]

    def __str__(self) -> str:
        return f"{self.schedule_id} at {self.due_at:%Y-%m-%d %H:%M}: {self.outcome}"


class Hook(models.Model):
    """An inbound webhook (services/hooks.py): a mutation route run by signed POSTs to `/hooks/<id>/`, whose JSON body
    is the route's params.

    Its secret is never stored: it is derived from the server's secret key and `secret_nonce`, so a copy of the
    database alone cannot sign deliveries. Rotating draws a new nonce and keeps the old one valid until
    `previous_until` (the overlap in which a sender moves to the new secret)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the URL's id: random, unguessable
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="hooks")
    route = models.CharField(max_length=100)
    description = models.CharField(max_length=200, blank=True)  # who sends to it, in the owner's words
    # Runs as this person (who created it or last rotated its secret): their access is checked at each delivery.
    creator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    secret_nonce = models.CharField(max_length=64)
    previous_nonce = models.CharField(max_length=64, blank=True)
    previous_until = models.DateTimeField(null=True, blank=True)
    # Who deliveries signed with the previous secret run as, in the overlap: who the hook ran as before the rotation.
    previous_creator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    secret_hint = models.CharField(max_length=16)  # the secret's first characters, to tell secrets apart
    created_at = models.DateTimeField(default=timezone.now)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["app", "created_at"]

    def __str__(self) -> str:
        return f"hook {self.id} of {self.route}"


class HookDeliveryOutcome(models.TextChoices):
    OK = "ok", "Ran"
    FAILED = "failed", "Failed"


class HookDelivery(models.Model):
    """One signed delivery of a hook that passed its signature check, with what the route did. `message` (a digest
    of the signed timestamp and body, whichever secret signed them) is unique per hook: the same signed request
    sent twice is refused as a replay, even when both arrive at once."""

    id = models.BigAutoField(primary_key=True)
    hook = models.ForeignKey(Hook, on_delete=models.CASCADE, related_name="deliveries")
    message = models.CharField(max_length=64)  # sha256 hex of "<t>." + body
    signed_at = models.DateTimeField()  # the signature's t
    received_at = models.DateTimeField(default=timezone.now)
    outcome = models.CharField(max_length=8, choices=HookDeliveryOutcome.choices)
    status = models.PositiveSmallIntegerField()  # the HTTP status answered
    error = models.TextField(blank=True)  # the route's error message, as the sender read it (redacted)
    change_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at"]
        constraints = [models.UniqueConstraint(fields=["hook", "message"], name="hook_delivery_once")]
        indexes = [models.Index(fields=["hook", "-received_at"], name="hook_delivery_recent")]

    def __str__(self) -> str:
        return f"{self.hook_id} at {self.received_at:%Y-%m-%d %H:%M}: {self.outcome}"


class Notice(models.Model):
    """What a notify step sent (services/notices.py): a subject and a text for the app's members in some roles,
    written in the mutation's transaction; each recipient's copy is a `NoticeReceipt`."""

    id = models.BigAutoField(primary_key=True)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="notices")
    subject = models.CharField(max_length=150)
    text = models.TextField()
    roles = models.CharField(max_length=40)  # the step's `to`, comma-separated ("owner,editors")
    route = models.CharField(max_length=100, blank=True)  # empty for the server's own notices (a limit reached)
    via = models.CharField(max_length=16, choices=ChangeVia.choices)
    change_id = models.BigIntegerField(null=True, blank=True)  # what the mutation that sent it wrote
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["app", "created_at"], name="notice_app_recent")]

    def __str__(self) -> str:
        return f"{self.app_id}: {self.subject}"


class NoticeReceipt(models.Model):
    """One member's copy of a notice: unread on their home page until they mark it read."""

    id = models.BigAutoField(primary_key=True)
    notice = models.ForeignKey(Notice, on_delete=models.CASCADE, related_name="receipts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notice_receipts")
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["notice", "user"], name="notice_receipt_once")]
        indexes = [models.Index(fields=["user", "read_at"], name="notice_receipt_unread")]

    def __str__(self) -> str:
        return f"{self.user_id}: notice {self.notice_id}"


class Template(models.Model):
    """An app's definition published by its owner for anyone to start from (services/templates.py): a snapshot of
    the definition, never its records, with a title, a description and a starter prompt. Publishing again updates
    it; deleting the app deletes it; staff can unlist it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app = models.OneToOneField(App, on_delete=models.CASCADE, related_name="template")
    definition = models.JSONField()  # the app's stored definition when last published (its tests included)
    version = models.PositiveIntegerField()  # the app's version then
    title = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    starter_prompt = models.TextField(blank=True)  # what to ask an agent after remixing ("Add this week's meals")
    author_repr = models.CharField(max_length=150)  # the owner's username when published
    listed = models.BooleanField(default=True)  # staff unlist (the admin): out of the gallery and search
    published_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-published_at"]

    def __str__(self) -> str:
        return self.title


class AppTransfer(models.Model):
    """An owner's offer to hand their app over to someone (services/transfers.py): nothing changes until the
    recipient accepts; then they own it and the former owner stays an editor. Kept after it is answered."""

    id = models.BigAutoField(primary_key=True)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="transfers")
    from_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    to_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="transfers_offered")
    status = models.CharField(max_length=10, choices=InvitationStatus.choices, default=InvitationStatus.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    responded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["app"], condition=Q(status="pending"), name="app_transfer_one_pending")
        ]

    def __str__(self) -> str:
        return f"{self.app} to {self.to_user} ({self.status})"


class PublicApp(models.Model):
    """An app its owner made public under a handle (services/public_apps.py): `/p/<handle>/` shows its query views to
    anyone, and the mutations named in `mutations` are open to anonymous visitors. Turning it off deletes the row,
    which every visitor's request (and the route lookup of each of their calls) reads: it takes effect at once."""

    app = models.OneToOneField(App, on_delete=models.CASCADE, primary_key=True, related_name="public")
    handle = models.CharField(max_length=40, unique=True)  # lowercase letters, digits, hyphens (HANDLE_PATTERN)
    mutations = models.JSONField(default=list)  # names of the mutation routes visitors may run
    opened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["handle"]

    def __str__(self) -> str:
        return self.handle
