"""export_app: a download link for an app as one file (apps_registry/services/bundles.py)."""

from __future__ import annotations

from django.conf import settings

from apps_registry.pages.bundle_views import DOWNLOAD_SECONDS, download_link
from apps_registry.services.bundles import bundle_size
from mcp_tools.results import envelope_ok
from mcp_tools.tools import ToolCall, ToolResult, db


async def handle_export(call: ToolCall) -> ToolResult:
    app, size = await db(bundle_size, actor=call.user, app_id=call.arguments["app_id"])
    url = settings.CHARMING_PUBLIC_URL.rstrip("/") + download_link(user_id=call.user.pk, app_id=app.id)
    value = {
        "app_id": str(app.id),
        "url": url,
        "expires_in_seconds": DOWNLOAD_SECONDS,
        "records": size.records,
        "versions": size.versions,
    }
    text = (
        f"The bundle of '{app.name}' ({size.records} records, {size.versions} versions) downloads from {url} for the "
        f"next {DOWNLOAD_SECONDS // 60} minutes. Give the person the link; importing it (the home page's 'Import an "
        "app') makes a new app with the same definition, history and records."
    )
    return envelope_ok(value, text=text)
