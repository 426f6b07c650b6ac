"""Remove an app and all its data at once (staff removal, e.g. abuse), after confirmation."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from apps_registry.exceptions import CharmingError
from apps_registry.management.commands._ops import (
    EXIT_CODES_HELP,
    EXIT_USAGE,
    OpsCommand,
    Progress,
    add_batch_size_argument,
    confirm,
    declined,
    interrupted,
    positive_batch_size,
)
from apps_registry.selectors import app_summary_for_staff
from apps_registry.services.retention import DEFAULT_BATCH_SIZE, app_purge
from apps_registry.values import clip_repr, parse_uuid


class Command(OpsCommand):
    help = (
        "Delete app APP_ID (whoever owns it) with its routes, members, advisories, feedback and records, now: "
        "nothing is retained. Asks for confirmation unless --yes. Writes the audit events 'app.purge' and "
        "'storage.purge'. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("app_id", metavar="APP_ID")
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        add_batch_size_argument(parser, DEFAULT_BATCH_SIZE)

    def handle(self, *args: Any, app_id: str, yes: bool, batch_size: int, **options: Any) -> None:
        positive_batch_size(batch_size)
        if parse_uuid(app_id) is None:
            raise CommandError(f"APP_ID must be an app's UUID, got {clip_repr(app_id)}.", returncode=EXIT_USAGE)
        summary = app_summary_for_staff(app_id=app_id)
        if summary is None:
            raise CommandError(f"No app with id {app_id!r} exists.")
        app = summary.app
        self.stdout.write(
            f"App '{app.name}' ({app.id}) of {app.owner.get_username()}: {summary.records} records, "
            f"{summary.routes} routes, {summary.members} members."
        )
        if not yes and not confirm("The app and all its data will be deleted now, for good."):
            raise declined()
        progress = Progress(self.stdout, label=f"'{app.name}'", total=summary.records)
        try:
            result = app_purge(
                actor=None, app_id=app_id, confirmed_via="command", batch_size=batch_size, on_batch=progress
            )
        except KeyboardInterrupt:
            raise interrupted(
                f"The app is deleted; part of its records remain as retained storage. Finish with: "
                f"manage.py purge_storage --app-id {app_id} --yes"
            ) from None
        except CharmingError as error:
            raise CommandError(error.message) from None
        finally:
            progress.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"Purged app '{result.app_name}' ({result.app_id}) of {result.owner}: {result.records_purged} records."
            )
        )
