"""Re-attach retained storage of a deleted app to an app of the same owner."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from apps_registry.exceptions import CharmingError
from apps_registry.management.commands._ops import EXIT_CODES_HELP, EXIT_USAGE, OpsCommand
from apps_registry.services.retention import storage_restore
from apps_registry.values import parse_uuid


class Command(OpsCommand):
    help = (
        "Restore retained storage STORAGE_ID (from a deleted app) into app APP_ID of the same owner, within "
        "CHARMING_STORAGE_RETENTION_DAYS of the deletion. If the app's own storage is empty, the retained "
        "storage replaces it; otherwise its records are merged in, refused whole if any record id clashes. "
        "Writes the audit event 'storage.restore'. " + EXIT_CODES_HELP
    )

    interrupted_hint = "The restore is one transaction: nothing was restored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "storage_id", metavar="STORAGE_ID", help="Id of the retained storage (purge_storage --dry-run lists them)."
        )
        parser.add_argument("--to-app", required=True, metavar="APP_ID", help="Id of the app to restore into.")

    def handle(self, *args: Any, storage_id: str, to_app: str, **options: Any) -> None:
        for flag, value in (("STORAGE_ID", storage_id), ("--to-app", to_app)):
            if parse_uuid(value) is None:
                raise CommandError(f"{flag} must be a UUID, got {value!r}.", returncode=EXIT_USAGE)
        try:
            result = storage_restore(actor=None, storage_id=storage_id, to_app_id=to_app, confirmed_via="command")
        except CharmingError as error:
            raise CommandError(error.message) from None
        how = "attached as its storage" if result.mode == "attached" else "merged into its storage"
        self.stdout.write(
            self.style.SUCCESS(
                f"Restored {result.records_restored} records of deleted app '{result.from_app_name}' "
                f"({result.from_app_id}) into app '{result.app_name}' ({result.app_id}): {how}."
            )
        )
