"""Absolute addresses of a person's pages, on CHARMING_PUBLIC_URL rather than any request's Host: what leaves the
server in e-mails and tool results, for a person to open."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse


def app_page_url(app_id: object) -> str:
    """The app's own page (apps_registry/pages/app_views.py), for its members once signed in."""
    return settings.CHARMING_PUBLIC_URL + reverse("app_page", args=[app_id])


def public_page_url(handle: str) -> str:
    """A public app's page (apps_registry/pages/public_views.py), for anyone."""
    return settings.CHARMING_PUBLIC_URL + reverse("public_page", args=[handle])
