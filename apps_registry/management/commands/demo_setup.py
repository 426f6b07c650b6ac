"""Set up the demo user, token and staff login, and print how to reach the service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps_registry.exceptions import CharmingError
from apps_registry.services.demo import demo_setup
from charming.serving import listen_problem


class Command(BaseCommand):
    help = "Create or reuse the demo user with a password and an API token, and a staff login; print them. Idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default=settings.CHARMING_PUBLIC_URL, help="Where the server listens.")
        parser.add_argument(
            "--listen",
            default="",
            metavar="HOST:PORT",
            help="Refuse (and print no 'ready') unless a server can listen there: `make run` passes its HOST and PORT.",
        )

    def handle(self, *args: Any, base_url: str, listen: str, **options: Any) -> None:
        problem = listen_problem(listen) if listen else ""
        if problem:
            raise CommandError(problem)
        try:
            creds = demo_setup()
        except CharmingError as error:
            raise CommandError(error.message) from None
        base = base_url.rstrip("/")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Charming is ready.",
                    f"  MCP endpoint : {base}/mcp",
                    f"  Demo user    : {creds.username}",
                    f"  Demo token   : {creds.token}",
                    f"  Sign in      : {base}/accounts/login/ as {creds.username} / {creds.password}",
                    f"  Budget app   : {creds.budget_app_id}",
                    f"  Admin        : {base}/admin/",
                    f"  Staff login  : {creds.staff_username} / {creds.staff_password}",
                    "",
                ]
            )
        )
