"""Create or update an app from a definition file (the author format v1) and print its id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps_registry.exceptions import CharmingError, InvalidDefinition
from apps_registry.services.definitions import app_definition_save
from apps_registry.values import clip, parse_uuid


class Command(BaseCommand):
    help = (
        "Create an app from a definition file, or replace the definition of an existing app (--app-id). "
        "A definition with problems is refused whole and every problem is listed. Prints the app id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="Path to the app definition (JSON), e.g. examples/budget.json")
        parser.add_argument("--owner", required=True, help="Username of the app's owner")
        parser.add_argument("--app-id", help="UUID of the app to create or replace (default: a new app)")

    def handle(self, *args: Any, file: str, owner: str, app_id: str | None, **options: Any) -> None:
        path = Path(file)
        try:
            definition = json.loads(path.read_text())
        except FileNotFoundError:
            raise CommandError(f"No such file: '{file}'.") from None
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"'{file}' is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None
        try:
            user = get_user_model().objects.get(username=owner)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named '{owner}'. Create it first (manage.py createsuperuser).") from None
        parsed_id = None
        if app_id is not None:
            parsed_id = parse_uuid(app_id)
            if parsed_id is None:
                raise CommandError(f"--app-id '{clip(app_id)}' is not a UUID.")
        try:
            app = app_definition_save(actor=user, definition=definition, app_id=parsed_id)
        except InvalidDefinition as exc:
            for error in exc.errors or []:
                self.stderr.write(f"{error['path']}: {error['message']}")
            count = len(exc.errors or [])
            raise CommandError(f"'{file}' has {count} problem(s), listed above; nothing was saved.") from None
        except CharmingError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(app.id))
