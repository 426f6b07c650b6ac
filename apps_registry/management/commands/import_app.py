"""Create or update an app from a definition file (the author format v1), print its id and its advisories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps_registry.exceptions import CharmingError, InvalidDefinition, TestsFailed
from apps_registry.selectors import advisories_open_for, app_owned_named
from apps_registry.services.definitions import definition_save
from apps_registry.values import clip, parse_uuid


class Command(BaseCommand):
    help = (
        "Create an app from a definition file, or replace the definition of an existing app (--app-id). "
        "A definition with problems, or whose tests fail, is refused whole and every problem is listed. Prints the "
        "app id, then its advisories. Refuses a second app with the same name for the same owner unless --new."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="Path to the app definition (JSON), e.g. examples/budget.json")
        parser.add_argument("--owner", required=True, help="Username of the app's owner")
        parser.add_argument("--app-id", help="UUID of the app to create or replace (default: a new app)")
        parser.add_argument(
            "--new", action="store_true", help="Create another app even if the owner has one with the same name"
        )
        parser.add_argument(
            "--allow-failing-tests", action="store_true", help="Save even if the definition's tests fail"
        )
        parser.add_argument(
            "--migrate",
            help='Migrate the stored records with the save: a JSON object {"<collection>": "<CEL over record>"} '
            "(docs/authoring.md, Migrating stored records)",
        )

    def handle(
        self,
        *args: Any,
        file: str,
        owner: str,
        app_id: str | None,
        new: bool = False,
        allow_failing_tests: bool = False,
        migrate: str | None = None,
        **options: Any,
    ) -> None:
        path = Path(file)
        try:
            definition = json.loads(path.read_text())
        except FileNotFoundError:
            raise CommandError(f"No such file: '{file}'.") from None
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"'{file}' is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None
        spec = None
        if migrate is not None:
            try:
                spec = json.loads(migrate)
            except json.JSONDecodeError as exc:
                raise CommandError(f"--migrate is not valid JSON: {exc.msg} at column {exc.colno}.") from None
        try:
            user = get_user_model().objects.get(username=owner)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named '{owner}'. Create it first (manage.py createsuperuser).") from None
        parsed_id = None
        if app_id is not None:
            parsed_id = parse_uuid(app_id)
            if parsed_id is None:
                raise CommandError(f"--app-id '{clip(app_id)}' is not a UUID.")
        name = definition.get("name") if isinstance(definition, dict) else None
        if parsed_id is None and not new and isinstance(name, str):
            same = app_owned_named(owner=user, name=name.strip())
            if same is not None:
                raise CommandError(
                    f"'{owner}' already has an app named '{name.strip()}' ({same.id}). Pass --app-id {same.id} "
                    "to replace its definition, or --new to create another app with the same name."
                )
        try:
            saved = definition_save(
                actor=user,
                definition=definition,
                app_id=parsed_id,
                allow_failing_tests=allow_failing_tests,
                migrate=spec,
            )
        except InvalidDefinition as exc:
            for error in exc.errors or []:
                self.stderr.write(f"{error['path']}: {error['message']}")
            count = len(exc.errors or [])
            raise CommandError(f"'{file}' has {count} problem(s), listed above; nothing was saved.") from None
        except TestsFailed as exc:
            for error in exc.errors or []:
                self.stderr.write(f"{error['path']}: {error['message']}")
            count = len(exc.errors or [])
            raise CommandError(
                f"{count} test(s) of '{file}' fail, listed above; nothing was saved "
                "(--allow-failing-tests saves anyway)."
            ) from None
        except CharmingError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(saved.app.id))
        if saved.migration is not None:
            self.stderr.write(saved.migration.text)
        for advisory in advisories_open_for(saved.app):
            self.stderr.write(f"advisory [{advisory.severity}] {advisory.kind}: {advisory.summary}")
