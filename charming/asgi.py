"""ASGI entry point: Django (admin, REST API, pages; the pages' live polls before it) plus the MCP endpoint at /mcp
(see mcp_tools/asgi.py)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
django_application = get_asgi_application()

from apps_registry.pages.live import LiveChangesASGI  # noqa: E402 - needs Django set up first
from apps_registry.redaction import uvicorn_logs_redact  # noqa: E402 - needs Django set up first
from mcp_tools.asgi import application_build  # noqa: E402 - needs Django set up first
from mcp_tools.database import db  # noqa: E402 - needs Django set up first

# uvicorn configured its loggers before loading this module; its access lines (every request's path and query)
# go through the same redactor as Django's.
uvicorn_logs_redact()
# Open app pages poll /apps/<id>/changes/ every second: answered before Django (apps_registry/pages/live.py).
application = application_build(LiveChangesASGI(django_application, run_db=db))
