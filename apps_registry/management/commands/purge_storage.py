"""Delete retained storage of deleted apps once it is older than the retention window."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import CommandError, CommandParser

from apps_registry.exceptions import CharmingError
from apps_registry.management.commands._ops import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_USAGE,
    OpsCommand,
    Progress,
    add_batch_size_argument,
    confirm,
    declined,
    describe_storage,
    human_size,
    interrupted,
    positive_batch_size,
)
from apps_registry.selectors import changes_made_before, hook_deliveries_before, retained_storage, storage_usage
from apps_registry.services.changes import change_cutoff, change_retention_days, changes_purge
from apps_registry.services.hooks import hook_deliveries_purge
from apps_registry.services.retention import (
    DEFAULT_BATCH_SIZE,
    retained_storage_purge,
    retention_cutoff,
    retention_days,
)
from apps_registry.values import clip_repr, parse_uuid


class Command(OpsCommand):
    help = (
        "Delete storage detached by delete_app (without purge_storage) that is older than "
        "CHARMING_STORAGE_RETENTION_DAYS (or --older-than DAYS), or the retained storage of one deleted app "
        "(--app-id). Records go in batches, each its own transaction; an interrupted run resumes when re-run. "
        "Writes one audit event 'storage.purge' per purged storage. Without --app-id, also deletes the change history "
        "(record history and undo) and the webhook deliveries older than CHARMING_CHANGE_RETENTION_DAYS. "
        + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=int,
            metavar="DAYS",
            help="Purge storage detached more than DAYS days ago (default: CHARMING_STORAGE_RETENTION_DAYS).",
        )
        parser.add_argument(
            "--app-id",
            metavar="UUID",
            help="Purge the retained storage of this deleted app, whatever its age (asks for confirmation).",
        )
        parser.add_argument("--dry-run", action="store_true", help="List what would be purged and delete nothing.")
        add_batch_size_argument(parser, DEFAULT_BATCH_SIZE)
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation (with --app-id).")

    def handle(
        self,
        *args: Any,
        older_than: int | None,
        app_id: str | None,
        dry_run: bool,
        batch_size: int,
        yes: bool,
        **options: Any,
    ) -> None:
        positive_batch_size(batch_size)
        if app_id is not None:
            if older_than is not None:
                raise CommandError(
                    "--app-id purges one app's retained storage whatever its age; do not combine it with --older-than.",
                    returncode=EXIT_USAGE,
                )
            storages = retained_storage(app_uuid=_app_uuid(app_id))
            scope = f"Retained storage of deleted app {app_id}:"
        else:
            days = retention_days() if older_than is None else older_than
            if days < 0:
                raise CommandError(f"--older-than must be 0 or more days, got {days}.", returncode=EXIT_USAGE)
            cutoff = retention_cutoff(days=days)
            storages = retained_storage(detached_before=cutoff)
            scope = f"Retained storage detached more than {days} days ago (before {cutoff:%Y-%m-%d %H:%M} UTC):"
            self._change_history_purge(dry_run=dry_run)

        rows = storage_usage(storages)
        if not rows:
            if app_id is not None:
                raise CommandError(
                    f"No retained storage for app id {app_id!r}: the app is still live, was purged already, or "
                    "never existed.",
                    returncode=EXIT_ERROR,
                )
            self.stdout.write(f"{scope} none. Nothing to purge.")
            return

        self.stdout.write(scope)
        for usage in rows:
            self.stdout.write(f"  {describe_storage(usage)}")
        total_records = sum(u.records for u in rows)
        total_size = sum(u.size for u in rows)
        self.stdout.write(f"Total: {len(rows)} storage, {total_records} records, {human_size(total_size)}.")
        if dry_run:
            self.stdout.write("Dry run: nothing was deleted.")
            return
        if app_id is not None and not yes and not confirm("These records will be deleted for good."):
            raise declined()

        failures = 0
        for usage in rows:
            storage = usage.storage
            progress = Progress(self.stdout, label=f"'{storage.app_name}' ({storage.id})", total=usage.records)
            try:
                result = retained_storage_purge(
                    actor=None, storage_id=storage.id, batch_size=batch_size, on_batch=progress
                )
            except KeyboardInterrupt:
                progress.close()
                raise interrupted(
                    f"Storage {storage.id} is partly purged and kept; re-run the same command to resume."
                ) from None
            except CharmingError as error:
                progress.close()
                failures += 1
                self.stderr.write(f"Could not purge storage {storage.id}: {error.message}")
                continue
            progress.close()
            self.stdout.write(
                f"Purged storage {result.storage_id} of '{result.app_name}' ({result.owner}): "
                f"{result.records_purged} records."
            )
        if failures:
            raise CommandError(f"{failures} of {len(rows)} storage could not be purged; see above.")
        self.stdout.write(self.style.SUCCESS(f"Done: {len(rows)} storage purged."))

    def _change_history_purge(self, *, dry_run: bool) -> None:
        days = change_retention_days()
        cutoff = change_cutoff(days=days)
        scope = f"Change history older than {days} days (before {cutoff:%Y-%m-%d %H:%M} UTC):"
        deliveries = "Webhook deliveries received before then (the record each hook's listing shows):"
        if dry_run:
            self.stdout.write(f"{scope} {changes_made_before(cutoff)} changes would be deleted.")
            self.stdout.write(f"{deliveries} {hook_deliveries_before(cutoff)} would be deleted.")
            return
        self.stdout.write(f"{scope} {changes_purge(older_than=cutoff)} changes deleted.")
        self.stdout.write(f"{deliveries} {hook_deliveries_purge(before=cutoff)} deleted.")


def _app_uuid(value: str) -> uuid.UUID:
    parsed = parse_uuid(value)
    if parsed is None:
        raise CommandError(f"--app-id must be an app's UUID, got {clip_repr(value)}.", returncode=EXIT_USAGE)
    return parsed
