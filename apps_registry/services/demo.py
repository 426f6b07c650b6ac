"""The demo account `make run` sets up, so a fresh checkout has something to talk to."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from apps_registry.exceptions import OperationFailed
from apps_registry.models import ApiToken, App
from apps_registry.services.definitions import app_definition_save
from apps_registry.services.email_confirmation import email_confirmed_by_operator
from apps_registry.services.tokens import token_create, token_hash

DEMO_USERNAME = "demo"
STAFF_USERNAME = "staff"
DEMO_TOKEN_NAME = "demo"
# Set as first_name on the accounts demo_setup creates, so it only ever manages its own accounts.
DEMO_MARKER = "Charming demo"
DEMO_BUDGET_FILE = Path(__file__).resolve().parents[2] / "examples" / "budget.json"


@dataclass(frozen=True)
class DemoCredentials:
    username: str
    token: str
    staff_username: str
    staff_password: str
    budget_app_id: str = ""
    # The demo user's password for the site's log-in page (/accounts/login/).
    password: str = ""


def _secrets_file() -> Path:
    return Path(settings.BASE_DIR) / "var" / "demo-credentials.txt"


@transaction.atomic
def demo_setup() -> DemoCredentials:
    """Create (or reuse) the demo user with its password and token, and a staff login; idempotent.

    The plaintexts are kept in var/demo-credentials.txt (local only, git-ignored) so a second
    run can print working credentials; if the file is gone or stale, fresh ones are issued.
    """
    demo, _ = _demo_account(DEMO_USERNAME, email="demo@example.com")
    staff, created = _demo_account(STAFF_USERNAME, email="staff@example.com", is_staff=True, is_superuser=True)
    for account in (demo, staff):  # demo_setup vouches for its own accounts: no mail to open
        email_confirmed_by_operator(user=account)
    saved = _read_saved()
    token = saved.get("token", "")
    if (
        not token
        or not ApiToken.objects.filter(secret_hash=token_hash(token), user=demo, revoked_at__isnull=True).exists()
    ):
        token = token_create(user=demo, name=DEMO_TOKEN_NAME).plaintext
    password = _password(staff, saved.get("staff_password", ""), fresh=created)
    demo_password = _password(demo, saved.get("demo_password", ""))
    _secrets_file().write_text(f"token={token}\nstaff_password={password}\ndemo_password={demo_password}\n")
    _secrets_file().chmod(0o600)
    budget = _demo_budget_app(demo)
    return DemoCredentials(
        username=DEMO_USERNAME,
        token=token,
        staff_username=STAFF_USERNAME,
        staff_password=password,
        budget_app_id=str(budget.id),
        password=demo_password,
    )


def _password(user: Any, saved: str, *, fresh: bool = False) -> str:
    """The saved password if it still works, else a new random one set on the account."""
    if fresh or not saved or not user.check_password(saved):
        saved = secrets.token_urlsafe(12)
        user.set_password(saved)
        user.save(update_fields=["password"])
    return saved


def _demo_account(username: str, **defaults: Any) -> tuple[Any, bool]:
    """The demo's own account, created and marked as such; an existing account is never taken over."""
    user, created = get_user_model().objects.get_or_create(
        username=username, defaults={**defaults, "first_name": DEMO_MARKER}
    )
    if not created and user.first_name != DEMO_MARKER:
        raise OperationFailed(
            f"A user named {username!r} already exists and was not created by demo_setup; demo_setup never "
            "takes over existing accounts. Run it on a database without that user (it is for local demos)."
        )
    return user, created


def _demo_budget_app(demo: Any) -> App:
    """examples/budget.json for the demo user: created once, then re-saved into the same app (data kept)."""
    definition = json.loads(DEMO_BUDGET_FILE.read_text())
    existing = App.objects.filter(owner=demo, name=definition["name"]).order_by("created_at").first()
    return app_definition_save(actor=demo, definition=definition, app_id=existing.id if existing else None)


def _read_saved() -> dict[str, str]:
    path = _secrets_file()
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return dict(pairs)
