"""ASGI entry point: Django (admin, REST API) plus the MCP endpoint at /mcp (see mcp_tools/asgi.py)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "charming.settings")
django_application = get_asgi_application()

from mcp_tools.asgi import application_build  # noqa: E402 - needs Django set up first

application = application_build(django_application)
