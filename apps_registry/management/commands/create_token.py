"""Issue an API token for a user and print it once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps_registry.access import SCOPES
from apps_registry.exceptions import InvalidInput
from apps_registry.services.tokens import token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME. The token is printed once; only its prefix is shown again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="default", help="A label to recognise the token by.")
        parser.add_argument("--expires-days", type=int, default=None, help="Expire the token after N days.")
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            metavar="SCOPE",
            help=f"A scope the token carries; repeat for several ({', '.join(SCOPES)}). Default: all of them.",
        )

    def handle(
        self,
        *args: Any,
        username: str,
        name: str,
        expires_days: int | None,
        scopes: list[str] | None,
        **options: Any,
    ) -> None:
        for scope in scopes or []:
            if scope not in SCOPES:
                raise CommandError(f"Unknown scope {scope!r}: choose from {', '.join(SCOPES)}.")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}. Create it first (manage.py createsuperuser or the admin).")
        try:
            issued = token_create(user=user, name=name, expires_days=expires_days, scopes=scopes, by_operator=True)
        except InvalidInput:
            raise CommandError(f"--expires-days must be a positive number of days, got {expires_days}.") from None
        expiry = f", expires {issued.token.expires_at:%Y-%m-%d %H:%M} UTC" if issued.token.expires_at else ""
        self.stderr.write(
            f"Token {issued.token.prefix}… for {username} ({name}{expiry}; scopes {issued.token.scopes}). "
            "It is shown only once:"
        )
        self.stdout.write(issued.plaintext)
