"""Template context every page gets (a context processor, in settings.TEMPLATES)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from apps_registry.selectors import email_status_of


def email_status(request: HttpRequest) -> dict[str, Any]:
    """`email_status`: the signed-in person's address and whether it is confirmed (None when signed out), read
    only by a page that shows it (base.html's reminder), so other renders cost no query."""
    return {
        "email_status": SimpleLazyObject(
            lambda: email_status_of(request.user) if request.user.is_authenticated else None
        )
    }
